"""The statistics release of vertical ``dp_effects``: per-arm Gram blocks and cross-products across two parties.

The label holder L owns the round's key (depth 1, :func:`~collabcausal.vertical.parameters.preset` ``(1)``):

``vertical_statistics_columns`` (L, charged)
    L's factors (:func:`~collabcausal.estimators.dp.effects.vertical.label_vectors`: its covariates, the arm
    indicator, the outcome, each as one complex column of the treated's and the controls' values) encrypted
    under a fresh key, signed with the round's terms; L keeps its own entries
    (:func:`~collabcausal.estimators.dp.effects.statistics.fold_statistics` of its design) exact until it opens.
``vertical_statistics_totals`` (P, charged once the columns verify)
    For each cross entry, L's factor times P's plaintext columns summed over subjects, P's noise share
    on each, packed two a slot into one ciphertext, every other slot part masked and flooded
    (:func:`~collabcausal.vertical.dp_effects_rounds.cross_totals`); signed.
``vertical_statistics_open`` (L)
    Checks P's signature, decrypts each total, adds its own share; its own entries get their noise too.

The sensitivity is the horizontal one of the whole design (a substituted subject changes every party's
columns at once), widened by the encryption margin
(:func:`~collabcausal.estimators.dp.effects.vertical_program.statistics_sigma`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from collabcausal.errors import ProtocolError
from collabcausal.estimators.dp.effects.statistics import fold_statistics
from collabcausal.estimators.dp.effects.vertical import (
    MAX_COLUMN_GROUPS,
    CrossEntry,
    cross_entries,
    entry_parties,
    label_vectors,
)
from collabcausal.estimators.dp.effects.vertical_program import (
    noise_share,
    share_sd,
    statistics_bound,
    statistics_sigma,
)
from collabcausal.messages import Message
from collabcausal.party.node import Party
from collabcausal.party.operations import operation
from collabcausal.party.vertical.evaluations import add_batch, begin, evaluation
from collabcausal.party.vertical.exchange import (
    COLUMNS_PARAMETERS,
    SEAL_KEYS,
    columns_reply,
    pinned_identity,
    receiver_keys,
    sealed_columns,
    sealed_reply,
    totals_reply,
    verified_columns,
)
from collabcausal.party.vertical.opening import open_parameters, open_release
from collabcausal.party.vertical.request import (
    ANY_OTHER,
    LABEL_HOLDER,
    VERTICAL_PARAMETERS,
    VerticalRequest,
    charge,
    parse_vertical,
)
from collabcausal.party.vertical.rounds import KeyRound, check_new_round, next_batch, open_round
from collabcausal.vertical.dp_effects_rounds import (
    ARM_PRODUCT,
    arm_products,
    cross_summands,
    encrypt_label_vectors,
    packed_entries,
    statistics_depth,
)
from collabcausal.vertical.keys import KeyOwner
from collabcausal.vertical.packing import check_headroom
from collabcausal.vertical.parameters import preset
from collabcausal.vertical.relay import SEALED_FROM

COLUMNS = "vertical_statistics_columns"
TOTALS = "vertical_statistics_totals"
OPEN = "vertical_statistics_open"
RELEASE = "statistics"
DESIGN_BOUND = 1.0
"""A public bound on a subject's summand: L's factor (modulus at most ``INPUT_BOUND``, 1) times the other parties'
product of design values, each in [-1, 1] (:meth:`~collabcausal.estimators.dp.effects.design.FeatureMap.design`
clips, norm bounds only scale down); every party checks the headroom with it before it charges."""

__all__ = ["COLUMNS", "OPEN", "TOTALS"]


def _keys(req: VerticalRequest) -> list[int | str]:
    """L's factors, in the order it encrypts them (:func:`label_vectors` of no rows)."""
    fm = req.feature_map
    vectors = label_vectors(np.zeros((0, fm.dim)), np.zeros(0), np.zeros(0), req.groups, fm.n_sites, req.site)
    return [key for kind, key in vectors if kind == "T"]


def _entries(req: VerticalRequest, evaluator: int) -> list[CrossEntry]:
    """The cross entries ``evaluator`` totals, in the order its totals carry them (:func:`packed_entries`)."""
    return packed_entries([e for e in cross_entries(req.groups, req.feature_map.n_sites) if e.evaluator == evaluator])


def _terms(req: VerticalRequest) -> dict[str, Any]:
    return req.terms() | {"release": RELEASE, "keys": _keys(req)}


def _senders(req: VerticalRequest) -> list[int]:
    """The parties whose products of L's arm this evaluator multiplies: every earlier one but L."""
    return list(range(1, req.me))


def _receivers(req: VerticalRequest) -> list[int]:
    """The parties this evaluator's products of L's arm go to, sealed: every later one."""
    return list(range(req.me + 1, req.groups.n_parties))


