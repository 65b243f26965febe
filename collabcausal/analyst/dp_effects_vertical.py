"""The coordinator's side of ``dp_effects`` on column groups (docs/dp-effects-vertical.md).

Each row group has two parties holding different covariates of the same, aligned subjects: the label
holder L (T, Y and its covariates) and one other party P. For every row group the coordinator relays
the two releases' three steps (:mod:`collabcausal.party.vertical`) and sees only ciphertexts and
signatures, then each release's noisy vector:

1. statistics: L encrypts its factors, P totals the cross entries under L's key with its noise share,
   L opens them with its own share and adds its local entries (both parties charged);
2. the nuisance model, its noise replicates and the clip limits, fitted from the statistics summed over
   row groups (:func:`~collabcausal.estimators.dp.effects.vertical_program.program_from_statistics`:
   post-processing);
3. scores: P encrypts its clipped parts, L evaluates the AIPW scores under P's key and totals them with
   its noise share, P opens them with its own (both charged);
4. the estimate and interval from the summed score sums
   (:func:`~collabcausal.estimators.dp.effects.vertical_program.vertical_effect`).

With :data:`MIN_SECURE` or more row groups (and ``secure_aggregation = true``) each release's key owners
open under secure aggregation (:func:`~collabcausal.analyst.secure_sum.secure_sum`; the key owner's share
calibrated to the verified roster, :mod:`collabcausal.party.vertical.opening`): the coordinator sees only
the sum over row groups. Fewer row groups are summed here in the clear, each row group's release DP on its
own. The analyst recomputes every noise scale from its own requests and refuses a reply that states another.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np
from numpy.typing import NDArray

from collabcausal.analyst.dp_effects import check_stated_sigma, checked_values
from collabcausal.analyst.dp_effects_feasibility import check_study_size
from collabcausal.analyst.dp_effects_spec import DPEffectsSpec
from collabcausal.analyst.grid import Grid
from collabcausal.analyst.replies import check_description
from collabcausal.analyst.secure_sum import secure_sum
from collabcausal.errors import InputError, StudyFailedError
from collabcausal.estimators.dp.effects.design import FeatureMap
from collabcausal.estimators.dp.effects.vertical import MAX_COLUMN_GROUPS, ColumnGroups, entry_parties
from collabcausal.estimators.dp.effects.vertical_program import (
    SCORE_NOISE_PARTIES,
    ScoreProgram,
    program_from_statistics,
    scores_bound,
    statistics_bound,
    statistics_sigma,
    vertical_effect,
)
from collabcausal.estimators.dp.zcdp import gaussian_zcdp_sigma, zcdp_epsilon
from collabcausal.messages import Message
from collabcausal.secagg import KEYS_OPERATION, NOISE_TAIL
from collabcausal.secagg.pins import DEFAULT_MIN_PARTIES
from collabcausal.vertical.relay import CONTEXT, SEALED_FROM, relay_sealed, relayed_totals
from collabcausal.vertical.sealed import seal_round

BATCH_ROWS = 65_536
"""Subjects per batch of a round's columns: one batch's messages hold 16 statistics and 8 scores ciphertexts per
column (about 0.2 GB at most), whatever the study's size."""
MIN_SECURE = DEFAULT_MIN_PARTIES
"""Row groups from which each release's key owners open under secure aggregation (a party's default
``min_parties``); fewer open in the clear, each row group's release DP on its own."""
STEPS = {"statistics": ("vertical_statistics_columns", "vertical_statistics_totals", "vertical_statistics_open"),
         "scores": ("vertical_scores_columns", "vertical_scores_totals", "vertical_scores_open")}
