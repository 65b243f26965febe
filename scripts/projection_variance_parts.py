"""The parts of each projection coefficient's variance in one study's report (docs/dp-cate-projection.md).

Runs one ``dp_effects`` study of the projection benchmark's design (collabcausal/simulations/cate_benchmark.py,
eps 1, secure aggregation over the 4 sites, data seed ``--seed``; the DP noise is OpenDP's, unseeded) and
prints, per coefficient, report.json's estimate, SE and variance parts: sampling (the sandwich), DP noise
of the point sums, DP noise of the Gram matrix, the meat's noise and the nuisance-replicate term.

    .venv/bin/python scripts/projection_variance_parts.py --outcome continuous --projection-clip 1 --seed 1007
    .venv/bin/python scripts/projection_variance_parts.py --outcome continuous --projection-clip 1 --seed 1007 \\
        --projection-centre 1
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from collabcausal.simulations.cate_benchmark import private_report, simulate_cate_sites, study_spec


def main(argv: list[str] | None = None) -> int:
    """Print the parts (module docstring); 0."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--outcome", choices=("binary", "continuous"), default="continuous")
    parser.add_argument("--projection-clip", type=float, default=None)
    parser.add_argument("--projection-centre", type=float, default=None)
    parser.add_argument("--seed", type=int, default=1007, help="data seed")
    parser.add_argument("--n", type=int, default=25_000, help="subjects per site")
    args = parser.parse_args(argv)
    sites = simulate_cate_sites(args.n, args.outcome, np.random.default_rng(args.seed))
    spec = study_spec(args.outcome, 1.0, projection_clip=args.projection_clip,  # type: ignore[arg-type]
                      projection_centre=args.projection_centre)
    section = private_report(sites, spec)["effect_modification"]
    print(f"{args.outcome} outcome, data seed {args.seed}, projection_clip {args.projection_clip}, "
          f"projection_centre {args.projection_centre}; allocation {section['allocation']}")
    for c in section["coefficients"]:
        print(f"  {c['name']:>10}: estimate {c['estimate']:.4f}, se {c['se']:.4f}; sampling {c['sampling_var']:.2e}, "
              f"DP noise {c['noise_var']:.2e}, Gram noise {c['gram_noise_var']:.2e}, meat's noise "
              f"{c['variance_uncertainty']:.2e}, nuisance replicates {c['nuisance_var']:.2e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
