"""The analyst's DC-QE study (paper 003, Algorithm 2), written against a :class:`Grid`.

One call to :func:`run_dcqe` asks every party of the plan for its intermediate representations,
builds the collaborative representation, estimates propensities and effects, and computes
federated balance diagnostics (exact moments, or with ``plan.dp_balance`` the parties'
(epsilon, delta)-DP moments charged to their ledgers). The same code runs in a simulation
(in-process grid) and in a deployment (gRPC grid); a bootstrap replicate is the same call with
resampled ``rows``.
"""

from __future__ import annotations

import itertools
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone

import numpy as np
from numpy.typing import NDArray
from scipy.special import logit
from tqdm.auto import tqdm

from collabcausal.analyst.balance import DPBalanceSpec, FederatedSMD, federated_smds
from collabcausal.analyst.collaboration import AnchorGram, CollaborativeRepresentation, collaborative_representation
from collabcausal.analyst.effects import (
    BALANCED_ESTIMATORS,
    ESTIMATORS,
    EffectBundle,
    check_estimators,
    estimate_effects,
)
from collabcausal.analyst.grid import Grid
from collabcausal.analyst.replies import check_anchor_keys, check_description, check_representation
from collabcausal.analyst.study_defaults import PARTY_COMPONENTS, configuration_line
from collabcausal.anchor_key import anchor_fingerprint, simulation_anchor_key
from collabcausal.errors import InputError, NumericalError, StudyFailedError
from collabcausal.estimators.blocks import row_blocks
from collabcausal.estimators.bootstrap import stratified_resample
from collabcausal.estimators.validation import check_estimand
from collabcausal.messages import Message
from collabcausal.randomness import child_rng

ANCHOR_BLOCK_VALUES = 1 << 22
"""Default :attr:`DCQEPlan.anchor_block_values`: 32 MB of anchor images held at once."""


