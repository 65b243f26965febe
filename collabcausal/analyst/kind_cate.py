"""Study kind ``cate``: DC-QE (paper 003), then DP-CATE (paper 004) on the analyst's (X^, T, Y).

DC-QE's representations are NOT DP (parties spend nothing on them; with ``[balance]`` their
balance moments are, charged per request: :mod:`collabcausal.analyst.balance_report`); the DP-CATE
function is (eps, delta)-DP for one ROW of the analyst's table (X^, T, Y), the maps treated as
public, charged to the analyst's study ledger; NOT subject-level DP
(:mod:`collabcausal.analyst.dp_cate`). Its summaries at the analyst's own rows are not DP.
Registered in :data:`collabcausal.analyst.kinds.KIND_MODULES`; :func:`run` is its entry point.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any

import numpy as np

from collabcausal.analyst.report_rows import point_row

if TYPE_CHECKING:
    from collabcausal.analyst.config import StudyConfig
    from collabcausal.analyst.dcqe import DCQEPlan
    from collabcausal.analyst.grid import Grid
    from collabcausal.analyst.kind_config import CateSection

CATE_NOTE = (
    "DP-CATE: the function is (eps, delta)-DP under substitution of one row of the analyst's table (X^, T, Y), "
    "the DC-QE maps treated as public (paper 004, Theorem 3); it is NOT subject-level DP, the representation "
    "X^ is not DP, and the summaries here (the function at the analyst's own rows) are not DP releases: "
    "publish only the function's values at public points. The DC-QE rows are not DP. Against the coordinator, "
    "who holds the representation, this kind gives NO guarantee: for effect modification that is DP against it, "
    "use kind dp_effects with modifiers and subgroups (docs/dp-cate-projection.md)."
)


def run(grid: Grid, config: StudyConfig, plan: DCQEPlan, *, progress: bool = False) -> dict[str, Any]:
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
    from collabcausal.ledger import PrivacyLedger

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
    parties = plan.parties()
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
