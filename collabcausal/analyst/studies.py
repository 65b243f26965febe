"""The study kinds other than DC-QE over a :class:`~collabcausal.analyst.grid.Grid`: eps-ADUM, DP-CATE, discovery.

``collabcausal analyst serve`` (the gRPC grid of the joined parties) and ``collabcausal simulate
<kind>`` (an in-process or local gRPC grid) both call :func:`kind_results` through
:func:`collabcausal.commands.analyst.run_study`: one code path. Every release from a party's rows is
a request the party's :meth:`~collabcausal.party.node.Party.handle` authorizes and charges to its
ledger before computing; each function returns the report's ``estimates``, ``privacy`` (the
(epsilon, delta) each party was charged for the study, as requested) and ``warnings``, plus what
the kind adds.

What is differentially private, exactly (neighbouring relation: substitute one record, n public):

* ``adum`` (paper 001): each party's noisy counts and outcome sums per cell are epsilon-DP for its
  rows (Laplace); the cell uplifts and the count-weighted ATE are post-processing of their sum.
* ``discovery`` (paper 002): each party's HSIC scores protect every one of its rows (Laplace,
  Theorem 7 with the test-split bound); the combined direction is post-processing.
* ``cate`` (papers 003 + 004): DC-QE's representations are NOT DP (parties spend nothing on them;
  with ``[balance]`` their balance moments are, charged per request:
  :mod:`collabcausal.analyst.balance_report`);
  the DP-CATE function is (eps, delta)-DP for one ROW of the analyst's table (X^, T, Y), the maps
  treated as public, charged to the analyst's study ledger; NOT subject-level DP
  (:mod:`collabcausal.analyst.dp_cate`). Its summaries at the analyst's own rows are not DP.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from collabcausal.analyst.grid import Grid
from collabcausal.analyst.replies import check_description, check_discovery
from collabcausal.analyst.report_rows import party_spend, point_row
from collabcausal.errors import StudyFailedError
from collabcausal.messages import Message

if TYPE_CHECKING:
    from collabcausal.analyst.config import StudyConfig
    from collabcausal.analyst.dcqe import DCQEPlan
    from collabcausal.analyst.dp_effects import DPEffectsSpec
    from collabcausal.analyst.kind_config import AdumSection, CateSection, DiscoverySection, DPEffectsSection

ADUM_NOTE = (
    "eps-ADUM: the cell uplifts and the ATE are post-processing of each party's epsilon-DP noisy counts and "
    "outcome sums (paper 001); no interval is given (neither the DP noise nor the partition's bias is quantified)."
)
DISCOVERY_NOTE = (
    "Discovery: each party's HSIC scores are epsilon-DP for all its rows (paper 002); the combined margin is "
    "their average weighted by test-split size, a meta-analysis of the parties' releases, not the ANM of the "
    "pooled rows. 'estimate' is s(y->x) - s(x->y) (> 0 favours x -> y); noise_sd is its DP noise alone."
)
CATE_NOTE = (
    "DP-CATE: the function is (eps, delta)-DP under substitution of one row of the analyst's table (X^, T, Y), "
    "the DC-QE maps treated as public (paper 004, Theorem 3); it is NOT subject-level DP, the representation "
    "X^ is not DP, and the summaries here (the function at the analyst's own rows) are not DP releases: "
    "publish only the function's values at public points. The DC-QE rows are not DP."
)


DISCOVERY_MODEL = {"regularization": 1.0, "kernel_width": 0.3, "hsic_widths": [0.3, 0.1]}
"""The ANM's public parameters every ``dp_discover`` request states (the party's defaults, paper 002
section 5), so the analyst knows the noise scale each reply must carry."""


def kind_results(grid: Grid, config: StudyConfig, plan: DCQEPlan) -> dict[str, Any]:
    """Run ``config.kind`` over the joined parties of ``plan``; the report's kind-specific part."""
    parties = [p for group in plan.row_groups for p in group]
    if config.kind == "adum":
        return adum_results(grid, config, parties)
    if config.kind == "discovery":
        return discovery_results(grid, config, parties)
    if config.kind == "dp_effects":
        from collabcausal.analyst.dp_effects import dp_effects_results

        return dp_effects_results(grid, dp_effects_spec(config), config.study, parties, timeout=config.task_timeout)
    return cate_results(grid, config, plan)