@dataclass(frozen=True)
class DCQEPlan:
    """Who takes part in a DC-QE study and how.

    Parameters
    ----------
    row_groups : sequence of sequence of str
        Party names per row group i (disjoint subjects), each listed in column-group order.
    anchor_ranges : mapping of str to (low, high)
        Public range of every covariate, for the uniform anchor (DESIGN.md step 1).
    n_anchors : int, optional
        Anchor rows r; default (None) the study's number of subjects, from the parties' ``describe``
        replies, as paper 003 used (:meth:`anchor_rows`).
    party_components : int or float or mapping
        m~_ij for every party (int or explained-variance fraction), or a mapping per party name;
        default :data:`~collabcausal.analyst.study_defaults.PARTY_COMPONENTS`.
    n_components : int, optional
        m^; default: the smallest row group's total m~_i.
    label_holders : sequence of str, optional
        The party holding T and Y in each row group; default: the first party of the group.
    seed : int
        Study seed: bootstrap streams derive from it. The anchor does not: it follows from the
        parties' anchor key, which the analyst never holds (:mod:`collabcausal.party.anchor`).
    estimand : {"ate", "att"}
    estimators : sequence of {"psm", "ipw", "aipw"}
    study : str
        Study identifier, recorded in the parties' audit logs.
    balance_parties : sequence of sequence of str, optional
        Parties per row group asked for federated balance moments; default: ``row_groups``.
    dp_balance : DPBalanceSpec, optional
        Ask for (epsilon, delta)-DP balance moments (``dp_weighted_moments``, charged to each
        balance party's ledger per request) instead of the exact ``weighted_moments``.
    anchor_block_values : int
        Values of the parties' anchor images A~ the analyst holds at once: the anchor rows are
        asked for in blocks of :meth:`anchor_block_rows` (the whole r in one request when they
        fit), so its memory does not grow with the number of parties.
    """

    row_groups: Sequence[Sequence[str]]
    anchor_ranges: Mapping[str, Sequence[float]]
    n_anchors: int | None = None
    party_components: int | float | Mapping[str, int | float] = PARTY_COMPONENTS
    n_components: int | None = None
    label_holders: Sequence[str] | None = None
    seed: int = 0
    estimand: str = "ate"
    estimators: Sequence[str] = ESTIMATORS
    study: str = "study"
    balance_parties: Sequence[Sequence[str]] | None = field(default=None)
    dp_balance: DPBalanceSpec | None = None
    anchor_block_values: int = ANCHOR_BLOCK_VALUES

    def __post_init__(self) -> None:
        groups = tuple(tuple(g) for g in self.row_groups)
        if not groups or any(not g for g in groups):
            raise InputError("a study needs at least one row group with one party", "list parties per row group")
        names = [p for g in groups for p in g]
        if len(set(names)) != len(names):
            raise InputError("a party appears twice in the plan", "list each party once")
        holders = tuple(g[0] for g in groups) if self.label_holders is None else tuple(self.label_holders)
        if len(holders) != len(groups) or any(h not in g for h, g in zip(holders, groups, strict=False)):
            raise InputError("each row group needs one label holder among its parties", "fix label_holders")
        object.__setattr__(self, "row_groups", groups)
        object.__setattr__(self, "label_holders", holders)
        object.__setattr__(self, "estimand", check_estimand(self.estimand))
        object.__setattr__(self, "estimators", check_estimators(self.estimators))
        balance = groups if self.balance_parties is None else tuple(tuple(g) for g in self.balance_parties)
        if len(balance) != len(groups):
            raise InputError("balance_parties must list parties for every row group", "fix balance_parties")
        object.__setattr__(self, "balance_parties", balance)

    def balance_requests(self) -> int:
        """Balance moment requests per balance party in a full-sample :func:`run_dcqe`.

        One per estimator that defines a balanced sample (:data:`~collabcausal.analyst.effects.BALANCED_ESTIMATORS`)
        and one for the unweighted sample; a bootstrap replicate asks none. With ``dp_balance``
        each party's ledger is charged this many times (epsilon, delta).
        """
        return sum(name in BALANCED_ESTIMATORS for name in self.estimators) + 1

    def parties(self) -> list[str]:
        """Every party of the row groups, row group by row group."""
        return [p for group in self.row_groups for p in group]

    def anchor_rows(self, described: Mapping[str, Message]) -> int:
        """r: ``n_anchors``, or by default the subjects of all row groups (their ``describe`` counts)."""
        if self.n_anchors is not None:
            return int(self.n_anchors)
        return sum(int(described[group[0]].params["n_subjects"]) for group in self.row_groups)

    def anchor_block_rows(self, described: Mapping[str, Message]) -> int:
        """Anchor rows per ``dc_representation`` request: ``anchor_block_values`` over the parties' summed covariates.

        The summed covariates (from ``describe``) bound the width of A~ before any party has said
        how many components it keeps.
        """
        width = sum(len(described[p].params["covariates"]) for p in self.parties())
        return max(1, int(self.anchor_block_values) // max(width, 1))

    def components_of(self, party: str) -> int | float:
        """m~ for one party."""
        if isinstance(self.party_components, Mapping):
            return self.party_components[party]
        return self.party_components


@dataclass(frozen=True, eq=False)
class DCQEResult:
    """One DC-QE run (full sample or one bootstrap replicate).

    Attributes
    ----------
    representation : CollaborativeRepresentation
    treatment, outcome : ndarray
        Stacked over row groups in plan order.
    effects : EffectBundle
        Propensity scores and one EffectEstimate per estimator.
    smd : dict of str to ndarray
        Per estimator with balance weights: SMD per covariate (federated, eqs. 42-44).
    covariates : tuple of str
        Covariate names in the order of the SMD arrays.
    smd_unweighted : ndarray or None
        SMD per covariate of the unweighted sample (federated, eq. 42; the "before" of a Love
        plot), or None where not asked for.
    smd_noise_sd : dict of str to ndarray
        With DP balance moments, per estimator of ``smd``: the first-order sd of each SMD due to
        the DP noise (:class:`~collabcausal.analyst.balance.FederatedSMD`); empty for exact moments.
    smd_unweighted_noise_sd : ndarray or None
        The same for ``smd_unweighted``.
    """

    representation: CollaborativeRepresentation
    treatment: NDArray[np.int8]
    outcome: NDArray[np.float64]
    effects: EffectBundle
    smd: dict[str, NDArray[np.float64]]
    covariates: tuple[str, ...]
    smd_unweighted: NDArray[np.float64] | None = None
    smd_noise_sd: dict[str, NDArray[np.float64]] = field(default_factory=dict)
    smd_unweighted_noise_sd: NDArray[np.float64] | None = None

    @property
    def balance_requests(self) -> int:
        """Balance moment requests this run made of each balance party."""
        return len(self.smd) + (self.smd_unweighted is not None)

    def masmd(self, estimator: str) -> float | None:
        """max_k |SMD_k| (eq. 45), or None where the estimator defines no balanced sample."""
        s = self.smd.get(estimator)
        return None if s is None else float(np.max(np.abs(s)))


def describe_parties(grid: Grid, plan: DCQEPlan, *, timeout: float | None = None) -> dict[str, Message]:
    """Ask every party for its metadata; return the checked ``describe`` replies by party.

    Raises
    ------
    StudyFailedError
        A malformed reply (naming the party), parties of one row group that disagree on their
        subject count or subject ids (order included), a label holder without labels, or
        representation parties without one common anchor key (:func:`check_anchor_keys`): all
        before any representation is requested.
    """
    parties = sorted({p for g in (*plan.row_groups, *plan.balance_parties) for p in g})
    replies = grid.send_and_receive({p: Message("describe", {"study": plan.study}) for p in parties}, timeout=timeout)
    for party, reply in replies.items():
        check_description(party, reply)
    for i, group in enumerate(plan.row_groups):
        counts = {p: int(replies[p].params["n_subjects"]) for p in (*group, *plan.balance_parties[i])}
        if len(set(counts.values())) != 1:
            listing = ", ".join(f"{p}: {n}" for p, n in counts.items())
            raise StudyFailedError(
                f"row group {i} parties disagree on subject count ({listing})",
                "align subjects across the row group's parties first",
            )
        if not replies[plan.label_holders[i]].params["has_labels"]:
            raise StudyFailedError(
                f"label holder {plan.label_holders[i]!r} has no treatment/outcome",
                "declare treatment and outcome on the label holder",
            )
        digests = {replies[p].params.get("ids_sha256") for p in (*group, *plan.balance_parties[i])}
        if len(digests) > 1:
            raise StudyFailedError(
                f"row group {i} parties hold different subject ids or orders",
                "align the row group's subjects first (HMAC alignment, docs/protocol.md)",
            )
    check_anchor_keys(replies, plan.parties())
    return replies


def study_configuration(plan: DCQEPlan, described: Mapping[str, Message]) -> str:
    """:func:`configuration_line` of a study, the anchor key named from the parties' ``describe`` fingerprints.

    The analyst never holds the key, but the simulation key of a seed is public: when the parties'
    fingerprint is that key's, the line says so (the study then gives ``collabcausal simulate``'s
    numbers); otherwise it names the fingerprint and says the anchor differs from a simulation's.
    """
    parties = plan.parties()
    fingerprint = described[parties[0]].params.get("anchor_fingerprint")
    if fingerprint is None:
        key = "none"
    elif fingerprint == anchor_fingerprint(simulation_anchor_key(plan.seed), plan.study):
        key = f"simulation key of seed {plan.seed}"
    else:
        key = f"the parties' own (fingerprint {fingerprint[:12]}; a simulation's anchor differs, and PSM with it)"
    return configuration_line(
        study=plan.study,
        anchor_key=key,
        n_anchors=plan.anchor_rows(described),
        ranges=plan.anchor_ranges,
        party_components=plan.party_components,
        n_components=plan.n_components,
        seed=plan.seed,
    )


def run_dcqe(
    grid: Grid,
    plan: DCQEPlan,
    rows: Sequence[NDArray[np.int64]] | None = None,
    *,
    timeout: float | None = None,
    analytic_se: bool = True,
    unweighted_smd: bool = True,
    balance: bool = True,
    described: Mapping[str, Message] | None = None,
    start_logit: NDArray[np.float64] | None = None,
) -> DCQEResult:
    """Run the DC-QE pipeline once.

    Parameters
    ----------
    grid : Grid
        Transport to the parties.
    plan : DCQEPlan
    rows : sequence of int arrays, optional
        Subject positions per row group (a bootstrap resample); default all subjects.
    timeout : float, optional
        Seconds to wait for each round of replies.
    analytic_se : bool
        Compute analytic standard errors (off inside a bootstrap, where they go unused).
    unweighted_smd : bool
        Also compute the unweighted SMDs (one more round of federated moments with unit weights;
        off inside a bootstrap, where they go unused).
    balance : bool
        Compute the federated SMDs of each estimator's balanced sample (False: ``smd`` is empty,
        e.g. in the analyst's bootstrap, which needs the estimates only).
    described : mapping of str to Message, optional
        The parties' :func:`describe_parties` replies; asked for when not given. Every reply is
        checked against them (:mod:`collabcausal.analyst.replies`).
    start_logit : ndarray, optional
        A guess of the propensity logits of the (resampled) subjects, stacked over row groups:
        inside a bootstrap, the full-sample fit's (:func:`resampled_logits`). Newton starts there
        (half the iterations on LaLonde's replicates); the fit is the same to its tolerance.

    With ``plan.dp_balance`` every balance request is ``dp_weighted_moments`` (bounds from
    ``plan.anchor_ranges``, checked before any request is sent); otherwise ``weighted_moments``.
    """
    if described is None:
        described = describe_parties(grid, plan, timeout=timeout)
    dp = None
    if plan.dp_balance is not None:
        balance_parties = [p for group in plan.balance_parties for p in group]
        dp = plan.dp_balance.for_parties(described, plan.anchor_ranges, balance_parties)
    requests: dict[str, Message] = {}
    n_anchors = plan.anchor_rows(described)
    for i, group in enumerate(plan.row_groups):
        arrays = {} if rows is None else {"rows": np.asarray(rows[i], dtype=np.int64)}
        for party in group:
            params = {
                "study": plan.study,
                "n_anchors": n_anchors,
                "anchor_ranges": {k: [float(v[0]), float(v[1])] for k, v in plan.anchor_ranges.items()},
                "n_components": plan.components_of(party),
                "labels": party == plan.label_holders[i],
            }
            requests[party] = Message("dc_representation", params, arrays)
    kept, anchor = _representations(grid, plan, requests, described, rows, timeout)
    t = np.concatenate([kept[h]["treatment"] for h in plan.label_holders]).astype(np.int8, copy=False)
    y = np.concatenate([kept[h]["outcome"] for h in plan.label_holders]).astype(np.float64, copy=False)
    x_tilde = [[kept[p]["x_tilde"] for p in g] for g in plan.row_groups]
    del kept  # the label holders' arrays are copied into t and y
    representation = collaborative_representation(x_tilde, anchor, plan.n_components)
    del x_tilde  # X~ (n rows) is not kept past X^
    effects = estimate_effects(
        representation.X_hat,
        t,
        y,
        estimand=plan.estimand,
        estimators=plan.estimators,
        analytic_se=analytic_se,
        start_logit=start_logit,
    )
    group_rows = [block.shape[0] for block in representation.blocks] if rows is None else rows
    weighted = {name: effects.balance_weights(name) for name in (plan.estimators if balance else ())}
    sampled: list[str | None] = [name for name, w in weighted.items() if w is not None]
    sampled += [None] if unweighted_smd else []  # None: the unweighted sample
    samples = np.empty((len(sampled), t.shape[0]))  # written in place: the request's (k, n) weights, no stacked copy
    for row, name in zip(samples, sampled, strict=True):
        row[:] = 1.0 if name is None else weighted[name]
    smds = federated_smds(grid, plan.balance_parties, group_rows, t, samples, dp=dp, study=plan.study, timeout=timeout)
    diagnosed: dict[str | None, FederatedSMD] = dict(zip(sampled, smds, strict=True))
    before = diagnosed.pop(None, None)
    names = next((d.covariates for d in (*diagnosed.values(), before) if d is not None), ())
    return DCQEResult(
        representation,
        t,
        y,
        effects,
        {name: d.smd for name, d in diagnosed.items()},
        names,
        None if before is None else before.smd,
        smd_noise_sd={name: d.noise_sd for name, d in diagnosed.items() if d.noise_sd is not None},
        smd_unweighted_noise_sd=None if before is None else before.noise_sd,
    )


def _representations(
    grid: Grid,
    plan: DCQEPlan,
    requests: Mapping[str, Message],
    described: Mapping[str, Message],
    rows: Sequence[NDArray[np.int64]] | None,
    timeout: float | None,
) -> tuple[dict[str, dict[str, NDArray]], AnchorGram]:
    """Ask for the representations block by block of anchor rows; X~ and labels by party, and the anchor Gram.

    The first block's request (``anchor_rows`` from 0) makes every party fit its reducer and send
    X~_ij (and the labels) with its first block of A~_ij; the same requests for the later blocks
    are answered from those fits. Each block is checked and added to the :class:`AnchorGram`, then
    dropped before the next is asked for: the analyst holds one block of each party's anchor image
    at a time (:attr:`DCQEPlan.anchor_block_values` values in all).
    """
    kept: dict[str, dict[str, NDArray]] = {}
    anchor = AnchorGram()
    for block in row_blocks(plan.anchor_rows(described), plan.anchor_block_rows(described)):
        asked = {p: Message(m.operation, {**m.params, "anchor_rows": [block.start, block.stop]}, m.arrays)
                 for p, m in requests.items()}
        replies = grid.send_and_receive(asked, timeout=timeout)
        for i, group in enumerate(plan.row_groups):
            n_rows = int(described[group[0]].params["n_subjects"]) if rows is None else len(rows[i])
            for party in group:
                check_representation(
                    party,
                    replies[party],
                    n_rows=n_rows,
                    n_anchors=block.stop - block.start,
                    n_covariates=len(described[party].params["covariates"]),
                    labels=party == plan.label_holders[i],
                    columns=kept[party]["x_tilde"].shape[1] if kept else None,
                )
        if not kept:
            kept = {p: {k: v for k, v in reply.arrays.items() if k != "a_tilde"} for p, reply in replies.items()}
        anchor.add([[replies[p].array("a_tilde") for p in g] for g in plan.row_groups])
        del replies  # this block of A~ is in the Gram: not held while the next is asked for
    return kept, anchor


def bootstrap_dcqe(
    grid: Grid,
    plan: DCQEPlan,
    n_boot: int,
    *,
    described: Mapping[str, Message],
    full_propensity: NDArray[np.float64] | None = None,
    timeout: float | None = None,
    progress: bool = False,
    on_missing: str = "fail",
) -> tuple[dict[str, NDArray[np.float64]], str | None]:
    """Bootstrap replicates of every estimator's estimate: the whole pipeline on resampled rows.

    Replicate b resamples subjects within each row group with ``child_rng(plan.seed, "bootstrap",
    b)`` (paper 003, section 5), exactly as ``collabcausal simulate`` does, so a study and its
    simulation print the same numbers. A replicate whose estimators fail numerically (e.g. an
    empty arm) is NaN, counted as failed by :func:`~collabcausal.estimators.intervals.interval_estimate`;
    a party's refusal or a protocol failure ends the study. With ``full_propensity`` (the
    full-sample run's, stacked over row groups) each replicate's propensity fit starts from its
    subjects' full-sample logits (:func:`resampled_logits`), as the simulation's do.

    With ``on_missing = "continue"``, a party lost (:class:`StudyFailedError`) at replicate b >= 2 stops
    the bootstrap there: replicates 0..b-1 are resamples drawn from seeds fixed before the study, so
    stopping early at a time that does not depend on their values leaves a valid bootstrap of fewer
    replicates. Finishing on the remaining parties would mix replicates of another estimator in.

    Returns
    -------
    replicates : dict of str to ndarray of shape (n_boot,), or (b,) when stopped at replicate b
    stopped : str or None
        When the bootstrap stopped early: at which replicate, when (UTC), and the transport's error.
    """
    sizes = [int(described[group[0]].params["n_subjects"]) for group in plan.row_groups]
    out = {name: np.full(int(n_boot), np.nan) for name in plan.estimators}
    full_logits = None if full_propensity is None else logit(full_propensity)  # once, for every replicate
    for b in tqdm(range(int(n_boot)), desc="bootstrap", disable=not progress or n_boot < 1, file=sys.stderr):
        rows = stratified_resample(sizes, child_rng(plan.seed, "bootstrap", b))
        try:
            result = run_dcqe(
                grid,
                plan,
                rows,
                start_logit=None if full_logits is None else resampled_logits(full_logits, rows),
                timeout=timeout,
                analytic_se=False,
                unweighted_smd=False,
                balance=False,
                described=described,
            )
        except (InputError, NumericalError):
            continue
        except StudyFailedError as lost:
            if on_missing != "continue" or b < 2:
                raise
            when = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
            stopped = f"the bootstrap stopped at replicate {b} of {int(n_boot)} at {when}: {lost.problem}"
            return {name: values[:b] for name, values in out.items()}, stopped
        for name, estimate in result.effects.estimates.items():
            out[name][b] = estimate.estimate
    return out, None


def resampled_logits(full_logits: NDArray[np.float64], rows: Sequence[NDArray[np.int64]]) -> NDArray[np.float64]:
    """The full-sample propensity logits at a resample's subjects, stacked over row groups.

    ``full_logits`` are the full-sample fit's logits, stacked over the row groups in order;
    ``rows[i]`` holds the positions drawn in row group i (a stratified resample keeps each group's
    size). The result, aligned with the resample's rows, is where a replicate's propensity fit
    starts (``start_logit`` of :func:`run_dcqe`).
    """
    sizes = [len(r) for r in rows]
    if sum(sizes) != full_logits.shape[0]:
        raise InputError(
            f"the full-sample logits cover {full_logits.shape[0]} subjects, the resample's row groups {sum(sizes)}",
            "pass the logits of the full-sample run of the same row groups",
        )
    starts = itertools.accumulate(sizes[:-1], initial=0)
    return np.concatenate([full_logits[lo : lo + len(r)][r] for lo, r in zip(starts, rows, strict=True)])
