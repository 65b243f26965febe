"""The plaintext twin of vertical ``dp_effects``: the protocol's arithmetic and noise shares, in the clear.

Runs, for row groups whose covariates are split between parties
(:class:`~collabcausal.estimators.dp.effects.vertical.ColumnGroups`), exactly the sums the
encrypted protocol computes (:mod:`collabcausal.estimators.dp.effects.vertical`), with each
computing party's noise share drawn separately, and the coordinator's post-processing of the
horizontal study (:func:`~collabcausal.estimators.dp.effects.analysis.fold_models`,
:func:`~collabcausal.estimators.dp.effects.analysis.effects_from_sums`). What it does not do is
encrypt: the benchmark's replications run here (docs/dp-effects-vertical.md), and a test shows that
the encrypted scores equal these to the encryption's error bound on the same inputs.

Several row groups are summed in the clear at the coordinator (each row group's release is DP on its
own; secure aggregation across row groups would lower the noise, and is not wired here).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from collabcausal.analyst.dp_effects import DPEffectsSpec
from collabcausal.errors import InputError
from collabcausal.estimators.dp.effects.analysis import effects_from_sums, fold_models, noise_replicates
from collabcausal.estimators.dp.effects.design import FeatureMap
from collabcausal.estimators.dp.effects.nuisances import NuisanceModel
from collabcausal.estimators.dp.effects.pooling import DPEffect
from collabcausal.estimators.dp.effects.release import unscaled_noise_sd
from collabcausal.estimators.dp.effects.scores import Component, release_sensitivity
from collabcausal.estimators.dp.effects.statistics import ArmStatistics, fold_statistics, statistics_sensitivity
from collabcausal.estimators.dp.effects.vertical import (
    ColumnGroups,
    PartLimits,
    WeightPolynomial,
    clipped_parts,
    entry_parties,
    group_design,
    model_change,
    part_limits,
    released_variance,
    scaled_score_terms,
    score_scales,
    share_variance,
    vertical_components,
    weight_polynomial,
)
from collabcausal.estimators.dp.mechanisms import draw_noise
from collabcausal.estimators.dp.zcdp import gaussian_zcdp_sigma


@dataclass(frozen=True)
class RowGroup:
    """One row group's aligned subjects: each column group's covariates, the label holder's T and Y."""

    X: tuple[NDArray[np.float64], ...]
    T: NDArray[np.int8]
    Y: NDArray[np.float64]

    @property
    def n(self) -> int:
        """Subjects of the row group."""
        return int(self.T.shape[0])


@dataclass(frozen=True)
class VerticalResult:
    """The estimate, the released noise sds and the weight polynomial of one vertical study."""

    effect: DPEffect
    statistics_sd: NDArray[np.float64]
    scores_sd: NDArray[np.float64]
    weight: WeightPolynomial
    dp_floor: float


def noise_shares(k: NDArray[np.int64], sigma: float, rng: np.random.Generator | None) -> NDArray[np.float64]:
    """The sum of the computing parties' noise shares on each entry (entry ``j`` computed by ``k[j]`` parties).

    Each share is drawn by its own call, as each party draws its own (OpenDP without ``rng``).
    """
    total = np.zeros(k.shape)
    for parties in np.unique(k):
        at = k == parties
        sd = sigma * float(np.sqrt(share_variance(int(parties))))
        for _ in range(int(parties)):
            total[at] += draw_noise("gaussian", sd, int(at.sum()), rng=rng)
    return total


