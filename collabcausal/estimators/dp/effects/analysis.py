"""The coordinator's side of ``dp_effects``: cross-fitted models from pooled statistics, estimates from sums.

Pure post-processing of what the parties released (docs/dp-effects.md, steps 3 and 5); the
orchestration over a grid of parties is :mod:`collabcausal.analyst.dp_effects`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike

from collabcausal.estimators.dp.effects.nuisances import NuisanceModel, fit_nuisances
from collabcausal.estimators.dp.effects.pooling import DPEffect, estimate_effect
from collabcausal.estimators.dp.effects.scores import Component
from collabcausal.estimators.dp.effects.statistics import ArmStatistics


def fold_models(
    statistics: ArrayLike, dim: int, n_sites: int, noise_sd: float, *, ridge_scale: float = 1.0
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


def effects_from_sums(
    sums: ArrayLike,
    noise_sd: ArrayLike,
    parts: Sequence[Component],
    n: int,
    estimators: Sequence[str],
    estimands: Sequence[str],
    *,
    alpha: float = 0.05,
) -> list[DPEffect]:
    """Every requested (estimator, estimand) from released sums with per-sum noise sds."""
    names = [c.name for c in parts]
    values = dict(zip(names, np.asarray(sums, dtype=float).tolist(), strict=True))
    sds = dict(zip(names, np.asarray(noise_sd, dtype=float).tolist(), strict=True))
    return [estimate_effect(values, sds, n, est, estimand, alpha=alpha) for est in estimators for estimand in estimands]
