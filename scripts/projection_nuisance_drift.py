"""How far the projection drifts when its nuisance models are fitted from noisy statistics (docs/dp-cate-projection.md).

On ``--datasets`` data sets of the projection benchmark's design (collabcausal/simulations/cate_benchmark.py, eps 1,
the study's statistics noise sd), scores every subject as the release's added sums do with ``--residual-clip F`` (the
outcome unclipped, each residual clipped at ``F`` widths; without it the outcome clipped to its range), with no DP
noise on the scores and no per-subject clip, and prints the projection on ``(1, z0, z8)``:

* with the models fitted from the exact statistics without a ridge, and with the study's ridge (the one its noise sd
  sets): the ridge's own shrinkage;
* with the models fitted from the statistics plus ``--draws`` draws of their noise (mean and its standard error): what
  the nuisance noise does to the estimate on average, the drift a symmetric interval does not hold;
* the mean move of ``--copies`` parametric-bootstrap copies around each noisy fit (refits on the noisy statistics plus
  fresh noise), unclipped: what the noise replicates would estimate of that drift without their per-subject clip.

    .venv/bin/python scripts/projection_nuisance_drift.py --outcome continuous --residual-clip 0.3333333333333333 \\
        --cross-weight 2 --datasets 20
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from collabcausal.estimators.dp.effects.analysis import fold_models
from collabcausal.estimators.dp.effects.design import FeatureMap
from collabcausal.estimators.dp.effects.nuisances import NuisanceModel
from collabcausal.estimators.dp.effects.release import party_statistics
from collabcausal.estimators.dp.effects.scores import aipw_ate_score
from collabcausal.estimators.dp.effects.statistics import entry_noise_sd
from collabcausal.simulations.cate_benchmark import modifier_matrix, simulate_cate_sites, study_spec, true_projection
from collabcausal.simulations.dp_effects_decomposition import study_noise_sds
from collabcausal.simulations.multisite import Outcome, Site


def projection(sites: Sequence[Site], feature_map: FeatureMap, model: NuisanceModel, trim: float,
               residual_clip: float | None) -> NDArray[np.float64]:
    """The least-squares projection on ``(1, z0, z8)`` of every subject's score under ``model`` (module docstring)."""
    rho = math.inf if residual_clip is None else residual_clip * feature_map.outcome_width
    scores, rows = [], []
    for i, s in enumerate(sites):
        D = feature_map.design(s.X, i)
        y = feature_map.centred_outcome(s.Y) if residual_clip is None else s.Y - feature_map.outcome_mid
        scores.append(aipw_ate_score(s.T, y, model.propensity(D, trim), model.outcome(D, 0, feature_map),
                                     model.outcome(D, 1, feature_map), rho))
        rows.append(modifier_matrix(s.X))
    return np.linalg.lstsq(np.vstack(rows), np.concatenate(scores), rcond=None)[0]


def drift(sites: Sequence[Site], outcome: Outcome, residual_clip: float | None, cross_weight: float, draws: int,
          copies: int, rng: np.random.Generator, *, noise_factor: float = 1.0,
          ) -> tuple[NDArray, NDArray, NDArray, NDArray]:
    """``(unridged, exact, noisy, moves)``: the projection from the exact statistics without and with the study's
    ridge, one row per noisy draw, and one row per copy's move around its draw's fit; the noise is ``noise_factor``
    times the study's (0: none, for checks)."""
    spec = study_spec(outcome, 1.0, cross_weight=cross_weight)
    feature_map = FeatureMap(spec.bounds, spec.outcome_range, len(sites))
    sd, _ = study_noise_sds(spec, len(sites), max(len(s.T) for s in sites))
    noise = noise_factor * entry_noise_sd(sd, feature_map.dim, cross_weight)
    stats = sum(party_statistics(s.X, s.T, s.Y, feature_map, i, np.zeros(len(s.T), dtype=np.int64), 1)
                for i, s in enumerate(sites))

    def fitted(statistics: NDArray[np.float64], ridge_scale: float = spec.ridge_scale) -> NDArray[np.float64]:
        model = fold_models(statistics, feature_map.dim, len(sites), sd, ridge_scale=ridge_scale)[0]
        return projection(sites, feature_map, model, spec.trim, residual_clip)

    exact, noisy, moves = fitted(stats), [], []
    for _ in range(draws):
        release = stats + rng.normal(0.0, 1.0, stats.shape) * noise
        at = fitted(release)
        noisy.append(at)
        moves += [fitted(release + rng.normal(0.0, 1.0, stats.shape) * noise) - at for _ in range(copies)]
    return fitted(stats, 0.0), exact, np.array(noisy), np.array(moves).reshape(-1, exact.size)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--outcome", choices=("binary", "continuous"), default="continuous")
    parser.add_argument("--residual-clip", type=float, default=None, metavar="F")
    parser.add_argument("--cross-weight", type=float, default=1.0, metavar="W")
    parser.add_argument("--datasets", type=int, default=20)
    parser.add_argument("--draws", type=int, default=4, help="noise draws of the statistics per data set")
    parser.add_argument("--copies", type=int, default=4, help="bootstrap copies around each noisy fit")
    parser.add_argument("--seed", type=int, default=100, help="data seeds seed .. seed + datasets - 1")
    parser.add_argument("--n", type=int, default=25_000, help="subjects per site")
    args = parser.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    unridged, exact, noisy, moves = [], [], [], []
    for d in range(args.datasets):
        sites = simulate_cate_sites(args.n, args.outcome, np.random.default_rng(args.seed + d))
        u, e, n, m = drift(sites, args.outcome, args.residual_clip, args.cross_weight, args.draws, args.copies, rng)
        unridged.append(u)
        exact.append(e)
        noisy.append(n)
        moves.append(m)
    noisy_all, moves_all = np.vstack(noisy), np.vstack(moves)

    def row(name: str, values: NDArray, se: NDArray | None = None) -> None:
        cells = "  ".join(f"{v:+.4f}" + ("" if se is None else f" ({s:.4f})") for v, s in
                          zip(values, se if se is not None else values, strict=True))
        print(f"  {name:44} {cells}")

    def mean_and_se(rows: NDArray) -> tuple[NDArray, NDArray]:
        return rows.mean(axis=0), rows.std(axis=0) / np.sqrt(len(rows))

    print(f"{args.outcome}, {args.datasets} data sets x {args.draws} noise draws x {args.copies} copies; projection "
          "intercept / z0 / z8 (standard error)")
    row("true projection", true_projection(args.outcome))
    row("models from the exact statistics, no ridge", np.mean(unridged, axis=0))
    row("models from the exact statistics", np.mean(exact, axis=0))
    row("ridge: exact minus no ridge, paired", *mean_and_se(np.subtract(exact, unridged)))
    row("models from noisy statistics", *mean_and_se(noisy_all))
    row("drift: noisy minus exact, paired", *mean_and_se(noisy_all - np.repeat(exact, args.draws, axis=0)))
    if len(moves_all):
        row("copies' mean move around the noisy fit", *mean_and_se(moves_all))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
