"""Study kind ``discovery``: private causal discovery (paper 002), each party's ANM margins combined.

Each party's HSIC margin (``release = "margin"``, the default) or both HSIC scores (``"scores"``) protect every
one of its rows (Laplace, the larger of the test- and training-split bounds); the combined direction is
post-processing. ``release = "vote"`` combines subsample-and-aggregate votes instead. Registered in
:data:`collabcausal.analyst.kinds.KIND_MODULES`; :func:`run` is its entry point.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from collabcausal.analyst.replies import check_description, check_discovery, check_vote
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

MARGIN_NOTE = (
    "Discovery (release = \"margin\"): each party released only its HSIC margin s(y->x) - s(x->y), with one Laplace "
    "noise (less noise than on two scores at the same epsilon), epsilon-DP for all its rows (paper 002); the combined "
    "margin is their average weighted by test-split size, not the ANM of the pooled rows. 'estimate' is that margin "
    "(> 0 favours x -> y); noise_sd is its DP noise alone."
)
VOTE_NOTE = (
    "Discovery (release = \"vote\"): each party split its rows into groups at random, let each group decide the "
    "direction with the non-private ANM and released the number of groups voting x -> y with Laplace noise: "
    "epsilon-DP for every row, no public bounds (subsample and aggregate). 'estimate' is the share of all parties' "
    "groups voting x -> y minus 1/2 (> 0 favours x -> y); noise_sd is its DP noise alone."
)
DISCOVERY_MODEL = {"regularization": 1.0, "kernel_width": 0.3, "hsic_widths": [0.3, 0.1]}
"""The ANM's public parameters every ``dp_discover`` request states (the party's defaults, paper 002
section 5), so the analyst knows the noise scale each reply must carry."""


def run(grid: Grid, config: StudyConfig, plan: DCQEPlan, *, progress: bool = False) -> dict[str, Any]:
    """Each party holding both covariates of a pair releases its private ANM margin; the analyst combines them.

    Parties are asked through ``dp_discover`` (HSIC, every row protected, public bounds from
    ``[anchor_ranges]``). With ``release = "margin"`` (the default) party j releases its margin
    g_j = s_yx,j - s_xy,j with one ``Lap(b_j)``; the combined margin sum_j m_j g_j / sum_j m_j decides the
    direction as :func:`~collabcausal.estimators.discovery.anm.decide` does for one party, and its DP noise
    has standard deviation sqrt(sum_j (m_j / M)^2 * 2 b_j^2). With ``release = "scores"`` each party releases
    both scores, each with its own ``Lap(b_j)`` (the same b_j, docs/causal-discovery.md), and the same
    weighted margin of the released scores has noise sd sqrt(sum_j (m_j / M)^2 * 2 * 2 b_j^2): sqrt(2) times
    more. The direction is named only when it is right with probability at least 0.95 given that noise
    (``Phi(|margin| / sd)``, :mod:`~collabcausal.estimators.discovery.decision`), otherwise
    ``"undecided"``; ``favoured`` and ``probability`` say which way the margin leans and how surely.

    With ``release = "vote"`` parties are asked through ``dp_discover_vote`` instead (subsample and aggregate:
    every row protected without public bounds, :mod:`collabcausal.party.discovery_vote`), and the margin is
    the share of all parties' groups voting ``x -> y`` minus 1/2 (:func:`_vote`).
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
    combine = _vote if spec.release == "vote" else _scores
    for (x, y), holders in holding.items():
        margin, noise_sd, method, releases = combine(grid, config, spec, x, y, holders, described)
        for p in holders:
            spent[p] += float(releases[p]["epsilon"])
        decision = noisy_decision(margin, gaussian_probability(margin, noise_sd))
        arrows = {X_TO_Y: f"{x} -> {y}", Y_TO_X: f"{y} -> {x}", UNDECIDED: UNDECIDED}
        keep = ("direction", "n_groups", "probability") if spec.release == "vote" else ("direction", "agreement",
                                                                                        "m_test")
        estimates[f"{x}~{y}"] = point_row(
            margin,
            method,
            direction=arrows[decision.direction],
            favoured=arrows[decision.favoured],
            probability=decision.probability,
            noise_sd=noise_sd,
            parties={p: {k: r.get(k) for k in keep} for p, r in releases.items()},
        )
    return {
        "estimand": "direction",
        "estimates": estimates,
        "privacy": {p: {"epsilon": e, "delta": 0.0} for p, e in spent.items()},
        "notes": [{"vote": VOTE_NOTE, "margin": MARGIN_NOTE}.get(spec.release, DISCOVERY_NOTE)],
        "warnings": [],
    }