"""Each release's three operations: the key owner encrypts, the evaluator totals, the key owner opens."""
PARTS = "vertical_scores_parts"
"""With three or more column groups: a further party's score parts, sealed to the label holder."""
NOTE = (
    "dp_effects on column groups: in each row group both releases were computed under CKKS encryption (TenSEAL). "
    "The two parties that hold each sum, the label holder and the party that totals or opens it, each added a DP "
    "noise share that alone gives the release's guarantee, so no party saw another's per-subject values; with three "
    "or more parties the ciphertexts passed on between them travelled sealed to their receiver (X25519, HKDF, "
    "AES-GCM), and the coordinator relayed only signed or sealed ciphertexts and the noisy vectors. Every party was "
    "charged both releases (zCDP, substitution of one subject's whole record). The propensity weights are a "
    "degree-15 polynomial of the smoothly trimmed weight, its range proved from the model; the nuisance model, "
    "estimate and interval are post-processing."
)

__all__ = ["VerticalPlan", "party_batch_rows", "vertical_effects_results", "vertical_plan"]


@dataclass(frozen=True)
class VerticalPlan:
    """Who holds what: per row group its parties (label holder first, then one per further column group), and the
    covariates of each column group."""

    row_groups: tuple[tuple[str, ...], ...]
    group_names: tuple[tuple[str, ...], ...]
    n_subjects: tuple[int, ...]
    norm_bounds: tuple[float, ...] | None = None

    @property
    def columns(self) -> tuple[str, ...]:
        """The design order: the column groups concatenated."""
        return tuple(c for g in self.group_names for c in g)

    @property
    def groups(self) -> ColumnGroups:
        """The column groups as positions in :attr:`columns`."""
        return ColumnGroups.of_sizes([len(g) for g in self.group_names], self.norm_bounds)


def check_vertical_spec(spec: DPEffectsSpec) -> None:
    """What a study on column groups serves, refused in one line before anything is sent."""
    if spec.n_folds != 1 or spec.nuisance != "pooled":
        raise InputError("dp_effects on column groups fits pooled full-sample nuisances",
                         'set n_folds = 1 and nuisance = "pooled" in [dp_effects]')
    if tuple(spec.estimators) != ("aipw",) or tuple(spec.estimands) != ("ate",):
        raise InputError(f"dp_effects on column groups serves the AIPW ATE, not {list(spec.estimators)} x "
                         f"{list(spec.estimands)}", 'set estimators = ["aipw"] and estimands = ["ate"]')
    if spec.modifiers or spec.subgroups:
        raise InputError("dp_effects on column groups has no modifiers or subgroups yet",
                         "drop modifiers and subgroups, or run the study on row groups of one party each")
    if spec.cross_weight != 1.0:
        raise InputError("dp_effects on column groups releases unweighted cross sums (computed under encryption)",
                         "leave cross_weight out of [dp_effects], or run the study on row groups of one party each")
    if spec.replicate_step != 1.0:  # a replicate's range is proved from its change, so it would widen as much
        raise InputError("dp_effects on column groups bounds each noise replicate by its own change, so a "
                         "replicate_step widens its range and noise as much and gains nothing",
                         "leave replicate_step out of [dp_effects], or run the study on row groups of one party each")


