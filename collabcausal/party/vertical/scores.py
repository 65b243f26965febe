"""The scores release of vertical ``dp_effects``: bounded AIPW sums whose weights are nonlinear in split predictors.

The other party P owns the round's key (depth 7, :func:`~collabcausal.vertical.parameters.preset` ``(7)``);
the coordinator sends both the score program
(:class:`~collabcausal.estimators.dp.effects.vertical_program.ScoreProgram`:
the model fitted from the released statistics, the clip limits, the replicates' changes), from which each
party recomputes the weight polynomial, every released sum's proved range and so its sensitivity:

``vertical_scores_columns`` (P, charged)
    P's clipped parts of ``eta / E``, ``mu0 / U``, ``mu1 / U`` for the model and each replicate's change,
    encrypted under a fresh key, signed with the round's terms (the program included).
``vertical_scores_totals`` (L, charged once the columns verify)
    Adds its own parts in the clear, evaluates the weight polynomial and the scores under encryption
    (:func:`~collabcausal.vertical.dp_effects_rounds.score_summands`) and totals each released sum with its
    noise share inside; signed.
``vertical_scores_open`` (P)
    Checks L's signature, decrypts each total, adds its own share.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from collabcausal.errors import ProtocolError
from collabcausal.estimators.dp.effects.vertical_program import (
    SCORE_NOISE_PARTIES,
    ScoreProgram,
    noise_share,
    score_inputs,
    scores_bound,
    scores_sigma,
    share_sd,
)
from collabcausal.messages import Message
from collabcausal.party.dp_effects import check_labels
from collabcausal.party.node import Party
from collabcausal.party.operations import operation
from collabcausal.party.vertical.evaluations import add_batch, begin, count_batch, evaluation
from collabcausal.party.vertical.exchange import (
    COLUMNS_PARAMETERS,
    CONTEXT_PARAMETERS,
    SEAL_KEYS,
    columns_reply,
    pinned_identity,
    receiver_keys,
    sealed_columns,
    sealed_reply,
    totals_reply,
    verified_columns,
    verified_context,
)
from collabcausal.party.vertical.opening import open_parameters, open_release
from collabcausal.party.vertical.request import (
    FURTHER,
    KEY_OWNER,
    LABEL_HOLDER,
    VERTICAL_PARAMETERS,
    VerticalRequest,
    charge,
    parse_vertical,
)
from collabcausal.party.vertical.rounds import KeyRound, check_new_round, next_batch, open_round
from collabcausal.vertical.dp_effects_rounds import check_score_headroom, encrypt_score_inputs, score_summands
from collabcausal.vertical.keys import KeyOwner
from collabcausal.vertical.parameters import CKKSParameters, preset
from collabcausal.vertical.relay import SEALED_FROM

COLUMNS = "vertical_scores_columns"
TOTALS = "vertical_scores_totals"
OPEN = "vertical_scores_open"
RELEASE = "scores"
DEPTH = 7
"""Multiplicative depth: ``ceil(log2 15) + 1`` for the weight polynomial, 2 for the scores and their square."""
PARTS = "vertical_scores_parts"
PARTS_RELEASE = "scores parts"
"""A further party's state between batches (the key owner's context, the batches encrypted so far)."""

PROGRAM_PARAMETERS = VERTICAL_PARAMETERS | {"program"}
"""The parameters every step of the scores round but the opening applies: the round's terms and its score program."""

__all__ = ["COLUMNS", "OPEN", "PARTS", "TOTALS"]


def _program(req: VerticalRequest, request: Message) -> ScoreProgram:
    return ScoreProgram.from_spec(request.params.get("program"), req.feature_map, req.groups)


def _terms(req: VerticalRequest, program: ScoreProgram) -> dict[str, Any]:
    return req.terms() | {"release": RELEASE, "program": program.to_spec()}


def _check_headroom(parameters: CKKSParameters, req: VerticalRequest, program: ScoreProgram, sigma: float) -> None:
    """The program's evaluation fits ``parameters``' headroom for any subjects, every party but the label holder's
    parts encrypted (before any party charges)."""
    check_score_headroom(parameters, _inputs(program), req.n_subjects, req.batch_rows, program.poly, program.parts,
                         program.unit, req.feature_map.outcome_width / 2.0, share_sd(sigma), req.groups.n_parties - 1)


def _inputs(program: ScoreProgram) -> int:
    """Encrypted inputs a party sends: its ``(x, m0, m1)`` of the model and of each replicate's change."""
    return 3 * (1 + len(program.changes))


