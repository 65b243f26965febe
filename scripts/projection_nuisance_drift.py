"""How far the projection drifts when its nuisance models are fitted from noisy statistics (docs/dp-cate-projection.md).

On ``--datasets`` data sets of the projection benchmark's design (collabcausal/simulations/cate_benchmark.py, eps 1,
the study's statistics noise sd), scores every subject as the release's added sums do with ``--residual-clip F`` (the
outcome unclipped, each residual clipped at ``F`` widths; without it the outcome clipped to its range), with no DP
noise on the scores and no per-subject clip, and prints the projection on ``(1, z0, z8)``:

* with the models fitted from the exact statistics without a ridge, and with the study's ridge (the one its noise sd
  sets): the ridge's own shrinkage;
* with the models fitted from the statistics plus ``--draws`` draws of their noise (mean and its standard error): what
  the nuisance noise does to the estimate on average, the drift a symmetric interval does not hold;
* where that drift comes from: the propensity from the noisy fit with the outcome models from the exact one, the
  reverse, and the two from independent noise draws. The AIPW score is linear in the outcome models and, given
  them, its mean does not move with the propensity to first order, so what is left is the cross term of
  their errors, ``E[d_mu_t' (sum_i w_ti d_i d_i') d_e]`` (``w_1i = T_i (1 - e_i) / e_i``, ``w_0i = (1 - T_i) e_i /
  (1 - e_i)``), which is not zero only because both models are fitted from the same noisy Gram matrices;
* that cross term predicted from the release alone: ``E[w_1i | x_i] = 1 - e_i``, so the weighted Gram is about the
  other arm's released Gram, and ``E[d_mu_t d_e']`` is the mean over ``--copies`` parametric-bootstrap copies around
  each noisy fit (refits on the noisy statistics plus fresh noise); its intercept is ``(R / n) sum_t tr(G_(1-t)
  C_t')`` and it does not move the slopes;
* the mean move of those copies, unclipped: what the noise replicates would estimate of the drift without their
  per-subject clip.

    .venv/bin/python scripts/projection_nuisance_drift.py --outcome continuous --residual-clip 0.3333333333333333 \\
        --cross-weight 2 --datasets 20
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
from numpy.typing import NDArray

from collabcausal.estimators.dp.effects.analysis import fold_models
from collabcausal.estimators.dp.effects.design import FeatureMap
from collabcausal.estimators.dp.effects.nuisances import NuisanceModel
from collabcausal.estimators.dp.effects.release import party_statistics
from collabcausal.estimators.dp.effects.scores import aipw_ate_score
from collabcausal.estimators.dp.effects.statistics import ArmStatistics, entry_noise_sd
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


class Drift(NamedTuple):
    """What :func:`drift` measures on one data set (module docstring): projections on ``(1, z0, z8)``, one row per
    noise draw (``moves``: per copy; ``predicted``: the cross term's predicted shift)."""

    unridged: NDArray[np.float64]
    exact: NDArray[np.float64]
    noisy: NDArray[np.float64]
    propensity_only: NDArray[np.float64]
    outcome_only: NDArray[np.float64]
    independent: NDArray[np.float64]
    predicted: NDArray[np.float64]
    moves: NDArray[np.float64]


def cross_term(statistics: NDArray[np.float64], model: NuisanceModel, copies: Sequence[NuisanceModel],
               feature_map: FeatureMap) -> NDArray[np.float64]:
    """The projection's shift predicted from the release (module docstring): the intercept
    ``(R / n) sum_t tr(G_(1-t) C_t')`` with ``C_t`` the copies' mean of ``d_mu_t d_e'`` around ``model``."""
    gram = ArmStatistics.unpack(statistics, feature_map.dim).gram
    n_sites = feature_map.n_sites
    n = float(np.trace(gram[0][:n_sites, :n_sites]) + np.trace(gram[1][:n_sites, :n_sites]))  # the one-hot counts
    d_e = np.array([c.propensity_coef - model.propensity_coef for c in copies])
    shift = 0.0
    for arm in (0, 1):
        d_mu = np.array([c.outcome_coef[arm] - model.outcome_coef[arm] for c in copies])
        shift += float(np.trace(gram[1 - arm] @ (d_e.T @ d_mu))) / len(copies)
    return np.array([feature_map.outcome_width * shift / n, 0.0, 0.0])


def drift(sites: Sequence[Site], outcome: Outcome, residual_clip: float | None, cross_weight: float, draws: int,
          copies: int, rng: np.random.Generator, *, noise_factor: float = 1.0) -> Drift:
    """:class:`Drift` on ``sites``; the noise is ``noise_factor`` times the study's (0: none, for checks)."""
    spec = study_spec(outcome, 1.0, cross_weight=cross_weight)
    feature_map = FeatureMap(spec.bounds, spec.outcome_range, len(sites))
    sd, _ = study_noise_sds(spec, len(sites), max(len(s.T) for s in sites))
    noise = noise_factor * entry_noise_sd(sd, feature_map.dim, cross_weight)
    stats = sum(party_statistics(s.X, s.T, s.Y, feature_map, i, np.zeros(len(s.T), dtype=np.int64), 1)
                for i, s in enumerate(sites))

    def model(statistics: NDArray[np.float64], ridge_scale: float = spec.ridge_scale) -> NuisanceModel:
        return fold_models(statistics, feature_map.dim, len(sites), sd, ridge_scale=ridge_scale)[0]

    def project(m: NuisanceModel) -> NDArray[np.float64]:
        return projection(sites, feature_map, m, spec.trim, residual_clip)

    def noisy(statistics: NDArray[np.float64]) -> NDArray[np.float64]:
        return statistics + rng.normal(0.0, 1.0, statistics.shape) * noise

    exact_model = model(stats)
    exact = project(exact_model)
    rows: dict[str, list[NDArray[np.float64]]] = {k: [] for k in Drift._fields[2:]}
    for _ in range(draws):
        release = noisy(stats)
        at, other = model(release), model(noisy(stats))
        point = project(at)
        refits = [model(noisy(release)) for _ in range(copies)]
        rows["noisy"].append(point)
        rows["propensity_only"].append(project(NuisanceModel(at.propensity_coef, exact_model.outcome_coef)))
        rows["outcome_only"].append(project(NuisanceModel(exact_model.propensity_coef, at.outcome_coef)))
        rows["independent"].append(project(NuisanceModel(at.propensity_coef, other.outcome_coef)))
        if refits:
            rows["predicted"].append(cross_term(release[0], at, refits, feature_map))
        rows["moves"] += [project(r) - point for r in refits]
    return Drift(project(model(stats, 0.0)), exact,
                 **{k: np.array(v).reshape(-1, exact.size) for k, v in rows.items()})


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
    runs = [drift(simulate_cate_sites(args.n, args.outcome, np.random.default_rng(args.seed + d)), args.outcome,
                  args.residual_clip, args.cross_weight, args.draws, args.copies, rng) for d in range(args.datasets)]

    def stacked(field: str) -> NDArray:
        return np.vstack([getattr(r, field) for r in runs])

    def row(name: str, values: NDArray, se: NDArray | None = None) -> None:
        cells = "  ".join(f"{v:+.4f}" + ("" if se is None else f" ({s:.4f})") for v, s in
                          zip(values, se if se is not None else values, strict=True))
        print(f"  {name:52} {cells}")

    def mean_and_se(rows: NDArray) -> tuple[NDArray, NDArray]:
        return rows.mean(axis=0), rows.std(axis=0) / np.sqrt(len(rows))

    def paired(field: str) -> tuple[NDArray, NDArray]:
        """:func:`mean_and_se` of ``field`` minus the exact fit's projection, over every draw."""
        return mean_and_se(stacked(field) - np.repeat(stacked("exact"), args.draws, axis=0))

    print(f"{args.outcome}, {args.datasets} data sets x {args.draws} noise draws x {args.copies} copies; projection "
          "intercept / z0 / z8 (standard error)")
    row("true projection", true_projection(args.outcome))
    row("models from the exact statistics, no ridge", stacked("unridged").mean(axis=0))
    row("models from the exact statistics", stacked("exact").mean(axis=0))
    row("ridge: exact minus no ridge, paired", *mean_and_se(stacked("exact") - stacked("unridged")))
    row("models from noisy statistics", *mean_and_se(stacked("noisy")))
    row("drift: noisy minus exact, paired", *paired("noisy"))
    row("  noisy propensity alone", *paired("propensity_only"))
    row("  noisy outcome models alone", *paired("outcome_only"))
    row("  both noisy, from independent draws", *paired("independent"))
    if args.copies:
        row("  cross term predicted from the release", *mean_and_se(stacked("predicted")))
        row("copies' mean move around the noisy fit", *mean_and_se(stacked("moves")))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
