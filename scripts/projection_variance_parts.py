"""The parts of each projection coefficient's variance in one study's report (docs/dp-cate-projection.md).

Runs one ``dp_effects`` study of the projection benchmark's design (collabcausal/simulations/cate_benchmark.py,
eps 1, secure aggregation over the 4 sites, data seed ``--seed``; the DP noise is OpenDP's, unseeded) and
prints, per coefficient, report.json's estimate, SE and variance parts: sampling (the sandwich), DP noise
of the point sums, DP noise of the Gram matrix, the meat's noise and the nuisance-replicate term. With ``--seeds
FIRST-LAST`` one study per data seed, and each part's mean beside the coefficient's error variance about the truth.

    .venv/bin/python scripts/projection_variance_parts.py --outcome continuous --projection-clip 1 --seed 1007
    .venv/bin/python scripts/projection_variance_parts.py --outcome continuous --projection-clip 1 --seed 1007 \\
        --projection-centre 1
    .venv/bin/python scripts/projection_variance_parts.py --outcome binary --projection-clip 5 --seeds 1000-1059
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from collabcausal.simulations.cate_benchmark import (
    MODIFIERS,
    private_report,
    simulate_cate_sites,
    study_spec,
    true_projection,
)

PARTS = ("sampling_var", "noise_var", "gram_noise_var", "variance_uncertainty", "nuisance_var")
LABELS = ("sampling", "DP noise", "Gram noise", "meat's noise", "nuisance replicates")


def seed_range(text: str) -> range:
    """``A-B`` (inclusive) as a range of data seeds."""
    first, _, last = text.partition("-")
    try:
        return range(int(first), int(last or first) + 1)
    except ValueError:
        raise SystemExit(f"--seeds {text!r}: expected FIRST-LAST, e.g. 1000-1059") from None


def main(argv: list[str] | None = None) -> int:
    """Print the parts (module docstring); 0."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--outcome", choices=("binary", "continuous"), default="continuous")
    parser.add_argument("--projection-clip", type=float, default=None)
    parser.add_argument("--projection-centre", type=float, default=None)
    parser.add_argument("--seed", type=int, default=1007, help="data seed")
    parser.add_argument("--seeds", type=seed_range, default=None,
                        help="FIRST-LAST: one study per data seed; print each part's mean, the error variance about "
                             "the truth and how often the replicate term was floored at 0")
    parser.add_argument("--n", type=int, default=25_000, help="subjects per site")
    args = parser.parse_args(argv)
    spec = study_spec(args.outcome, 1.0, projection_clip=args.projection_clip,  # type: ignore[arg-type]
                      projection_centre=args.projection_centre)
    print(f"{args.outcome} outcome, projection_clip {args.projection_clip}, projection_centre {args.projection_centre}")
    seeds = args.seeds if args.seeds is not None else range(args.seed, args.seed + 1)
    parts, errors = [], []
    for seed in seeds:
        sites = simulate_cate_sites(args.n, args.outcome, np.random.default_rng(seed))
        coefficients = private_report(sites, spec)["effect_modification"]["coefficients"]
        parts.append([[c[k] for k in PARTS] for c in coefficients])
        errors.append(np.array([c["estimate"] for c in coefficients]) - true_projection(args.outcome))
        if args.seeds is None:
            for c in coefficients:
                print(f"  {c['name']:>10}: estimate {c['estimate']:.4f}, se {c['se']:.4f}; "
                      + ", ".join(f"{label} {c[k]:.2e}" for label, k in zip(LABELS, PARTS, strict=True)))
    if args.seeds is not None:
        table, error = np.array(parts), np.array(errors)
        print(f"means over data seeds {seeds.start}-{seeds.stop - 1} ({len(seeds)} studies)")
        for j, name in enumerate(("intercept", *MODIFIERS)):
            mean = table[:, j, :].mean(axis=0)
            print(f"  {name:>10}: " + ", ".join(f"{label} {v:.2e}" for label, v in zip(LABELS, mean, strict=True))
                  + f"; total {mean.sum():.2e}; error variance about the truth {np.mean(error[:, j] ** 2):.2e} "
                  f"(bias^2 {np.mean(error[:, j]) ** 2:.2e}); replicate term floored at 0 in "
                  f"{np.mean(table[:, j, -1] == 0.0):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