def vertical_study(row_groups: Sequence[RowGroup], groups: ColumnGroups, spec: DPEffectsSpec, *,
                   rng: np.random.Generator | None = None) -> VerticalResult:
    """Run vertical ``dp_effects`` (AIPW, ATE, pooled nuisances, one fold) on ``row_groups`` in the clear.

    ``rng=None`` draws the noise shares from OpenDP (as parties do); a generator makes them reproducible.
    """
    if spec.n_folds != 1 or spec.nuisance != "pooled":
        raise InputError("dp_effects on column groups fits pooled full-sample nuisances",
                         'use n_folds = 1 and nuisance = "pooled"')
    feature_map = FeatureMap(spec.bounds, spec.outcome_range, len(row_groups))
    (rho_n, _), (rho_s, _) = spec.budgets
    k_stats = entry_parties(groups, feature_map.n_sites)
    sigma_n = gaussian_zcdp_sigma(statistics_sensitivity(feature_map), rho_n)
    designs = [_design(feature_map, rg, site, groups) for site, rg in enumerate(row_groups)]
    statistics = sum(
        fold_statistics(np.sum(D, axis=0), rg.T, feature_map.centred_outcome(rg.Y), feature_map.outcome_width)
        + noise_shares(k_stats, sigma_n, rng)
        for D, rg in zip(designs, row_groups, strict=True))
    stats_sd = sigma_n * np.sqrt(released_variance(k_stats) * len(row_groups))
    rows = np.asarray(statistics)[None, :]
    model = fold_models(rows, feature_map.dim, feature_map.n_sites, float(stats_sd.max()),
                        ridge_scale=spec.ridge_scale)[0]
    analyst_rng = np.random.default_rng(spec.seed)
    copies = [r[0] for r in noise_replicates(rows, feature_map.dim, feature_map.n_sites, stats_sd,
                                             spec.nuisance_replicates, analyst_rng, ridge_scale=spec.ridge_scale)]
    S, R = feature_map.n_sites, feature_map.outcome_width
    gram = ArmStatistics.unpack(rows[0], feature_map.dim)
    moments = gram.gram[0] + gram.gram[1]
    limits = part_limits(model, moments, groups, S, R)
    changes = [(d, part_limits(d, moments, groups, S, R)) for d in (model_change(model, c) for c in copies)]
    domain, unit = score_scales(model, limits, changes, S, R)
    poly = weight_polynomial(domain, spec.trim)
    parts = vertical_components(spec.estimators, spec.estimands, model, limits, changes, poly, S, R)
    sigma_s = gaussian_zcdp_sigma(release_sensitivity(parts), rho_s)
    k_scores = np.full(len(parts), groups.n_parties)
    released = sum(
        score_sums(D, rg, groups, feature_map, model, limits, changes, poly, parts, unit)
        + noise_shares(k_scores, sigma_s, rng)
        for site, (D, rg) in enumerate(zip(designs, row_groups, strict=True)))
    scores_sd = float(sigma_s * np.sqrt(released_variance(groups.n_parties) * len(row_groups)))
    sums = np.asarray(released) * np.array([c.width for c in parts]) / np.array([c.weight for c in parts])
    sds = unscaled_noise_sd(scores_sd, parts)
    n = sum(rg.n for rg in row_groups)
    effect = effects_from_sums(sums, sds, parts, n, spec.estimators, spec.estimands, alpha=spec.alpha)[0]
    return VerticalResult(effect, stats_sd, sds, poly, float(sds[0] / n))


def _design(feature_map: FeatureMap, rg: RowGroup, site: int, groups: ColumnGroups) -> list[NDArray[np.float64]]:
    if len(rg.X) != groups.n_parties or any(x.shape[1] != len(g) for x, g in zip(rg.X, groups.groups, strict=True)):
        raise InputError("a row group's column blocks do not match the column groups",
                         "give each party its declared covariates, in the declared order")
    return [group_design(feature_map, x, site, groups, g) for g, x in enumerate(rg.X)]


def score_sums(designs: list[NDArray[np.float64]], rg: RowGroup, groups: ColumnGroups, feature_map: FeatureMap,
               model: NuisanceModel, limits: PartLimits, changes: Sequence[tuple[NuisanceModel, PartLimits]],
               poly: WeightPolynomial, parts: Sequence[Component], unit: float) -> NDArray[np.float64]:
    """The released (scaled) score sums of one row group: :func:`scaled_score_terms` of the groups' clipped
    parts, summed over subjects, as the encrypted round computes them."""
    S, R = feature_map.n_sites, feature_map.outcome_width
    scales = np.array([poly.domain, unit, unit])

    def inputs(m: NuisanceModel, lim: PartLimits) -> NDArray[np.float64]:
        summed = np.sum([clipped_parts(m, D, g, groups, lim, S, R) for g, D in enumerate(designs)], axis=0)
        return summed / scales[:, None]

    at_model = inputs(model, limits)
    at_copies = [at_model + inputs(c, cl) for c, cl in changes]
    terms = scaled_score_terms(rg.T.astype(float), feature_map.centred_outcome(rg.Y), list(at_model),
                               [list(a) for a in at_copies], poly, parts, unit)
    return np.array([t.sum() for t in terms])
