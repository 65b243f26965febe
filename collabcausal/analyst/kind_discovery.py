"""Study kind ``discovery``: private causal discovery (paper 002), each party's ANM scores combined.

Each party's HSIC scores protect every one of its rows (Laplace, Theorem 7 with the test-split
bound); the combined direction is post-processing. Registered in
:data:`collabcausal.analyst.kinds.KIND_MODULES`; :func:`run` is its entry point.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from collabcausal.analyst.replies import check_description, check_discovery
from collabcausal.analyst.report_rows import point_row
from collabcausal.errors import StudyFailedError
from collabcausal.messages import Message

if TYPE_CHECKING:
    from collabcausal.analyst.config import StudyConfig
    from collabcausal.analyst.dcqe import DCQEPlan
    from collabcausal.analyst.grid import Grid
    from collabcausal.analyst.kind_config import DiscoverySection

DISCOVERY_NOTE = (
    "Discovery: each party's HSIC scores are epsilon-DP for all its rows (paper 002); the combined margin is "
    "their average weighted by test-split size, a meta-analysis of the parties' releases, not the ANM of the "
    "pooled rows. 'estimate' is s(y->x) - s(x->y) (> 0 favours x -> y); noise_sd is its DP noise alone."
)


DISCOVERY_MODEL = {"regularization": 1.0, "kernel_width": 0.3, "hsic_widths": [0.3, 0.1]}
"""The ANM's public parameters every ``dp_discover`` request states (the party's defaults, paper 002
section 5), so the analyst knows the noise scale each reply must carry."""


def run(grid: Grid, config: StudyConfig, plan: DCQEPlan, *, progress: bool = False) -> dict[str, Any]:
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
    parties = plan.parties()
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
        "notes": [DISCOVERY_NOTE],
        "warnings": [],
    }