def vertical_plan(described: Mapping[str, Message], row_groups: Sequence[Sequence[str]], label_holders: Sequence[str],
                  columns: Sequence[str], norm_bounds: Sequence[float] | None = None) -> VerticalPlan:
    """Assign each study covariate to the party of its row group that holds it (the label holder first).

    The label holder keeps every study covariate it holds; each other party is a column group of the covariates it
    holds and the label holder lacks, ordered by the study's order of their first covariates. Every row group must
    split the covariates the same way (the statistics are summed entry by entry).

    Raises
    ------
    StudyFailedError
        A row group of one party or of more than ``MAX_COLUMN_GROUPS``, a label holder without T and Y, a covariate
        no party of a row group holds or two parties besides the label holder hold, a party holding none, row groups
        split differently, or parties of one row group with different numbers of (aligned) subjects.
    """
    plans, sizes, orders = [], [], []
    for group, holder in zip(row_groups, label_holders, strict=True):
        if not 2 <= len(group) <= MAX_COLUMN_GROUPS:
            raise StudyFailedError(f"row group {list(group)} has {len(group)} parties; dp_effects on column groups "
                                   f"takes a label holder and 1 to {MAX_COLUMN_GROUPS - 1} other parties",
                                   "list 2 or more parties per [[row_groups]]")
        for p in group:
            check_description(p, described[p])
        if not described[holder].params["has_labels"]:
            raise StudyFailedError(f"label holder {holder!r} holds no treatment and outcome",
                                   "name the party with T and Y as label_holder of its row group")
        held = {p: set(described[p].params["covariates"]) for p in group}
        owners: dict[str, str] = {}
        for c in columns:
            if c in held[holder]:
                owners[c] = holder
                continue
            holding = [p for p in group if p != holder and c in held[p]]
            if not holding:
                raise StudyFailedError(f"no party of row group {list(group)} holds {c!r}",
                                       "drop it from [dp_effects] columns, or add the party that holds it")
            if len(holding) > 1:
                raise StudyFailedError(f"{holding[0]!r} and {holding[1]!r} of row group {list(group)} both hold {c!r} "
                                       f"(the label holder {holder!r} does not)",
                                       "give each covariate to one party besides the label holder")
            owners[c] = holding[0]
        others = sorted((p for p in group if p != holder), key=lambda p: min(
            (i for i, c in enumerate(columns) if owners[c] == p), default=len(columns)))
        idle = [p for p in others if p not in owners.values()]
        if idle:
            raise StudyFailedError(f"party {idle[0]!r} holds none of the study's covariates that {holder!r} lacks",
                                   "leave it out of the row group, or run the study on row groups of one party each")
        order = (holder, *others)
        split = tuple(tuple(c for c in columns if owners[c] == p) for p in order)
        plans.append(split)
        orders.append(order)
        counts = {int(described[p].params["n_subjects"]) for p in group}
        if len(counts) != 1:
            raise StudyFailedError(f"the parties of row group {list(group)} hold {sorted(counts)} subjects",
                                   "align the row group first (study.toml align = true and a shared alignment key)")
        sizes.append(counts.pop())
        if split != plans[0]:
            raise StudyFailedError(f"row group {list(group)} splits the covariates as {[list(s) for s in split]}, "
                                   f"not as the first row group {[list(s) for s in plans[0]]}",
                                   "give every row group's parties the same columns")
    return VerticalPlan(tuple(orders), plans[0], tuple(sizes), norm_bounds)