Releases = dict[str, Any]


def _scores(grid: Grid, config: StudyConfig, spec: DiscoverySection, x: str, y: str, holders: list[str],
            described: dict[str, Message]) -> tuple[float, float, str, dict[str, Releases]]:
    """``dp_discover`` at every holder: the test-size-weighted mean margin and its DP noise sd (:func:`run`).

    A Laplace variable of scale ``b`` has variance ``2 b^2``: the margin of two noisy scores carries ``4 b^2``,
    a released margin (``release = "margin"``) ``2 b^2``."""
    margin_only = spec.release == "margin"
    params = {"columns": [x, y], "epsilon": spec.epsilon, "score": "hsic", "protect": "both",
              "x_bounds": list(config.anchor_ranges[x]), "y_bounds": list(config.anchor_ranges[y]),
              "test_size": spec.test_size, "study": config.study, **DISCOVERY_MODEL,
              **({"release": "margin"} if margin_only else {})}
    replies = grid.send_and_receive(dict.fromkeys(holders, Message("dp_discover", params)), timeout=config.task_timeout)
    for p in holders:
        check_discovery(p, replies[p], params, n_subjects=int(described[p].params["n_subjects"]))
    releases = {p: dict(replies[p].params) for p in holders}
    m = np.array([r["m_test"] for r in releases.values()], dtype=float)
    w = m / m.sum()
    margins = np.array([r["margin"] if margin_only else r["score_yx"] - r["score_xy"] for r in releases.values()],
                       dtype=float)
    scales = np.array([r["noise_scale"] for r in releases.values()], dtype=float)
    variance = (2.0 if margin_only else 4.0) * scales**2
    method = "dp-anm-hsic-margin" if margin_only else "dp-anm-hsic"
    return float(w @ margins), float(np.sqrt(np.sum(w**2 * variance))), method, releases


def _vote(grid: Grid, config: StudyConfig, spec: DiscoverySection, x: str, y: str, holders: list[str],
          described: dict[str, Message]) -> tuple[float, float, str, dict[str, Releases]]:
    """``dp_discover_vote`` at every holder: the share of all groups voting ``x -> y`` minus 1/2, and its DP noise
    sd ``sqrt(sum_j 2 b_j^2) / sum_j k_j`` for Laplace scales ``b_j = 1/epsilon``."""
    params = {"columns": [x, y], "epsilon": spec.epsilon, "group_size": spec.group_size, "rule": spec.rule,
              "study": config.study}
    replies = grid.send_and_receive(dict.fromkeys(holders, Message("dp_discover_vote", params)),
                                    timeout=config.task_timeout)
    for p in holders:
        check_vote(p, replies[p], params, n_subjects=int(described[p].params["n_subjects"]))
    releases = {p: dict(replies[p].params) for p in holders}
    groups = float(sum(r["n_groups"] for r in releases.values()))
    margin = sum(r["votes"] - r["n_groups"] / 2.0 for r in releases.values()) / groups
    noise_sd = float(np.sqrt(sum(2.0 * r["noise_scale"] ** 2 for r in releases.values()))) / groups
    return float(margin), noise_sd, f"dp-anm-vote-{spec.rule}", releases