def dp_effects_spec(config: StudyConfig) -> DPEffectsSpec:
    """The :class:`~collabcausal.analyst.dp_effects.DPEffectsSpec` of a study's ``[dp_effects]`` and ranges."""
    from collabcausal.analyst.dp_effects import DPEffectsSpec

    section: DPEffectsSection = config.analysis  # type: ignore[assignment]
    columns = tuple(section.columns or config.anchor_ranges)
    return DPEffectsSpec(
        epsilon=section.epsilon, delta=section.delta, outcome_range=tuple(section.outcome_range),
        trim=section.trim, columns=columns, bounds=tuple(tuple(config.anchor_ranges[c]) for c in columns),
        estimators=tuple(section.estimators), estimands=tuple(section.estimands), nuisance=section.nuisance,
        nuisance_share=section.nuisance_share, n_folds=section.n_folds,
        secure_aggregation=section.secure_aggregation, ridge_scale=section.ridge_scale,
    )


def adum_results(grid: Grid, config: StudyConfig, parties: Sequence[str]) -> dict[str, Any]:
    """eps-ADUM over horizontally split ``parties`` (:func:`~collabcausal.analyst.adum.fit_adum`).

    The ATE (ATT) is the uplift of each cell weighted by its noisy count (treated count): both are
    released, so it is post-processing.
    """
    from collabcausal.analyst.adum import fit_adum, fit_kmeans_adum
    from collabcausal.estimators.dp.partitions import GridPartition

    spec: AdumSection = config.analysis  # type: ignore[assignment]
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


def discovery_results(grid: Grid, config: StudyConfig, parties: Sequence[str]) -> dict[str, Any]:
    """Each party holding both covariates of a pair releases its private ANM scores; the analyst combines them.

    Parties are asked through ``dp_discover`` (HSIC, every row protected, public bounds from
    ``[anchor_ranges]``). The combined margin sum_j m_j (s_yx,j - s_xy,j) / sum_j m_j decides the
    direction as :func:`~collabcausal.estimators.discovery.anm.decide` does for one party; its DP
    noise has standard deviation sqrt(sum_j (m_j / M)^2 * 2 * 2 b_j^2) for Laplace scales b_j. The
    direction is named only when it is right with probability at least 0.95 given that noise
    (``Phi(|margin| / sd)``, :mod:`~collabcausal.estimators.discovery.decision`), otherwise
    ``"undecided"``; ``favoured`` and ``probability`` say which way the margin leans and how surely.
    """
    from collabcausal.estimators.discovery.anm import X_TO_Y, Y_TO_X
    from collabcausal.estimators.discovery.decision import UNDECIDED, gaussian_probability, noisy_decision

    spec: DiscoverySection = config.analysis  # type: ignore[assignment]
    described = grid.send_and_receive(
        {p: Message("describe", {"study": config.study}) for p in parties}, timeout=config.task_timeout
    )
    for party, reply in described.items():
        check_description(party, reply)
    holding = {}
    for x, y in spec.pairs:  # every pair checked before any party is asked (and charged)
        holding[x, y] = [p for p in parties if {x, y} <= set(described[p].params.get("covariates", ()))]
        if not holding[x, y]:
            raise StudyFailedError(
                f"no joined party holds both {x!r} and {y!r}",
                "pair covariates that one party holds: the ANM needs both columns of the same subjects",
            )
    spent = dict.fromkeys(parties, 0.0)
    estimates = {}
    for (x, y), holders in holding.items():
        params = {"columns": [x, y], "epsilon": spec.epsilon, "score": "hsic", "protect": "both",
                  "x_bounds": list(config.anchor_ranges[x]), "y_bounds": list(config.anchor_ranges[y]),
                  "test_size": spec.test_size, "study": config.study, **DISCOVERY_MODEL}
        replies = grid.send_and_receive(
            dict.fromkeys(holders, Message("dp_discover", params)), timeout=config.task_timeout
        )
        for p in holders:
            check_discovery(p, replies[p], params, n_subjects=int(described[p].params["n_subjects"]))
        releases = {p: replies[p].params for p in holders}
        for p in holders:
            spent[p] += float(releases[p]["epsilon"])
        m = np.array([r["m_test"] for r in releases.values()], dtype=float)
        w = m / m.sum()
        margins = np.array([r["score_yx"] - r["score_xy"] for r in releases.values()], dtype=float)
        scales = np.array([r["noise_scale"] for r in releases.values()], dtype=float)
        margin = float(w @ margins)
        noise_sd = float(np.sqrt(np.sum(w**2 * 4.0 * scales**2)))
        decision = noisy_decision(margin, gaussian_probability(margin, noise_sd))
        arrows = {X_TO_Y: f"{x} -> {y}", Y_TO_X: f"{y} -> {x}", UNDECIDED: UNDECIDED}
        estimates[f"{x}~{y}"] = point_row(
            margin,
            "dp-anm-hsic",
            direction=arrows[decision.direction],
            favoured=arrows[decision.favoured],
            probability=decision.probability,
            noise_sd=noise_sd,
            parties={p: {k: r.get(k) for k in ("direction", "agreement", "m_test")} for p, r in releases.items()},
        )
    return {
        "estimand": "direction",
        "estimates": estimates,
        "privacy": {p: {"epsilon": e, "delta": 0.0} for p, e in spent.items()},
        "warnings": [DISCOVERY_NOTE],
    }


