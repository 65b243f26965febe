"""Reproduce paper 001's Figures 1 and 2 (eps-ADUM vs eps-TM vs AdaSSP-TM; PEHE vs p).

Writes under results/adum/: figure1.csv (every split), figure1_summary.csv, figure1.png,
figure2.csv, figure2_summary.csv, figure2.png and claims.json (the paper's claims checked).

    .venv/bin/python scripts/adum_figures.py [--splits 20] [--n 20000] [--seed 0] [--jobs 1]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from collabcausal.simulations.adum import METHODS, best_p, figure1, figure2, summarize
from collabcausal.strict_json import dumps, write_json


def main() -> None:
    """Run both experiments and write the results."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--splits", type=int, default=20)
    parser.add_argument("--n", type=int, default=20000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--out", type=Path, default=Path("results/adum"))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)

    fig1 = figure1(n=args.n, n_splits=args.splits, seed=args.seed, n_jobs=args.jobs)
    fig1.to_csv(args.out / "figure1.csv", index=False)
    s1 = summarize(fig1, ["epsilon", "method"])
    s1.to_csv(args.out / "figure1_summary.csv", index=False)
    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    # methods side by side at each epsilon (x shifted by a few percent) so error bars do not overlap;
    # the tuned p of eps-ADUM goes under the tick labels instead of onto the markers
    for k, method in enumerate(METHODS):
        part = s1[s1["method"] == method]
        shift = 1.08 ** (k - (len(METHODS) - 1) / 2)
        ax.errorbar(part["epsilon"] * shift, part["pehe_mean"], yerr=part["pehe_sd"], marker="o", capsize=3,
                    label=method)
    adum = s1[s1["method"] == "eps-ADUM"].sort_values("epsilon")
    ax.set_xscale("log")
    ax.set_xticks(adum["epsilon"], [f"{e:g}\np={p}" for e, p in zip(adum["epsilon"], adum["hyper_mode"], strict=True)])
    ax.minorticks_off()
    ax.set(yscale="log", xlabel="privacy budget epsilon (log scale); p: eps-ADUM groups tuned on validation",
           ylabel="test PEHE (outcome units, mean ± SD)",
           title=f"Figure 1: sigma=1, n={args.n}, {args.splits} splits")
    ax.legend(loc="upper right")
    fig.tight_layout()
    fig.savefig(args.out / "figure1.png", dpi=150)

    fig2 = figure2(n=args.n, n_splits=args.splits, seed=args.seed, n_jobs=args.jobs)
    fig2.to_csv(args.out / "figure2.csv", index=False)
    s2 = summarize(fig2, ["epsilon", "p"])
    s2.to_csv(args.out / "figure2_summary.csv", index=False)
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for eps, part in s2.groupby("epsilon"):
        ax.errorbar(part["p"], part["pehe_mean"], yerr=part["pehe_sd"], marker=".", capsize=2, label=f"eps={eps:g}")
    ax.set(xscale="log", yscale="log", xlabel="number of groups p (log scale)",
           ylabel="test PEHE (outcome units, mean ± SD)",
           title=f"Figure 2: eps-ADUM, sigma=0.1, n={args.n}, {args.splits} splits")
    ax.legend()
    fig.tight_layout()
    fig.savefig(args.out / "figure2.png", dpi=150)

    wide = s1.pivot(index="epsilon", columns="method", values="pehe_mean")
    claims = {
        "figure1_mean_pehe": {f"{e:g}": {m: round(float(wide.loc[e, m]), 4) for m in METHODS} for e in wide.index},
        "adum_beats_tm_for_eps_le_5": {f"{e:g}": bool(wide.loc[e, "eps-ADUM"] < wide.loc[e, "eps-TM"])
                                       for e in wide.index if e <= 5},
        "tm_beats_adum_for_eps_gt_5": {f"{e:g}": bool(wide.loc[e, "eps-TM"] < wide.loc[e, "eps-ADUM"])
                                       for e in wide.index if e > 5},
        "figure2_best_p": {f"{e:g}": int(p) for e, p in best_p(fig2).items()},
    }
    write_json(args.out / "claims.json", claims)
    print(s1.to_string(index=False))
    print(dumps(claims))


if __name__ == "__main__":
    main()
