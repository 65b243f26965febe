"""The bias the projection's clips cost, with the true nuisances (docs/dp-cate-projection.md, "Shaping").

On ``--datasets`` fresh datasets of the projection benchmark's design (collabcausal/simulations/
cate_benchmark.py), scores each subject with the true propensity (trimmed) and outcome means, and prints
the mean of the projection on ``(1, z0, z8)`` of the scores clipped as the release clips them
(``projection_clip``: each ``m_q phi`` to ``[-a, a]``), against the exact projection, and how far the z0
slope moves when ``z0 phi`` is clipped at ``kappa a`` instead (a modifier clip), each shift against the
same data's slope. With ``--clip-compensation B`` (binary outcome) it also prints the clipped projection with each
subject's clip loss added back (:func:`~collabcausal.estimators.dp.effects.projection.model_clip_losses`, at most
``B`` widths), under the true nuisances and under the nuisance models ``dp_effects`` fits from the exact statistics
(no DP noise): docs/dp-cate-projection.md, "The clip's expected loss added back".

    .venv/bin/python scripts/projection_clip_bias.py --outcome binary --projection-clip 5
    .venv/bin/python scripts/projection_clip_bias.py --outcome binary --projection-clip 5 --clip-compensation 0.1
    .venv/bin/python scripts/projection_clip_bias.py --outcome continuous --projection-clip 1
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
from numpy.typing import NDArray

from collabcausal.estimators.dp.effects.analysis import fold_models
from collabcausal.estimators.dp.effects.design import FeatureMap
from collabcausal.estimators.dp.effects.projection import binary_outcomes, model_clip_losses
from collabcausal.estimators.dp.effects.release import party_statistics
from collabcausal.estimators.dp.effects.scores import Component
from collabcausal.simulations.cate_benchmark import (
    modifier_matrix,
    simulate_cate_sites,
    study_spec,
    true_projection,
)
from collabcausal.simulations.multisite import OUTCOME_RANGE

TRIM = 0.1
KAPPAS = (0.75, 0.6, 0.5, 0.4)


def _score(t: NDArray[np.float64], y: NDArray[np.float64], e: NDArray[np.float64], mu0: NDArray[np.float64],
           mu1: NDArray[np.float64], width: float) -> NDArray[np.float64]:
    """The AIPW score clipped to the ATE's bound ``R / t`` (``subject_scores``)."""
    return np.clip(mu1 - mu0 + t * (y - mu1) / e - (1 - t) * (y - mu0) / (1 - e), -width / TRIM, width / TRIM)


def _losses(m: NDArray[np.float64], e: NDArray[np.float64], mu0: NDArray[np.float64], mu1: NDArray[np.float64],
            mid: float, width: float, a: float, back: float) -> NDArray[np.float64]:
    """Each subject's clip losses of its three point values (intercept, z0, z8) at a binary outcome's two values."""
    parts = [Component(f"blp_{q}", True, -a - back, a + back, 1.0) for q in range(3)]
    c0, c1 = mu0 - mid, mu1 - mid  # centred, as the party's models give them
    outcomes = binary_outcomes(e, c0, c1, width, lambda arm, value: _score(arm, value, e, c0, c1, width))
    return model_clip_losses(parts, outcomes, m[:, 1:], None, back).rows


def main(argv: list[str] | None = None) -> int:
    """Print the clipped projection's mean and the modifier clip's shifts (module docstring); 0."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--outcome", choices=("binary", "continuous"), default="binary")
    parser.add_argument("--projection-clip", type=float, default=5.0)
    parser.add_argument("--datasets", type=int, default=20)
    parser.add_argument("--seed", type=int, default=100, help="data seeds seed .. seed + datasets - 1")
    parser.add_argument("--n", type=int, default=25_000, help="subjects per site")
    parser.add_argument("--clip-compensation", type=float, default=None, metavar="B",
                        help="binary outcome: also with each clip's loss added back, at most B widths")
    args = parser.parse_args(argv)
    lo, hi = OUTCOME_RANGE[args.outcome]
    width = hi - lo
    a = min(width / TRIM, args.projection_clip * width)
    slopes, shifts = [], {k: [] for k in KAPPAS}
    compensated: dict[str, list[NDArray[np.float64]]] = {"true nuisances": [], "fitted models": []}
    spec = study_spec(args.outcome, 1.0)
    for seed in range(args.seed, args.seed + args.datasets):
        sites = simulate_cate_sites(args.n, args.outcome, np.random.default_rng(seed))
        t = np.concatenate([s.T for s in sites]).astype(float)
        y = np.clip(np.concatenate([s.Y for s in sites]), lo, hi)
        e = np.clip(np.concatenate([s.propensity for s in sites]), TRIM, 1 - TRIM)
        mu0 = np.concatenate([s.mean_control for s in sites])
        mu1 = np.concatenate([s.mean_treated for s in sites])
        phi = _score(t, y, e, mu0, mu1, width)
        m = modifier_matrix(np.vstack([s.X for s in sites]))
        gram = m.T @ m
        values = np.clip(m * phi[:, None], -a, a)
        beta = np.linalg.solve(gram, values.sum(axis=0))
        slopes.append(beta)
        if args.clip_compensation is not None:
            back = args.clip_compensation * width
            fm = FeatureMap(spec.bounds, spec.outcome_range, len(sites))
            stats = sum(party_statistics(s.X, s.T, s.Y, fm, i, np.zeros(len(s.T), dtype=np.int8), 1)
                        for i, s in enumerate(sites))
            model = fold_models(stats, fm.dim, fm.n_sites, 0.0)[0]
            D = np.vstack([fm.design(s.X, i) for i, s in enumerate(sites)])
            fitted = (model.propensity(D, TRIM), model.outcome(D, 0, fm) + fm.outcome_mid,
                      model.outcome(D, 1, fm) + fm.outcome_mid)
            for name, (pe, p0, p1) in (("true nuisances", (e, mu0, mu1)), ("fitted models", fitted)):
                added = values + _losses(m, pe, p0, p1, lo + width / 2, width, a, back)
                compensated[name].append(np.linalg.solve(gram, added.sum(axis=0)))
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
    for name, runs in compensated.items():
        if runs:
            print(f"  with each clip's loss added back (at most {args.clip_compensation:g} widths) under the {name}: "
                  "mean " + " / ".join(f"{v:.4f}" for v in np.mean(runs, axis=0)))
    for k, moved in shifts.items():
        print(f"  z0 phi clipped at {k:g} a: the z0 slope moves by {np.mean(moved):+.4f} (sd {np.std(moved):.4f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
