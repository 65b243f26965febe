"""The coordinator's side of ``dp_effects``: cross-fitted models from pooled statistics, estimates from sums.

Pure post-processing of what the parties released (docs/dp-effects.md, steps 3 and 5); the
orchestration over a grid of parties is :mod:`collabcausal.analyst.dp_effects`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
from numpy.typing import ArrayLike, NDArray

from collabcausal.estimators.dp.effects.nuisances import RIDGE_SCALE, NuisanceModel, fit_nuisances
from collabcausal.estimators.dp.effects.pooling import DPEffect, estimate_effect
from collabcausal.estimators.dp.effects.scores import Component
from collabcausal.estimators.dp.effects.statistics import ArmStatistics


def fold_models(
    statistics: ArrayLike, dim: int, n_sites: int, noise_sd: float, *, ridge_scale: float = RIDGE_SCALE
) -> list[NuisanceModel]:
    """Model ``k`` fitted on the sum of every fold's statistics but fold ``k``'s (cross-fitting).

    ``statistics`` has one row per fold (summed over the parties that share the models);
    ``noise_sd`` is the noise sd of one entry of one row, so a sum of ``K - 1`` rows has
    ``sqrt(K - 1) noise_sd``.
    """
    rows = np.asarray(statistics, dtype=float)
    if rows.shape[0] == 1:  # full-sample nuisances: the one model scores every row
        return [fit_nuisances(ArmStatistics.unpack(rows[0], dim), n_sites, noise_sd, ridge_scale=ridge_scale)]
    total = rows.sum(axis=0)
    held_out_sd = math.sqrt(rows.shape[0] - 1) * float(noise_sd)
    return [
        fit_nuisances(ArmStatistics.unpack(total - rows[k], dim), n_sites, held_out_sd, ridge_scale=ridge_scale)
        for k in range(rows.shape[0])
    ]


class NoiseReplicate(NamedTuple):
    """One copy of the released statistics plus fresh noise of their law, and :func:`fold_models` refitted on it."""

    statistics: NDArray[np.float64]
    models: list[NuisanceModel]


def noise_replicates(
    statistics: ArrayLike, dim: int, n_sites: int, noise_sd: float | ArrayLike, n_replicates: int,
    rng: np.random.Generator, *, ridge_scale: float = RIDGE_SCALE, step: float = 1.0,
) -> list[NoiseReplicate]:
    """``n_replicates`` refits of :func:`fold_models` on the statistics plus fresh noise of their own law.

    A parametric bootstrap of the statistics' noise (Ferrando, Wang & Sheldon 2022): what the analyst
    computes from copy ``b`` (its models, the projection's pilot) differs from what it computes from the
    release as that differs from what the exact statistics would give, to first order. Post-processing:
    ``noise_sd`` is public and ``rng`` the analyst's own. ``noise_sd`` is one sd for every entry, or one per
    entry of a row (column groups: docs/dp-effects-vertical.md); the refits' ridge uses the largest (the
    release's own, whatever the step).

    ``step`` (``replicate_step``, >= 1) multiplies the fresh noise: a copy is then a finite difference of
    ``step`` noise sds, and what it moves is divided by ``step`` when read (:func:`released_sums`), so the
    first-order nuisance variance it measures is unchanged while the copies' own release noise, fixed by the
    score release, weighs ``1 / step^2`` as much (docs/dp-cate-projection.md, "A larger replicate step").
    """
    rows = np.asarray(statistics, dtype=float)
    sd = np.asarray(noise_sd, dtype=float)
    out = []
    for _ in range(n_replicates):
        copy = rows + rng.normal(0.0, step * sd, rows.shape)
        out.append(NoiseReplicate(copy, fold_models(copy, dim, n_sites, float(sd.max()), ridge_scale=ridge_scale)))
    return out


def effects_from_sums(
    sums: ArrayLike,
    noise_sd: ArrayLike,
    parts: Sequence[Component],
    n: int,
    estimators: Sequence[str],
    estimands: Sequence[str],
    *,
    alpha: float = 0.05,
    replicate_step: float = 1.0,
) -> list[DPEffect]:
    """Every requested (estimator, estimand) from released sums with per-sum noise sds.

    Replicate parts (:func:`~.scores.replicate_components`) among ``parts`` feed the nuisance-noise
    variance of each estimate (:mod:`.pooling`), read at the copies' ``replicate_step``
    (:func:`noise_replicates`).
    """
    point, point_sd, replicates, replicate_sd = released_sums(sums, noise_sd, parts, step=replicate_step)
    return [estimate_effect(point, point_sd, n, est, estimand, alpha=alpha, replicates=replicates,
                            replicate_sd=replicate_sd) for est in estimators for estimand in estimands]


def released_sums(
    sums: ArrayLike, noise_sd: ArrayLike, parts: Sequence[Component], *, step: float = 1.0,
) -> tuple[dict[str, float], dict[str, float], list[dict[str, float]], dict[str, float]]:
    """The released vector by name: point sums, their noise sds, each replicate copy's sums (keyed by the
    point sum they replicate) and the noise sd of one replicate sum, the last two divided by the copies'
    ``step`` (:func:`noise_replicates`): each copy's move per noise sd of the statistics."""
    values, sds = np.asarray(sums, dtype=float).tolist(), np.asarray(noise_sd, dtype=float).tolist()
    point = {c.name: v for c, v in zip(parts, values, strict=True) if c.of is None}
    point_sd = {c.name: v for c, v in zip(parts, sds, strict=True) if c.of is None}
    copies = max((c.copy for c in parts), default=-1) + 1
    replicates: list[dict[str, float]] = [{} for _ in range(copies)]
    replicate_sd: dict[str, float] = {}
    for c, v, sd in zip(parts, values, sds, strict=True):
        if c.of is not None:
            replicates[c.copy][c.of] = v / step
            replicate_sd[c.of] = sd / step
    return point, point_sd, replicates, replicate_sd
