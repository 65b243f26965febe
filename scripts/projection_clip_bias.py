"""The bias the projection's clips cost, with the true nuisances (docs/dp-cate-projection.md, "Shaping").

On ``--datasets`` fresh datasets of the projection benchmark's design (collabcausal/simulations/
cate_benchmark.py), scores each subject with the true propensity (trimmed) and outcome means, and prints
the mean of the projection on ``(1, z0, z8)`` of the scores clipped as the release clips them
(``projection_clip``: each ``m_q phi`` to ``[-a, a]``), against the exact projection, and how far the z0
slope moves when ``z0 phi`` is clipped at ``kappa a`` instead (a modifier clip), each shift against the
same data's slope.

    .venv/bin/python scripts/projection_clip_bias.py --outcome binary --projection-clip 5
    .venv/bin/python scripts/projection_clip_bias.py --outcome continuous --projection-clip 1
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from collabcausal.simulations.cate_benchmark import modifier_matrix, simulate_cate_sites, true_projection
from collabcausal.simulations.multisite import OUTCOME_RANGE

TRIM = 0.1
KAPPAS = (0.75, 0.6, 0.5, 0.4)


def main(argv: list[str] | None = None) -> int:
    """Print the clipped projection's mean and the modifier clip's shifts (module docstring); 0."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--outcome", choices=("binary", "continuous"), default="binary")
    parser.add_argument("--projection-clip", type=float, default=5.0)
    parser.add_argument("--datasets", type=int, default=20)
    parser.add_argument("--seed", type=int, default=100, help="data seeds seed .. seed + datasets - 1")
    parser.add_argument("--n", type=int, default=25_000, help="subjects per site")
    args = parser.parse_args(argv)
    lo, hi = OUTCOME_RANGE[args.outcome]
    width = hi - lo
    a = min(width / TRIM, args.projection_clip * width)
    slopes, shifts = [], {k: [] for k in KAPPAS}
    for seed in range(args.seed, args.seed + args.datasets):
        sites = simulate_cate_sites(args.n, args.outcome, np.random.default_rng(seed))
        t = np.concatenate([s.T for s in sites]).astype(float)
        y = np.clip(np.concatenate([s.Y for s in sites]), lo, hi)
        e = np.clip(np.concatenate([s.propensity for s in sites]), TRIM, 1 - TRIM)
        mu0 = np.concatenate([s.mean_control for s in sites])
        mu1 = np.concatenate([s.mean_treated for s in sites])
        phi = np.clip(mu1 - mu0 + t * (y - mu1) / e - (1 - t) * (y - mu0) / (1 - e), -width / TRIM, width / TRIM)
        m = modifier_matrix(np.vstack([s.X for s in sites]))
        gram = m.T @ m
        values = np.clip(m * phi[:, None], -a, a)
        beta = np.linalg.solve(gram, values.sum(axis=0))
        slopes.append(beta)
        for k in KAPPAS:
            clipped = values.copy()
            clipped[:, 1] = np.clip(m[:, 1] * phi, -k * a, k * a)
            shifts[k].append(np.linalg.solve(gram, clipped.sum(axis=0))[1] - beta[1])
    slopes_arr = np.array(slopes)
    print(f"{args.outcome} outcome, projection_clip {args.projection_clip:g} (a = {a:g}), true nuisances, "
          f"{args.datasets} datasets of 4 x {args.n}")
    print("clipped projection (intercept, z0, z8): mean " + " / ".join(f"{v:.4f}" for v in slopes_arr.mean(axis=0))
          + ", sd " + " / ".join(f"{v:.4f}" for v in slopes_arr.std(axis=0)) + "; exact "
          + " / ".join(f"{v:.4f}" for v in true_projection(args.outcome)))  # type: ignore[arg-type]
    for k, moved in shifts.items():
        print(f"  z0 phi clipped at {k:g} a: the z0 slope moves by {np.mean(moved):+.4f} (sd {np.std(moved):.4f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