def cate_results(grid: Grid, config: StudyConfig, plan: DCQEPlan) -> dict[str, Any]:
    """DC-QE, then DP-CATE on (X^, T, Y) at the analyst (:func:`~.dp_cate.dp_cate_on_representation`).

    The release is charged to the analyst's study ledger (``[cate] ledger``) before it is computed;
    the parties spend nothing (DC-QE's representations are not DP releases) unless ``[balance]``
    makes their balance moments DP. The report gives the mean of the DP function over the
    analyst's rows (over the treated for ATT) and its deciles, next to DC-QE's point estimates
    and balance diagnostics (:func:`~collabcausal.analyst.balance_report.balance_report`).
    """
    from collabcausal.analyst.balance_report import balance_report
    from collabcausal.analyst.dcqe import describe_parties, run_dcqe, study_configuration
    from collabcausal.analyst.dp_cate import dp_cate_on_representation
    from collabcausal.estimators.intervals import interval_estimate
    from collabcausal.party.ledger import PrivacyLedger

    spec: CateSection = config.analysis  # type: ignore[assignment]
    ledger = PrivacyLedger(
        config.path.parent / spec.ledger,
        epsilon=spec.ledger_epsilon or spec.epsilon,
        delta=spec.ledger_delta or spec.delta,
        dataset=f"study {config.study}: rows of X^",
    )
    described = describe_parties(grid, plan, timeout=config.task_timeout)
    result = run_dcqe(grid, plan, timeout=config.task_timeout, described=described)
    X_hat = np.asarray(result.representation.X_hat)
    b = spec.feature_bound
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        function = dp_cate_on_representation(
            result, feature_bounds=[(-b, b)] * X_hat.shape[1], outcome_bounds=tuple(spec.outcome_range),
            epsilon=spec.epsilon, delta=spec.delta, ledger=ledger, learner=spec.learner, seed=plan.seed,
        )
    values = function(np.clip(X_hat, -b, b))
    rows = values[np.asarray(result.treatment) == 1] if plan.estimand == "att" else values
    name = f"dp-cate-{spec.learner}"
    estimates = {
        name: point_row(float(np.mean(rows)), name, deciles=np.quantile(rows, np.linspace(0.1, 0.9, 9)).tolist(),
                        noise_scale=float(function.noise_scale))
    }
    for key, e in result.effects.estimates.items():
        estimates[f"{key} (DC-QE)"] = interval_estimate(e, None, "analytic").to_dict() | {"method": e.method}
    parties = [p for group in plan.row_groups for p in group]
    balance = balance_report(result, plan)
    return balance | {
        "configuration": study_configuration(plan, described),
        "estimates": estimates,
        # the parties' DC-QE rows are not DP: no epsilon (0 would claim perfect privacy), charged nothing;
        # with [balance], a balance party's entry is its DP moments' spend
        "privacy": {p: {"epsilon": None, "delta": None} for p in parties}
        | (balance.get("privacy") or {})
        | {"analyst study ledger (rows of X^)": {"epsilon": spec.epsilon, "delta": spec.delta}},
        "warnings": [
            CATE_NOTE,
            *dict.fromkeys(str(w.message) for w in caught if issubclass(w.category, UserWarning)),
            *balance["warnings"],
        ],
    }