def vertical_effects_results(grid: Grid, spec: DPEffectsSpec, study: str, row_groups: Sequence[Sequence[str]],
                             label_holders: Sequence[str], *, timeout: float | None = None,
                             batch_rows: int = BATCH_ROWS) -> dict[str, Any]:
    """Run ``dp_effects`` over row groups of two or more parties holding different covariates; the report's kind
    part.

    ``batch_rows``: subjects per batch of each round's columns with two parties (:data:`BATCH_ROWS`; fewer with more,
    :func:`party_batch_rows`; the parties accept up to :data:`~collabcausal.party.vertical.request.MAX_BATCH_ROWS`).
    """
    check_vertical_spec(spec)
    parties = [p for g in row_groups for p in g]
    described = grid.send_and_receive({p: Message("describe", {"study": study}) for p in parties}, timeout=timeout)
    plan = vertical_plan(described, row_groups, label_holders, spec.columns,
                         None if spec.norm_bounds is None else tuple(spec.norm_bounds))
    secure = spec.secure_aggregation and len(plan.row_groups) >= MIN_SECURE
    check_study_size(spec, dict(zip([g[0] for g in plan.row_groups], plan.n_subjects, strict=True)),
                     partial(statistics_noise_sd, groups=plan.groups, secure=secure))  # before the first charge
    ranges = dict(zip(spec.columns, spec.bounds, strict=True))
    feature_map = FeatureMap(tuple(ranges[c] for c in plan.columns), spec.outcome_range, len(plan.row_groups))
    (rho_n, delta_n), (rho_s, delta_s) = spec.budgets
    base = {"study": study, "design": feature_map.to_spec(), "column_groups": [list(g) for g in plan.group_names],
            "norm_bounds": None if plan.norm_bounds is None else list(plan.norm_bounds)}

    def terms(site: int, rho: float, delta: float) -> dict[str, Any]:
        pair = plan.row_groups[site]
        return base | {"site": site, "parties": list(pair), "n_subjects": plan.n_subjects[site], "rho": rho,
                       "delta": delta, "round": f"{study}/{{release}}/{site}",
                       "batch_rows": party_batch_rows(batch_rows, len(pair))}

    groups = plan.groups
    rounds = _Rounds(grid, plan, timeout, secure=secure)
    stats, stats_var = rounds.release("statistics", lambda s: terms(s, rho_n, delta_n), {},
                                      statistics_bound(feature_map, groups), rho_n,
                                      entry_parties(groups, feature_map.n_sites))
    stats_sd = np.sqrt(stats_var)
    program = program_from_statistics(stats, stats_sd, feature_map, groups, trim=spec.trim,
                                      ridge_scale=spec.ridge_scale, n_replicates=spec.nuisance_replicates,
                                      rng=np.random.default_rng(spec.seed))
    released, scores_var = rounds.release("scores", lambda s: terms(s, rho_s, delta_s), {"program": program.to_spec()},
                                          scores_bound(program), rho_s,
                                          np.full(len(program.parts), SCORE_NOISE_PARTIES))
    n = sum(plan.n_subjects)
    effect, sds = vertical_effect(released, float(np.sqrt(scores_var.max())), program.parts, n, alpha=spec.alpha)
    return _report(spec, plan, feature_map, program, effect, sds, n, float(np.max(stats_sd)), rounds)


