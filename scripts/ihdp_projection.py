"""IHDP: where the private projection of ``dp_effects`` stands against the constant ATE and the learners.

collabcausal/simulations/ihdp_projection.py says what a cell is. Prints one markdown table: per
method and epsilon, sqrt(PEHE) within-sample as mean (sd) [min-max] over replications x draws (the DP
noise is unseeded; ``--draws`` studies per replication and epsilon), how many cells beat the constant
true ATE and the constant private ATE of the same release, the refusals, and the projection's mean
coefficient SE.

    .venv/bin/python scripts/ihdp_projection.py --outcome-bounds -5 25 [--data-dir DIR]
        [--replications 1 2 ...] [--epsilons 1 4 16] [--modifiers x1 x2 ...] [--parties 1]
        [--draws 5] [--projection-clip C] [--quick]

``--quick`` runs replication 1 at epsilon 16 with one draw and the S-learner only.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from collabcausal.errors import CollabCausalError
from collabcausal.simulations.ihdp import NON_PRIVATE, load_ihdp, replications_in
from collabcausal.simulations.ihdp_projection import (
    DEFAULT_MODIFIERS,
    NEAR_NON_PRIVATE,
    non_private_sqrt_pehe,
    oracle_sqrt_pehe,
    private_projection,
)


def _cell(values: list[float]) -> str:
    v = np.array([x for x in values if np.isfinite(x)])
    return "—" if v.size == 0 else f"{v.mean():.3g} ({v.std():.2g}) [{v.min():.3g}–{v.max():.3g}]"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", type=Path, default=None, help="folder of ihdp_npci_<k>.csv (default: bundled)")
    parser.add_argument("--replications", type=int, nargs="+", default=None, help="default: every file in the folder")
    parser.add_argument("--epsilons", type=float, nargs="+", default=[1.0, 4.0, 16.0])
    parser.add_argument("--modifiers", nargs="+", default=list(DEFAULT_MODIFIERS))
    parser.add_argument("--outcome-bounds", type=float, nargs=2, required=True, metavar=("LOW", "HIGH"),
                        help="the declared public outcome range (IHDP outcomes have none known in advance)")
    parser.add_argument("--parties", type=int, default=1, help="parties per study (subject k to party k mod K)")
    parser.add_argument("--projection-clip", type=float, default=None, metavar="C",
                        help="[dp_effects] projection_clip in outcome-range widths (default: the score's own bound)")
    parser.add_argument("--draws", type=int, default=5, help="private studies per replication and epsilon")
    parser.add_argument("--quick", action="store_true", help="replication 1, epsilon 16, one draw, S-learner")
    args = parser.parse_args(argv)
    try:
        if args.data_dir is not None:
            reps = args.replications or list(replications_in(args.data_dir))
        else:
            reps = args.replications or [1, 2, 3, 4, 5]
        epsilons, draws, learners = args.epsilons, args.draws, NON_PRIVATE
        if args.quick:
            reps, epsilons, draws, learners = [1], [16.0], 1, ("S",)
        data = [load_ihdp(r, args.data_dir) for r in reps]
    except CollabCausalError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    bounds = tuple(args.outcome_bounds)
    print(f"IHDP replications {reps}, modifiers {' '.join(args.modifiers)}, {args.parties} part"
          f"{'y' if args.parties == 1 else 'ies'}, outcome bounds {bounds}, projection clip {args.projection_clip}, "
          f"{draws} draw(s) per cell\n")
    truth_const = [float(np.sqrt(np.mean((d.tau - d.tau.mean()) ** 2))) for d in data]
    rows: list[tuple[str, str, list[float], list[float], str, str]] = []
    for eps in [*epsilons, NEAR_NON_PRIVATE]:
        pehe, own, truth, ses, refusals = [], [], [], [], []
        for d, const in zip(data, truth_const, strict=True):
            for _ in range(draws if eps != NEAR_NON_PRIVATE else 1):
                cell = private_projection(d, eps, args.modifiers, bounds, n_parties=args.parties,
                                          projection_clip=args.projection_clip)
                if cell.refused:
                    refusals.append(cell.refused)
                    continue
                pehe.append(cell.sqrt_pehe), own.append(cell.constant_sqrt_pehe), truth.append(const)
                ses.append(float(np.mean(cell.se[1:])))
        beats = (f"{sum(p < c for p, c in zip(pehe, truth, strict=True))}/{len(pehe)}",
                 f"{sum(p < c for p, c in zip(pehe, own, strict=True))}/{len(pehe)}")
        note = f"mean slope SE {np.mean(ses):.3g}" if ses else ""
        if refusals:
            note += f"{'; ' if note else ''}refused {len(refusals)}: {refusals[0]}"
        label = "1e4 (little noise)" if eps == NEAR_NON_PRIVATE else f"{eps:g}"
        rows.append(("dp_effects projection", label, pehe, own, f"{beats[0]}, {beats[1]}", note))
    rows.append(("oracle projection on the modifiers (true CATE)", "—",
                 [oracle_sqrt_pehe(d, args.modifiers, 6.0) for d in data], [], "—", "not an estimator"))
    for name in learners:
        values = [non_private_sqrt_pehe(d, name) for d in data]
        wins = sum(v < c for v, c in zip(values, truth_const, strict=True))
        rows.append((f"{name}-learner (non-private)", "—", values, [], f"{wins}/{len(values)}, —", ""))
    print("| method | epsilon | sqrt(PEHE) | constant private ATE | beats true const, own const | note |")
    print("|---|---|---|---|---|---|")
    print(f"| constant true ATE | — | {_cell(truth_const)} | — | — | sd of the true CATE |")
    for name, eps_label, values, own_values, beats_text, note in rows:
        print(f"| {name} | {eps_label} | {_cell(values)} | {_cell(own_values)} | {beats_text} | {note} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
