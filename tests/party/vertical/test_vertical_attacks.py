"""A hostile coordinator against the vertical rounds, through Party.handle: every attack is refused before the
receiving party charges or decrypts anything.

The coordinator relays every ciphertext and holds the key owner's public context and columns. It tries to
substitute the key owner's columns (values of its choosing, under the key owner's own key), its own key, other
terms for one party, a "total" computed from the key owner's own columns, a total of another round, a certificate
the parties never pinned, and a second open. The two attacks the low-level rounds cannot stop
(tests/vertical/test_vertical_dp_effects_rounds_attacks.py, which shows they succeed without signatures) are
the first and the fourth here.
"""

from __future__ import annotations

import numpy as np
import pytest
from test_vertical_operations import _columns_request
from vertical_parties import STUDY, spent, world

from collabcausal.errors import IdentityError, PolicyError
from collabcausal.messages import Message
from collabcausal.secagg import simulation_identities
from collabcausal.vertical import EncryptedColumn, KeyOwner, load_public_context, preset
from collabcausal.vertical.advertisement import advertise_context
from collabcausal.vertical.column import encrypt_column
from collabcausal.vertical.packing import packed_count
from collabcausal.vertical.transcript import COLUMNS_KIND, TOTALS_KIND, blob_arrays, blobs, sign_transcript

RELAY = ("chunks", "context_advertisement", "columns_advertisement")


@pytest.fixture
def round_(tmp_path):
    """A world, L's statistics columns request and L's signed reply (L charged, P not)."""
    w = world(tmp_path)
    request = _columns_request(w)
    return w, request, w.label.handle(request)


def _totals_request(request: Message, reply: Message, arrays=None, **params) -> Message:
    relayed = dict(request.params) | {k: reply.params[k] for k in RELAY} | params
    return Message("vertical_statistics_totals", relayed, dict(reply.arrays) if arrays is None else arrays)


def _forged_columns(reply: Message, n: int) -> list[bytes]:
    """Under L's own public key: subject 7's indicator times 1 in every column (values in [-1, 1], as a
    coordinator that wants one subject's products would send)."""
    context = load_public_context(bytes(blobs(reply, "ckks_context")[0]))
    target = np.zeros(n)
    target[7] = 1.0
    counts = reply.params["chunks"]
    return [c for _ in counts for c in encrypt_column(context, target).to_bytes()]


def test_columns_the_coordinator_encrypted_under_the_key_owners_key_are_refused(round_) -> None:
    """The relay swaps L's columns for its own encryptions under L's public key: P refuses before its charge."""
    w, request, reply = round_
    forged = blob_arrays("ckks_columns", _forged_columns(reply, w.other.table.n_subjects))
    arrays = dict(reply.arrays) | forged
    with pytest.raises(IdentityError, match="not what it signed"):
        w.other.handle(_totals_request(request, reply, arrays))
    assert spent(w.other) == 0.0


def test_the_coordinators_own_key_is_refused(round_) -> None:
    """The relay swaps L's context for one whose secret key it holds, advertised under a certificate of its own
    CA: P's pins refuse it before the charge."""
    w, request, reply = round_
    owner = KeyOwner(preset(1))
    rogue = simulation_identities(STUDY, ["hospital"])[0]["hospital"]
    context = owner.public_context()
    columns = _forged_columns(reply, w.other.table.n_subjects)
    terms = {k: v for k, v in request.params.items()}
    arrays = blob_arrays("ckks_context", [context]) | blob_arrays("ckks_columns", list(columns))
    forged = {"context_advertisement": advertise_context(rogue, STUDY, request.params["round"], context),
              "columns_advertisement": sign_transcript(rogue, STUDY, request.params["round"], COLUMNS_KIND, terms,
                                                       [context, *columns])}
    with pytest.raises(IdentityError):
        w.other.handle(_totals_request(request, reply, arrays, **forged))
    assert spent(w.other) == 0.0


@pytest.mark.parametrize("change", [{"rho": 1.0}, {"site": 0, "design": None}, {"round": "another"}])
def test_other_terms_for_the_evaluator_are_refused(round_, change) -> None:
    """The relay asks P to compute under other terms than L signed (more budget, another design, another round):
    refused before the charge."""
    w, request, reply = round_
    if change.get("design", 0) is None:
        design = dict(request.params["design"])
        design["outcome_range"] = [0.0, 2.0]
        change = {"design": design}
    with pytest.raises(IdentityError):
        w.other.handle(_totals_request(request, reply, **change))
    assert spent(w.other) == 0.0


def test_a_total_the_coordinator_computed_from_the_key_owners_columns_is_never_opened(round_) -> None:
    """The relay isolates subject 7's outcome in L's own encrypted "u" column, scales it by 250 and asks L to open it
    as a cross entry: L refuses (the total carries no signature of P for this round), and the round is closed."""
    w, request, reply = round_
    context = load_public_context(bytes(blobs(reply, "ckks_context")[0]))
    flat, counts = blobs(reply, "ckks_columns"), reply.params["chunks"]
    u = EncryptedColumn.from_bytes(context, flat[-counts[-1]:], w.label.table.n_subjects)  # T u + i (1 - T) u
    pick = np.zeros(w.label.table.n_subjects)
    pick[7] = 250.0
    fabricated = (u * pick).total(noise=1e-9, flood_sd=1e-9)
    n_values = w.label.vertical_rounds[request.params["round"]].totals[0].size
    opening = {"study": STUDY, "round": request.params["round"], "totals_advertisement": {}}
    with pytest.raises(IdentityError):
        w.label.handle(Message("vertical_statistics_open", opening, blob_arrays(
            "ckks_totals", [fabricated] * packed_count(int(n_values), context.parameters.slot_count))))
    with pytest.raises(PolicyError, match="closed"):
        w.label.handle(Message("vertical_statistics_open", opening, blob_arrays("ckks_totals", [])))


def test_totals_signed_by_a_certificate_nobody_pinned_are_refused(round_) -> None:
    """A certificate the coordinator minted in the evaluator's name signs fabricated totals: L's pins refuse it."""
    w, request, reply = round_
    honest = w.other.handle(_totals_request(request, reply))
    totals = blobs(honest, "ckks_totals")
    rogue = simulation_identities(STUDY, ["registry"])[0]["registry"]
    terms = w.label.vertical_rounds[request.params["round"]].terms
    signature = sign_transcript(rogue, STUDY, request.params["round"], TOTALS_KIND, terms, totals)
    opening = {"study": STUDY, "round": request.params["round"], "totals_advertisement": signature}
    with pytest.raises(IdentityError):
        w.label.handle(Message("vertical_statistics_open", opening, dict(honest.arrays)))


def test_totals_of_another_round_are_refused(tmp_path) -> None:
    """P's honest, signed totals of one round are replayed into another round of L: refused."""
    w = world(tmp_path)
    rho = _columns_request(w).params["rho"] / 4  # two rounds within the budget
    first, second = _columns_request(w, rho=rho), _columns_request(w, rho=rho, round=f"{STUDY}/statistics/again")
    reply_1, _ = w.label.handle(first), w.label.handle(second)
    honest = w.other.handle(_totals_request(first, reply_1))
    opening = {"study": STUDY, "round": second.params["round"],
               "totals_advertisement": honest.params["totals_advertisement"]}
    with pytest.raises(IdentityError):
        w.label.handle(Message("vertical_statistics_open", opening, dict(honest.arrays)))