@operation(COLUMNS, parameters=PROGRAM_PARAMETERS, differentially_private=True)
def vertical_scores_columns(party: Party, request: Message) -> Message:
    """P: encrypt its clipped parts of the request's batch for the scores round (module docstring); charged at
    batch 0, before it computes."""
    req = parse_vertical(party, request, KEY_OWNER)
    pinned_identity(party)
    program = _program(req, request)
    terms = _terms(req, program)
    if req.batch > 0:
        state = next_batch(party, req, RELEASE, terms)
    else:
        check_new_round(party, req.round_id)
        sigma = scores_sigma(program, req.rho)
        _check_headroom(preset(DEPTH), req, program, sigma)
        charge(party, request, req, sigma, RELEASE)
        n_sums = len(program.parts)
        state = KeyRound(RELEASE, KeyOwner(preset(DEPTH)), terms, (req.parties[LABEL_HOLDER],), sigma,
                         scores_bound(program), np.full(n_sums, SCORE_NOISE_PARTIES), (np.arange(n_sums),),
                         batches=req.batches)
        open_round(party, req.round_id, state)
    inputs = score_inputs(program, req.design(party, req.rows), KEY_OWNER, req.groups, req.feature_map)
    return columns_reply(party, request, req, state.owner, encrypt_score_inputs(state.owner, inputs), terms)


@operation(PARTS, parameters=PROGRAM_PARAMETERS | CONTEXT_PARAMETERS | {SEAL_KEYS}, differentially_private=True)
def vertical_scores_parts(party: Party, request: Message) -> Message:
    """A further party (three or more column groups): its clipped parts of the request's batch encrypted under P's
    public context and sealed to L (:mod:`~collabcausal.vertical.sealed`), so that neither the coordinator nor P, who
    holds the key, ever holds them; charged at batch 0, once P's context and L's round key verify."""
    req = parse_vertical(party, request, FURTHER)
    program = _program(req, request)
    terms = _terms(req, program)
    state = evaluation(party, req, PARTS_RELEASE, terms)
    context = verified_context(party, request, req, req.parties[KEY_OWNER], None if state is None else state.context)
    keys = receiver_keys(party, req, [LABEL_HOLDER], request.params.get(SEAL_KEYS))
    sigma = scores_sigma(program, req.rho)
    if state is None:
        _check_headroom(context.parameters, req, program, sigma)
        charge(party, request, req, sigma, RELEASE)
        state = begin(party, req, PARTS_RELEASE, terms, context)
    inputs = score_inputs(program, req.design(party, req.rows), req.me, req.groups, req.feature_map)
    columns = [column.to_bytes() for column in encrypt_score_inputs(context, inputs)]
    sealed = sealed_reply(party, req, terms, context, columns, keys)
    count_batch(party, req, state)
    return Message(request.operation, {"batch": req.batch, "sigma": sigma} | sealed[0], sealed[1])


@operation(TOTALS, parameters=PROGRAM_PARAMETERS | COLUMNS_PARAMETERS | {SEALED_FROM}, differentially_private=True)
def vertical_scores_totals(party: Party, request: Message) -> Message:
    """L: the released score sums under P's key, summed batch by batch, its noise share inside (module docstring);
    with three or more column groups the further parties' parts come sealed to L and are added under encryption.
    Charged at batch 0 once everything relayed verifies."""
    req = parse_vertical(party, request, LABEL_HOLDER, labels=False)
    program = _program(req, request)
    check_labels(party, request.operation, 1)  # the program parsed: the first read of a row
    terms = _terms(req, program)
    state = evaluation(party, req, RELEASE, terms)
    context, columns = verified_columns(party, request, req, terms, req.parties[KEY_OWNER],
                                        None if state is None else state.context)
    expected = _inputs(program)
    if len(columns) != expected:
        raise ProtocolError(f"{TOTALS}: {len(columns)} encrypted parts for {expected}", "relay P's reply unchanged")
    further = list(range(KEY_OWNER + 1, req.groups.n_parties))
    others = [] if not further else list(sealed_columns(party, request, req, terms, context, further,
                                                        dict.fromkeys(further, expected)).values())
    sigma = scores_sigma(program, req.rho)
    if state is None:
        _check_headroom(context.parameters, req, program, sigma)
        charge(party, request, req, sigma, RELEASE)
        state = begin(party, req, RELEASE, terms, context)
    fm, rows = req.feature_map, req.rows
    plain = score_inputs(program, req.design(party, rows), LABEL_HOLDER, req.groups, fm)
    summed = add_batch(party, req, state, score_summands(
        columns, plain, party.table.treatment[rows].astype(float), fm.centred_outcome(party.table.outcome[rows]),
        program.poly, program.parts, program.unit, others))
    if summed is None:
        return Message(request.operation, {"batch": req.batch, "sigma": sigma})
    shares = noise_share(np.full(len(program.parts), SCORE_NOISE_PARTIES), sigma)
    totals = summed.packed(context, shares, share_sd(sigma))
    return totals_reply(party, request, req, totals, terms, {"sigma": sigma})


@operation(OPEN, parameters=open_parameters(1), differentially_private=True)
def vertical_scores_open(party: Party, request: Message) -> Message:
    """P: the released (scaled) score sums (module docstring)."""
    return open_release(party, request, RELEASE)
