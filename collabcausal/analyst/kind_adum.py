"""Study kind ``adum``: eps-ADUM (paper 001) over horizontally split parties.

Each party's noisy counts and outcome sums per cell are epsilon-DP for its rows (Laplace); the cell
uplifts and the count-weighted ATE are post-processing of their sum. Registered in
:data:`collabcausal.analyst.kinds.KIND_MODULES`; :func:`run` is its entry point.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from collabcausal.analyst.report_rows import party_spend, point_row

if TYPE_CHECKING:
    from collabcausal.analyst.config import StudyConfig
    from collabcausal.analyst.dcqe import DCQEPlan
    from collabcausal.analyst.grid import Grid
    from collabcausal.analyst.kind_config import AdumSection

ADUM_NOTE = (
    "eps-ADUM: the cell uplifts and the ATE are post-processing of each party's epsilon-DP noisy counts and "
    "outcome sums (paper 001); no interval is given (neither the DP noise nor the partition's bias is quantified)."
)


def run(grid: Grid, config: StudyConfig, plan: DCQEPlan, *, progress: bool = False) -> dict[str, Any]:
    """eps-ADUM over the horizontally split parties of ``plan`` (:func:`~collabcausal.analyst.adum.fit_adum`).

    The ATE (ATT) is the uplift of each cell weighted by its noisy count (treated count): both are
    released, so it is post-processing.
    """
    from collabcausal.analyst.adum import fit_adum, fit_kmeans_adum
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
    estimand = config.settings.get("estimand", "ate")
    weights = np.clip(counts[:, 1] if estimand == "att" else counts.sum(axis=1), 0.0, None)
    estimate = float(weights @ model.uplift_ / weights.sum()) if weights.sum() > 0 else float("nan")
    sparse = int((counts < spec.min_count).any(axis=1).sum())
    notes = [ADUM_NOTE] + (
        [f"eps-ADUM: {sparse} of {len(counts)} cells have a noisy arm count below min_count = {spec.min_count:g} "
         "and use the pooled arm mean there."] if sparse else []
    ) + (
        [f"eps-ADUM: no noisy count above 0 to weight the cells by ({estimand.upper()}), or counts too large to "
         "add, so no estimate: the noise swamps the counts (raise epsilon or use fewer cells), or a party's reply is "
         "wrong."] if not np.isfinite(estimate) else []
    )
    return {
        "estimates": {"eps-adum": point_row(estimate, "eps-adum", n_cells=len(counts))},
        "partition": model.partition.to_spec(),
        "cells": [
            {"cell": k, "uplift": float(u), "noisy_n_control": float(c[0]), "noisy_n_treated": float(c[1])}
            for k, (u, c) in enumerate(zip(model.uplift_, counts, strict=True))
        ],
        "privacy": party_spend(parties, spec.epsilon),
        "warnings": notes,
    }
