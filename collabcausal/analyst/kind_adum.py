"""Study kind ``adum``: eps-ADUM (paper 001) over horizontally split parties.

Each party's noisy counts and outcome sums per cell are epsilon-DP for its rows (Laplace); the cell
uplifts and the count-weighted ATE or ATT, with its interval, are post-processing of their sum. Registered in
:data:`collabcausal.analyst.kinds.KIND_MODULES`; :func:`run` is its entry point.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from collabcausal.analyst.report_rows import party_spend
from collabcausal.estimators.intervals import IntervalEstimate

if TYPE_CHECKING:
    from collabcausal.analyst.config import StudyConfig
    from collabcausal.analyst.dcqe import DCQEPlan
    from collabcausal.analyst.grid import Grid
    from collabcausal.analyst.kind_config import AdumSection
    from collabcausal.estimators.dp.adum_effect import AdumEffect

ADUM_NOTE = (
    "eps-ADUM: the cell uplifts and the {estimand} are post-processing of each party's epsilon-DP noisy counts and "
    "outcome sums (paper 001). The interval (delta method) adds the Laplace noise of every party's release to the "
    "outcomes' sampling variance, bounded by the outcome range (conservative: no sums of squares are released)."
)
ADJUSTMENT = (
    "cell-adjusted for {columns} only, between cells: it is the causal {estimand} only if treatment is as good as "
    "random within every cell{outside}; the unadjusted difference from the same release is {unadjusted}"
)


def run(grid: Grid, config: StudyConfig, plan: DCQEPlan, *, progress: bool = False) -> dict[str, Any]:
    """eps-ADUM over the horizontally split parties of ``plan`` (:func:`~collabcausal.analyst.adum.fit_adum`).

    The ATE (ATT) is the uplift of each cell weighted by its noisy count (treated count), with its
    delta-method interval (:func:`~collabcausal.estimators.dp.adum_effect.adum_effect`): post-processing.
    """
    from collabcausal.analyst.adum import fit_adum, fit_kmeans_adum
    from collabcausal.estimators.dp.adum_effect import adum_effect, unadjusted_difference
    from collabcausal.estimators.dp.partitions import GridPartition

    spec: AdumSection = config.analysis  # type: ignore[assignment]
    parties = plan.parties()
    bounds = [tuple(config.anchor_ranges[c]) for c in spec.columns]
    common = {"study": config.study, "min_count": spec.min_count, "parties": parties, "timeout": config.task_timeout}
    outcome = (spec.outcome_range[0], spec.outcome_range[1])
    if spec.cells is not None:
        model = fit_adum(grid, GridPartition(spec.columns, bounds, spec.cells), spec.epsilon, outcome, **common)
    else:
        model = fit_kmeans_adum(grid, spec.columns, bounds, spec.kmeans_clusters, spec.epsilon, outcome,
                                n_iter=spec.kmeans_iterations, seed=config.settings.get("seed", 0), **common)
    counts = np.asarray(model.aggregates_.counts, dtype=float)
    sums = np.asarray(model.aggregates_.sums, dtype=float)[:, :, 0]
    estimand = config.settings.get("estimand", "ate")
    release = {"epsilon": model.epsilon, "n_releases": len(parties), "min_count": spec.min_count}
    effect = adum_effect(counts, sums, outcome, estimand=estimand, **release)
    naive = unadjusted_difference(counts, sums, outcome, **release)
    sparse = int((counts < spec.min_count).any(axis=1).sum())
    warnings = (
        [f"eps-ADUM: {sparse} of {len(counts)} cells have a noisy arm count below min_count = {spec.min_count:g} "
         "and use the pooled arm mean there."] if sparse else []
    ) + (
        [f"eps-ADUM: no noisy count above 0 to weight the cells by ({estimand.upper()}), or counts too large to "
         "add, so no estimate: the noise swamps the counts (raise epsilon or use fewer cells), or a party's reply is "
         "wrong."] if not np.isfinite(effect.estimate) else []
    )
    outside = [c for c in config.anchor_ranges if c not in spec.columns]
    adjustment = ADJUSTMENT.format(
        columns=", ".join(spec.columns), estimand=estimand.upper(),
        outside=f" and {', '.join(outside)} (not in the partition) do not confound it" if outside else "",
        unadjusted=_interval_text(naive),
    )
    return {
        "estimates": {"eps-adum": _row(effect) | {
            "method": "eps-adum", "n_cells": len(counts), "unadjusted": _row(naive), "adjustment": adjustment,
        }},
        "partition": model.partition.to_spec(),
        "cells": [
            {"cell": k, "uplift": float(u), "noisy_n_control": float(c[0]), "noisy_n_treated": float(c[1])}
            for k, (u, c) in enumerate(zip(model.uplift_, counts, strict=True))
        ],
        "privacy": party_spend(parties, spec.epsilon),
        "notes": [ADUM_NOTE.format(estimand=estimand.upper())],
        "warnings": warnings,
    }


def _row(effect: AdumEffect) -> dict[str, Any]:
    """A report row (:class:`~collabcausal.estimators.intervals.IntervalEstimate`'s keys) and ``no_interval``."""
    kind = "none" if effect.se is None else "analytic"
    row = IntervalEstimate(effect.estimate, effect.se, effect.ci_low, effect.ci_high, kind, effect.alpha, None, 0, 0)
    return row.to_dict() | {"no_interval": effect.no_interval}


def _interval_text(effect: AdumEffect) -> str:
    """``-15.3 (95% CI [-20.1, -10.5])``, or the estimate with why it has no interval."""
    if effect.se is None:
        return f"{effect.estimate:.4g} (no interval: {effect.no_interval})"
    level = round(100 * (1 - effect.alpha))
    return f"{effect.estimate:.4g} ({level}% CI [{effect.ci_low:.4g}, {effect.ci_high:.4g}])"
