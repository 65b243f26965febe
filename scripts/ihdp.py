"""IHDP (any folder of IHDP-npci replications): sqrt(PEHE) of every learner beside its baselines.

Every row is printed with the constant-ATE baselines (the true ATE everywhere; the learner's own
ATE estimate everywhere) and the non-private EconML learner of the same kind on the same data, as
mean (sd) [min–max] over replications x seeds, with how many cells beat each constant. Writes
under --out: ihdp.csv (every cell), ihdp_summary.csv, ihdp.md (the markdown table) and ihdp.png.

    .venv/bin/python scripts/ihdp.py --outcome-bounds LOW HIGH [--data-dir DIR]
        [--replications 1 2 ...] [--learners S T ...] [--epsilons 1 8] [--seeds 0 1 2 3 4]
        [--continuous-bound 6] [--quick] [--out results/ihdp]

The private learners need --outcome-bounds (public, declared: IHDP outcomes have no range known
in advance); a share of clipped outcomes above 5% is printed as a warning. ``--quick`` runs
replication 1 with two seeds and three learners (the CI configuration).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from collabcausal.errors import CollabCausalError
from collabcausal.simulations.cate_baselines import baseline_summary, to_markdown
from collabcausal.simulations.ihdp import DEFAULT_LEARNERS, NON_PRIVATE, PRIVATE, clipping_notes, ihdp_table

QUICK = {"replications": [1], "learners": ["S", "DR", "DP-EBM S"], "epsilons": [8.0], "seeds": [0, 1]}


def plot(table, out: Path, title: str) -> None:
    cells = table.dropna(subset=["sqrt_pehe"])
    groups = list(cells.groupby(["learner", "epsilon"], sort=False))
    labels = [f"{name}" + ("" if np.isinf(eps) else f" eps={eps:g}") for (name, eps), _ in groups]
    fig, ax = plt.subplots(figsize=(9, 4.5))
    ax.boxplot([g["sqrt_pehe"] for _, g in groups], showfliers=True)
    ax.plot(range(1, len(groups) + 1), [g["econml_sqrt_pehe"].mean() for _, g in groups], "s", color="C2",
            label="EconML peer (mean)")
    ax.axhline(float(cells["const_true_sqrt_pehe"].mean()), color="grey", ls="--", lw=1,
               label="constant true ATE (mean)")
    ax.set_xticks(range(1, len(groups) + 1), labels, rotation=60, ha="right", fontsize=7)
    ax.set(yscale="log", xlabel="learner (privacy budget epsilon)",
           ylabel="sqrt(PEHE), within-sample (outcome units)", title=title)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "ihdp.png", dpi=150)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", type=Path, default=None, help="folder of ihdp_npci_<k>.csv (default: bundled)")
    parser.add_argument("--replications", type=int, nargs="+", default=None, help="default: every file in the folder")
    parser.add_argument("--learners", nargs="+", choices=NON_PRIVATE + PRIVATE, default=list(DEFAULT_LEARNERS))
    parser.add_argument("--epsilons", type=float, nargs="+", default=[1.0, 8.0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--outcome-bounds", type=float, nargs=2, metavar=("LOW", "HIGH"), default=None)
    parser.add_argument("--continuous-bound", type=float, default=6.0, help="declared |x1..x6| bound (z-scores)")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out", type=Path, default=Path("results/ihdp"))
    args = parser.parse_args(argv)
    run = {"replications": args.replications, "learners": args.learners, "epsilons": args.epsilons,
           "seeds": args.seeds} | (QUICK if args.quick else {})
    try:
        table = ihdp_table(run["replications"], run["learners"], run["epsilons"], seeds=run["seeds"],
                           data_dir=args.data_dir, outcome_bounds=args.outcome_bounds,
                           continuous_bound=args.continuous_bound)
    except CollabCausalError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    args.out.mkdir(parents=True, exist_ok=True)
    table.to_csv(args.out / "ihdp.csv", index=False)
    summary = baseline_summary(table, ["learner", "epsilon"])
    summary.to_csv(args.out / "ihdp_summary.csv", index=False)
    reps = sorted(int(r) for r in table["replication"].unique())
    markdown = to_markdown(summary)
    (args.out / "ihdp.md").write_text(markdown + "\n")
    plot(table, args.out, f"IHDP replications {reps}, {len(run['seeds'])} seeds: sqrt(PEHE) per learner")
    print(f"IHDP replications {reps}, seeds {run['seeds']}, declared outcome bounds {args.outcome_bounds}; "
          "cells: mean (sd) [min–max] over replications x seeds")
    print(markdown)
    for line in clipping_notes(table):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
