"""Study kind ``dcqe`` (the default): DC-QE of paper 003 and its bootstrap, or a study on DP representations.

Without ``[dp_representation]``: DC-QE over the row groups, bootstrapped as ``collabcausal
simulate`` bootstraps it, each estimate with the SE and interval of ``[study] interval``
(:func:`~collabcausal.estimators.intervals.interval_estimate`), and the balance diagnostics
(moments exact, or DP with ``[balance]``: :func:`~collabcausal.analyst.balance_report.balance_report`).
The representations are NOT DP. With ``[dp_representation]``: one DP release per party, then
SIMEX-corrected IPW (:func:`dp_representation_results`). Registered in
:data:`collabcausal.analyst.kinds.KIND_MODULES`; :func:`run` is its entry point.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from collabcausal.analyst.balance_report import BALANCE_PRIVACY_NOTE, balance_report
from collabcausal.analyst.dcqe import bootstrap_dcqe, describe_parties, run_dcqe, study_configuration
from collabcausal.analyst.report_rows import party_spend
from collabcausal.estimators.intervals import interval_caveat, interval_estimate

if TYPE_CHECKING:
    from collabcausal.analyst.config import StudyConfig
    from collabcausal.analyst.dcqe import DCQEPlan
    from collabcausal.analyst.dp_release import DPRepresentationSpec
    from collabcausal.analyst.grid import Grid


def run(grid: Grid, config: StudyConfig, plan: DCQEPlan, *, progress: bool = False) -> dict[str, Any]:
    """The DC-QE study of ``plan`` (or its DP-representation study); ``progress`` shows the bootstrap's bar."""
    from collabcausal.reporting.document import overlap_histogram

    if config.dp is not None:
        return dp_representation_results(grid, config, plan, config.dp)
    described = describe_parties(grid, plan, timeout=config.task_timeout)
    result = run_dcqe(grid, plan, timeout=config.task_timeout, described=described)
    replicates, stopped = bootstrap_dcqe(
        grid,
        plan,
        config.n_boot,
        described=described,
        full_propensity=result.effects.propensity,
        timeout=config.task_timeout,
        progress=progress,
        on_missing=config.on_missing_party,
    )
    estimates = {
        name: {
            **interval_estimate(e, replicates[name] if config.n_boot else None, config.interval).to_dict(),
            "method": e.method,
            "se_kind": e.diagnostics.get("se_kind"),
            "n_treated": e.n_treated,
            "n_control": e.n_control,
            "masmd": result.masmd(name),
        }
        for name, e in result.effects.estimates.items()
    }
    balance = balance_report(result, plan)
    caveats = [w for w in (interval_caveat(name, config.interval) for name in estimates) if w]
    if stopped is not None:
        caveats.append(f"{stopped} (on_missing_party = \"continue\"): the point estimates use every party's data, "
                       "received before; the standard errors and intervals use the replicates done. The bootstrap "
                       "asks for no differentially private release, so nothing was charged for it")
    undefined = balance.get("undefined", {}) | {
        f"estimates/{name}/masmd": "undefined: some SMD of its balanced sample is (see smd)"
        for name, row in estimates.items()
        if row["masmd"] is not None and math.isnan(row["masmd"])
    }
    return {"configuration": study_configuration(plan, described)} | balance | (
        {"undefined": undefined} if undefined else {}
    ) | {
        "estimates": estimates,
        "propensity_overlap": overlap_histogram(result.effects.propensity, result.treatment),
        "warnings": caveats + balance["warnings"],
    } | ({} if plan.dp_balance is None else {"privacy_note": BALANCE_PRIVACY_NOTE})


def dp_representation_results(
    grid: Grid, config: StudyConfig, plan: DCQEPlan, spec: DPRepresentationSpec
) -> dict[str, Any]:
    """A study on DP representations (``[dp_representation]``): one release per party, then SIMEX-corrected IPW.

    The interval is the percentile bootstrap of the released rows
    (:func:`~collabcausal.analyst.dp_release.estimate_release`); each party's spend is the
    (epsilon, delta) its one release was charged. No balance moments are asked for: exact ones would
    not be differentially private, and DP ones (``[balance]``, refused here) need the 0/1 arms while
    the analyst holds only the noisy treatment.
    """
    from collabcausal.analyst.dp_release import run_dp_dcqe

    result = run_dp_dcqe(grid, plan, spec, n_boot=config.n_boot, timeout=config.task_timeout)
    e = result.estimate
    row = interval_estimate(e, result.replicates, config.interval).to_dict() | {
        "method": e.method,
        "se_kind": "bootstrap of the released rows",
        "n_treated": e.n_treated,
        "n_control": e.n_control,
        "naive": float(result.naive),
    }
    return {
        "estimates": {"ipw": row},
        "simex_curve": {f"{lam:g}": float(v) for lam, v in result.simex_curve.items()},
        "noise_sigma": result.release.sigma,
        "privacy": party_spend(plan.parties(), spec.epsilon, spec.delta),
        "warnings": [
            "DP representations: the interval covers sampling and DP noise, not the SIMEX extrapolation's "
            "error or clipping bias (docs/dcqe.md); no balance diagnostics (the analyst holds only the noisy "
            "treatment, not the arms)."
        ],
    }