@operation(COLUMNS, parameters=VERTICAL_PARAMETERS, differentially_private=True)
def vertical_statistics_columns(party: Party, request: Message) -> Message:
    """L: encrypt its factors of the request's batch for the statistics round (module docstring); charged at
    batch 0, before it computes."""
    req = parse_vertical(party, request, LABEL_HOLDER)
    pinned_identity(party)
    fm = req.feature_map
    terms = _terms(req)
    if req.batch > 0:
        state = next_batch(party, req, RELEASE, terms)
    else:
        check_new_round(party, req.round_id)
        sigma = statistics_sigma(fm, req.rho, req.groups)
        parameters = preset(statistics_depth(req.groups.n_parties))
        check_headroom(parameters, req.n_subjects, req.batch_rows, DESIGN_BOUND, share_sd(sigma), COLUMNS)
        charge(party, request, req, sigma, RELEASE)
        y = fm.centred_outcome(party.table.outcome)
        local = sum(fold_statistics(req.design(party, rows), party.table.treatment[rows], y[rows], fm.outcome_width)
                    for rows in req.batch_slices())
        evaluators = range(1, req.groups.n_parties)
        totals = tuple(np.array([e.index for e in _entries(req, g)], dtype=np.int64) for g in evaluators)
        local[np.concatenate(totals)] = 0.0  # the totals fill these
        state = KeyRound(RELEASE, KeyOwner(parameters), terms, tuple(req.parties[g] for g in evaluators), sigma,
                         statistics_bound(fm, req.groups), entry_parties(req.groups, fm.n_sites), totals, local,
                         req.batches)
        open_round(party, req.round_id, state)
    rows = req.rows
    design = req.design(party, rows)
    u = np.clip(fm.centred_outcome(party.table.outcome[rows]) / fm.outcome_width, -0.5, 0.5)
    columns = encrypt_label_vectors(state.owner, label_vectors(
        design, party.table.treatment[rows].astype(float), u, req.groups, fm.n_sites, req.site))
    return columns_reply(party, request, req, state.owner, list(columns.values()), terms)


@operation(TOTALS, parameters=VERTICAL_PARAMETERS | COLUMNS_PARAMETERS | {SEALED_FROM, SEAL_KEYS},
           differentially_private=True)
def vertical_statistics_totals(party: Party, request: Message) -> Message:
    """An evaluator: its cross entries under L's key, summed batch by batch, its noise share inside (module
    docstring); with three or more column groups it also multiplies the earlier parties' products of L's arm and
    seals its own to the later ones. Charged at batch 0 once everything relayed verifies."""
    req = parse_vertical(party, request, ANY_OTHER)
    terms = _terms(req)
    keys = _keys(req)
    state = evaluation(party, req, RELEASE, terms)
    context, columns = verified_columns(party, request, req, terms, req.parties[LABEL_HOLDER],
                                        None if state is None else state.context)
    if len(columns) != len(keys):
        raise ProtocolError(f"{TOTALS}: {len(columns)} encrypted factors for {len(keys)}", "relay L's reply unchanged")
    encrypted = dict(zip(keys, columns, strict=True))
    senders, receivers = _senders(req), _receivers(req)
    if senders:
        received = sealed_columns(party, request, req, terms, context, senders,
                                  {s: len(req.columns_of(s)) for s in senders})
        encrypted |= {(ARM_PRODUCT, c): column for s in senders
                      for c, column in zip(req.columns_of(s), received[s], strict=True)}
    keys = receiver_keys(party, req, receivers, request.params.get(SEAL_KEYS)) if receivers else {}
    fm = req.feature_map
    sigma = statistics_sigma(fm, req.rho, req.groups)
    if state is None:
        check_headroom(context.parameters, req.n_subjects, req.batch_rows, DESIGN_BOUND, share_sd(sigma), TOTALS)
        charge(party, request, req, sigma, RELEASE)
        state = begin(party, req, RELEASE, terms, context)
    entries = _entries(req, req.me)
    design = req.design(party, req.rows)
    sealed: tuple[dict[str, Any], dict[str, np.ndarray]] = ({}, {})
    if keys:
        sealed = sealed_reply(party, req, terms, context, arm_products(encrypted["arm"], design, req.own_columns), keys)
    summed = add_batch(party, req, state, cross_summands(encrypted, design, entries, req.own_columns))
    if summed is None:
        return Message(request.operation, {"batch": req.batch, "sigma": sigma} | sealed[0], sealed[1])
    totals = summed.packed(context, noise_share(np.full(len(entries), 2), sigma), share_sd(sigma))
    reply = totals_reply(party, request, req, totals, terms, {"sigma": sigma})
    return Message(request.operation, reply.params | sealed[0], reply.arrays | sealed[1])


@operation(OPEN, parameters=open_parameters(MAX_COLUMN_GROUPS - 1), differentially_private=True)
def vertical_statistics_open(party: Party, request: Message) -> Message:
    """L: the released statistics vector (module docstring)."""
    return open_release(party, request, RELEASE)