def party_batch_rows(batch_rows: int, parties: int) -> int:
    """Subjects per batch for a row group of ``parties``: ``batch_rows`` over the power of two at or above the number
    of parties whose score parts the label holder receives (``parties - 1``), so that no message, and no batch the
    label holder holds, carries more ciphertexts than with two parties (8,192 slots a ciphertext divide it)."""
    return max(1, batch_rows // 2 ** math.ceil(math.log2(max(parties - 1, 1))))


def statistics_noise_sd(spec: DPEffectsSpec, n_subjects: Mapping[str, int], *, groups: ColumnGroups,
                        secure: bool) -> float:
    """The largest noise sd of a summed statistics entry, as the study will draw it (the ridge's scale): an entry
    computed by both parties carries every row group's evaluator share (``sigma`` each) and key owner share
    (``sigma`` each in the clear; under secure aggregation about ``sigma / sqrt(S - 1)``)."""
    S = len(n_subjects)
    sigma = statistics_sigma(FeatureMap(spec.bounds, spec.outcome_range, S), spec.budgets[0][0], groups)
    return sigma * math.sqrt(S + (S / (S - 1) if secure else S))


class _Rounds:
    """The releases of one study: per row group, the key owner's columns relayed to the evaluators (and, with three or
    more column groups, each party's sealed ciphertexts to the parties they are sealed for) and their totals back; then
    each key owner opens, in the clear or (``secure``) masked so only the sum over row groups is seen. Counts the
    ciphertext bytes relayed (each crosses the wire twice: in from its sender, out to its receiver)."""

    def __init__(self, grid: Grid, plan: VerticalPlan, timeout: float | None, *, secure: bool) -> None:
        self.grid, self.plan, self.timeout, self.secure = grid, plan, timeout, secure
        self.relayed: dict[str, int] = {}
        self.unpinned: set[str] = set()

    def release(self, release: str, terms: Callable[[int], dict[str, Any]], extra: dict[str, Any], sensitivity: float,
                rho: float, computing: NDArray[np.int64]) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """The release summed over row groups and each entry's noise variance (``computing``: how many parties add
        a noise share to each entry; an evaluator's share is on those computed by two)."""
        sigma = gaussian_zcdp_sigma(sensitivity, rho)
        S, length = len(self.plan.row_groups), int(computing.size)
        params = [terms(s) | extra | {"round": terms(s)["round"].format(release=release)} for s in range(S)]
        owner = 0 if release == "statistics" else 1
        totals = [self._totals(release, self.plan.row_groups[s], params[s], sigma) for s in range(S)]
        opening = STEPS[release][2]

        def open_message(s: int) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
            relayed = [relayed_totals(reply, k) for k, reply in enumerate(totals[s])]
            return ({"study": params[s]["study"], "round": params[s]["round"]} | {
                k: v for p, _ in relayed for k, v in p.items()}, {k: v for _, a in relayed for k, v in a.items()})

        evaluators = np.where(computing >= 2, S * sigma**2, 0.0)
        if not self.secure:
            values = [self._open(self.plan.row_groups[s][owner], Message(opening, *open_message(s)), sigma, length)
                      for s in range(S)]
            return np.sum(values, axis=0), evaluators + S * sigma**2
        by_owner = {self.plan.row_groups[s][owner]: s for s in range(S)}
        summed = secure_sum(self.grid, opening, list(by_owner), lambda p: open_message(by_owner[p])[0], sensitivity,
                            rho, length=length, value_bound=max(self.plan.n_subjects) + NOISE_TAIL * sigma,
                            study=str(params[0]["study"]), timeout=self.timeout,
                            arrays=lambda p: open_message(by_owner[p])[1], max_attempts=1)
        self.unpinned |= set(summed.unpinned)
        return summed.total, evaluators + summed.noise_sd**2

    def _totals(self, release: str, parties: tuple[str, ...], params: dict[str, Any], sigma: float) -> list[Message]:
        """Steps 1 and 2 in one row group, batch by batch (each batch's ciphertexts relayed as they come, so no
        process holds more than one): the key owner encrypts (charged at batch 0), every other party in turn
        totals or, for the scores of three or more column groups, seals its parts to the label holder (charged at
        batch 0); the evaluators' totals come after the last batch. Sealed ciphertexts go to the party they are
        sealed for, under round keys it made for them (``secagg_keys``) before batch 0."""
        encrypt, total, _ = STEPS[release]
        batches = math.ceil(int(params["n_subjects"]) / int(params["batch_rows"]))
        done: dict[str, int] = {}
        owner, evaluators = (0, range(1, len(parties))) if release == "statistics" else (1, [0])
        further = [] if release == "statistics" else list(range(2, len(parties)))
        receivers = list(range(2, len(parties))) if release == "statistics" else ([0] if further else [])
        try:
            seal_keys = {r: self.grid.request(parties[r], Message(KEYS_OPERATION, {
                "study": params["study"], "round": seal_round(params["round"])}), timeout=self.timeout
            ).params.get("advertisement") for r in receivers}
            for batch in range(batches):
                asked = params | {"batch": batch}
                columns = self._ask(parties[owner], Message(encrypt, asked), done)
                self._count(f"{release}: columns", columns)
                context = {k: v for k, v in columns.arrays.items() if k.startswith(CONTEXT)}
                replies: dict[int, Message] = {}
                for g in further:
                    replies[g] = self._ask(parties[g], Message(PARTS, asked | _relayed(columns, "context_advertisement")
                                                               | {"seal_keys": {"0": seal_keys[0]}}, context), done)
                    self._count(f"{release}: sealed parts", replies[g])
                for g in evaluators:
                    sealed = [relay_sealed(replies[i], i, g) for i in sorted(replies) if i != g and (
                        release == "scores" or i < g)]
                    keys = {str(r): seal_keys[r] for r in receivers if r > g} if release == "statistics" else {}
                    replies[g] = self._ask(parties[g], Message(total, asked | _relayed(
                        columns, "chunks", "context_advertisement", "columns_advertisement")
                        | ({SEALED_FROM: {k: v for p, _ in sealed for k, v in p.items()}} if sealed else {})
                        | ({"seal_keys": keys} if keys else {}),
                        dict(columns.arrays) | {k: v for _, a in sealed for k, v in a.items()}), done)
                    self._count(f"{release}: totals", replies[g])
        except StudyFailedError as exc:
            charged = "; ".join(f"{p} was charged and computed {n} of {batches} batches" for p, n in done.items())
            raise StudyFailedError(f"{exc.problem} (the {release} round of row group {list(parties)}: "
                                   f"{charged or 'nothing was charged'}; no value of it reached the coordinator)",
                                   exc.fix) from exc
        for g in evaluators:
            check_stated_sigma(parties[g], total, replies[g], sigma)
        return [replies[g] for g in evaluators]

    def _ask(self, party: str, message: Message, done: dict[str, int]) -> Message:
        reply = self.grid.request(party, message, timeout=self.timeout)
        done[party] = done.get(party, 0) + 1
        return reply

    def _count(self, step: str, reply: Message) -> None:
        self.relayed[step] = self.relayed.get(step, 0) + sum(int(a.nbytes) for a in reply.arrays.values())

    def _open(self, owner: str, request: Message, sigma: float, length: int) -> NDArray[np.float64]:
        reply = self.grid.request(owner, request, timeout=self.timeout)
        return checked_values(owner, request.operation, reply, sigma, length)


def _relayed(reply: Message, *keys: str) -> dict[str, Any]:
    return {k: reply.params.get(k) for k in keys}


def _report(spec: DPEffectsSpec, plan: VerticalPlan, feature_map: FeatureMap, program: ScoreProgram, effect: Any,
            sds: NDArray[np.float64], n: int, statistics_sd: float, rounds: _Rounds) -> dict[str, Any]:
    (rho_n, delta_n), (rho_s, delta_s) = spec.budgets
    rho, delta = rho_n + rho_s, delta_n + delta_s
    spend = {p: {"epsilon": zcdp_epsilon(rho, delta), "delta": delta, "rho": rho} for g in plan.row_groups for p in g}
    row = effect.to_dict() | {"method": "dp-aipw", "n": n, "dp_floor": float(sds[0]) / n}
    holders = {g[0] for g in plan.row_groups}
    return {
        "estimand": "ate",
        "estimates": {"aipw-ate": row},
        "per_party": {},
        "privacy": spend,
        "dp_effects": {
            "n_subjects": dict(zip([g[0] for g in plan.row_groups], plan.n_subjects, strict=True)),
            "column_groups": {p: list(plan.group_names[k]) for g in plan.row_groups for k, p in enumerate(g)},
            "label_holders": sorted(holders), "nuisance": "pooled", "n_folds": 1,
            "secure_aggregation": rounds.secure, "secure_aggregation_unpinned": sorted(rounds.unpinned),
            "relayed_bytes": rounds.relayed,
            "statistics_noise_sd": statistics_sd, "scores_noise_sd": {"aipw_ate": float(sds[0])},
            "design": feature_map.to_spec(), "trim": spec.trim,
            "weight_polynomial": {"degree": len(program.poly.coefficients) - 1, "domain": program.poly.domain,
                                  "error": program.poly.error},
        },
        "notes": [NOTE],
        "warnings": ([] if len(plan.row_groups) == 1 or rounds.secure else [
            f"dp_effects on column groups: the {len(plan.row_groups)} row groups' releases were summed in the clear "
            f"(each is DP on its own; secure aggregation across row groups needs {MIN_SECURE} or more row groups and "
            "secure_aggregation = true)"]) + ([] if not rounds.unpinned else [
            f"secure aggregation: {', '.join(sorted(rounds.unpinned))} trust the coordinator's roster "
            "(peers = \"any\"): their releases are protected only against an honest-but-curious coordinator"]),
    }
