"""A hostile coordinator against the six vertical operations, through Party.handle (issue red36b).

The coordinator chooses every params field and relays every ciphertext: it sends the two parties different
score programs or absurd ones, exhausts and mixes up rounds, reorders or truncates what it relays and
malforms every term. Each attack is refused in one line with nothing charged (or, where the charge came
first, without a second decryption), and each party computes its noise from the terms it checked, never from
a number it was told. Attacks already kept in test_vertical_attacks.py (forged columns, the coordinator's
key, other terms for one party, a fabricated total, an unpinned certificate, another round's totals) are
not repeated.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hostile_rounds import (
    GROUPS,
    NO_PROGRAM,
    feature_map,
    honest_program,
    opening,
    parties,
    relayed,
    request,
    small_world,
)
from unread_rows import refused_unread
from vertical_parties import STUDY, refused_uncharged, spent

from collabcausal.errors import IdentityError, InputError, PolicyError, ProtocolError
from collabcausal.estimators.dp.effects.scores import MAX_REPLICATES
from collabcausal.estimators.dp.effects.vertical_program import ScoreProgram, scores_sigma, statistics_sigma
from collabcausal.messages import Message
from collabcausal.party.policy import PartyPolicy
from collabcausal.party.request_limits import RequestLimits
from collabcausal.party.vertical.rounds import MAX_OPEN_ROUNDS
from collabcausal.vertical.transcript import blob_arrays, blobs


@pytest.fixture
def w(tmp_path):
    return small_world(tmp_path)


@pytest.fixture
def program_spec(w) -> dict:
    return honest_program(w).to_spec()


# --- 1. hostile score programs ------------------------------------------------------------------------------------

def _scaled(spec: dict, factor: float, changes: bool = True) -> dict:
    """Every coefficient and clip limit of the model (and of its replicates' changes) times ``factor``."""
    def scale(block: dict) -> dict:
        return {k: (np.asarray(v) * factor).tolist() for k, v in block.items()}
    moved = [{"model": scale(c["model"]), "limits": scale(c["limits"])} for c in spec["changes"]]
    return spec | {"model": scale(spec["model"]), "limits": scale(spec["limits"])} | (
        {"changes": moved} if changes else {})


def _hostile(spec: dict, kind: str) -> object:
    model, limits = spec["model"], spec["limits"]
    dim = len(model["propensity"])
    return {
        "too many replicates": spec | {"changes": spec["changes"] * (MAX_REPLICATES // 2 + 1)},
        "nan coefficient": spec | {"model": model | {"propensity": [math.nan, *model["propensity"][1:]]}},
        "inf coefficient": spec | {"model": model | {"outcome_0": [math.inf] * dim}},
        "short coefficients": spec | {"model": model | {"outcome_1": model["outcome_1"][:-1]}},
        "limits of three groups": spec | {"limits": {k: [[*row, 0.0] for row in v] for k, v in limits.items()}},
        "inverted limits": spec | {"limits": {"low": limits["high"], "high": limits["low"]}},
        "nan limit": spec | {"limits": limits | {"low": [[math.nan, 0.0], *limits["low"][1:]]}},
        "trim of one half": spec | {"trim": 0.5},
        "boolean trim": spec | {"trim": True},
        "no propensity": spec | {"model": model | {"propensity": [0.0] * dim},
                                 "limits": {k: [[0.0, 0.0], *v[1:]] for k, v in limits.items()},
                                 "changes": []},
        "replicate equal to the model": spec | {"changes": [{"model": {k: [0.0] * dim for k in model},
                                                             "limits": {k: [[0.0, 0.0]] * 3 for k in limits}}]},
        "beyond the CKKS headroom": _scaled(spec, 1e6, changes=False),
        "overflowing coefficients": _scaled(spec, 1e300),
        "not a program": "aipw",
        "no program": NO_PROGRAM,
    }[kind]


HOSTILE = ["too many replicates", "nan coefficient", "inf coefficient", "short coefficients", "limits of three groups",
           "inverted limits", "nan limit", "trim of one half", "boolean trim", "no propensity",
           "replicate equal to the model", "beyond the CKKS headroom", "overflowing coefficients", "not a program",
           "no program"]


@pytest.mark.parametrize("kind", HOSTILE)
def test_a_hostile_program_is_refused_by_the_key_owner_before_its_charge(w, program_spec, kind) -> None:
    """P (the scores' key owner) refuses each program in one line before it charges or makes a key. "beyond the
    CKKS headroom" (the honest model and limits times 1e6, the changes not) was charged by both parties and
    refused by L only once it evaluated (red36b: now refused first, by each party, from the program alone)."""
    refused_uncharged(w.other, request(w, "scores", program=_hostile(program_spec, kind)))
    assert not w.other.vertical_rounds


@pytest.mark.parametrize("kind", ["nan coefficient", "too many replicates", "beyond the CKKS headroom", "no program"])
def test_a_hostile_program_is_refused_by_the_evaluator_before_it_reads_the_columns(w, program_spec, kind) -> None:
    """L parses and checks the program before anything relayed (here: nothing at all) and before its charge."""
    sent = request(w, "scores", program=_hostile(program_spec, kind))
    refused_uncharged(w.label, Message("vertical_scores_totals", sent.params))


@pytest.fixture
def scores_columns(w):
    """P's signed scores columns for the honest program (P charged, L not)."""
    sent = request(w, "scores")
    return sent, w.other.handle(sent)


@pytest.mark.parametrize("change", ["trim", "replicate dropped", "coefficient", "limit"])
def test_a_program_other_than_the_key_owners_is_refused_by_the_evaluator(w, program_spec, scores_columns, change
                                                                         ) -> None:
    """The coordinator sends L another program than P encrypted for (another trim, one replicate fewer, one
    coefficient or clip limit moved by 1e-9): the program is in the signed terms, so L refuses before its charge."""
    sent, reply = scores_columns
    other = dict(program_spec)
    if change == "trim":
        other["trim"] = 0.11
    elif change == "replicate dropped":
        other["changes"] = other["changes"][:1]
    elif change == "coefficient":
        other["model"] = other["model"] | {"propensity": [other["model"]["propensity"][0] + 1e-9,
                                                          *other["model"]["propensity"][1:]]}
    else:
        other["limits"] = other["limits"] | {"high": [[other["limits"]["high"][0][0] + 1e-9,
                                                       other["limits"]["high"][0][1]], *other["limits"]["high"][1:]]}
    refused_uncharged(w.label, relayed("scores", sent, reply, program=other), IdentityError)


def test_each_party_refuses_a_stated_sigma_and_charges_the_sigma_it_recomputed_from_the_program(w, program_spec
                                                                                                  ) -> None:
    """The coordinator adds a tiny ``sigma`` (and forged ``unit``, ``parts``, ``poly``) to the program, or a ``sigma``
    to the params: each party refuses either uncharged, naming them (keys it does not apply; the program's were left
    aside before); with the honest program each party's charge records the sigma it derived from the model and
    limits, and the release's noise follows that sigma (its reply's ``sigma``)."""
    forged = program_spec | {"sigma": 1e-9, "unit": 1e9, "parts": [[0, 1e-9]], "poly": {"coefficients": [0.5]}}
    named = ("^vertical score program options 'parts', 'poly', 'sigma', 'unit' are not ones this party applies "
             r"\(changes, limits, model, trim\)")
    refused_uncharged(w.other, request(w, "scores", program=forged), InputError, named)
    refused_uncharged(w.label, Message("vertical_scores_totals", request(w, "scores", program=forged).params),
                      InputError, named)
    sent = request(w, "scores")
    stated = "does not apply: sigma;"
    refused_uncharged(w.other, request(w, "scores", sigma=1e-9), InputError, stated)
    refused_uncharged(w.label, Message("vertical_scores_totals", sent.params | {"sigma": 1e-9}), InputError, stated)
    reply = w.other.handle(sent)
    totals = w.label.handle(relayed("scores", sent, reply))
    expected = scores_sigma(honest_program(w), sent.params["rho"])
    for party in (w.other, w.label):
        assert party.ledger.history()[-1].details["sigma"] == pytest.approx(expected, rel=1e-12)
    assert totals.params["sigma"] == pytest.approx(expected, rel=1e-12)
    opened = w.other.handle(opening("scores", sent.params["round"], totals))
    assert opened.params["sigma"] == pytest.approx(expected, rel=1e-12)
    assert ScoreProgram.from_spec(program_spec, feature_map(w), GROUPS).to_spec() == program_spec


NESTED = {  # a key the party does not apply, in each nested specification of a scores program (and the design)
    "program": ("vertical score program", "noise_parties", lambda s: s),
    "replicate": ("vertical score program replicate", "weight", lambda s: s["changes"][0]),
    "limits": ("vertical score program clip limits", "margin", lambda s: s["limits"]),
    "replicate's limits": ("vertical score program clip limits", "margin", lambda s: s["changes"][-1]["limits"]),
    "model": ("dp_effects nuisance model", "ridge", lambda s: s["model"]),
    "replicate's model": ("dp_effects nuisance model", "sigma", lambda s: s["changes"][1]["model"]),
}


@pytest.mark.parametrize("case", sorted(NESTED))
def test_a_program_key_the_party_does_not_apply_is_refused_unread_and_uncharged_by_both(w, program_spec, case
                                                                                        ) -> None:
    """A misspelling, a claimed bound or a newer coordinator's option anywhere in the program: the key owner and the
    label holder each refuse it in one line naming it, before their charge and before any row is read (the label
    holder's arm counts included); the honest program is then encrypted for, charged once."""
    what, key, where = NESTED[case]
    hostile = json.loads(json.dumps(program_spec))
    where(hostile)[key] = 0.0
    sent = request(w, "scores", program=hostile)
    match = f"^{what} option '{key}' is not one this party applies"
    refused_unread(w.other, sent, match)
    refused_unread(w.label, Message("vertical_scores_totals", sent.params), match)
    assert spent(w.other) == spent(w.label) == 0.0
    w.other.handle(request(w, "scores", program=program_spec))
    assert spent(w.other) > 0.0 and len(w.other.ledger.history()) == 1


@pytest.mark.parametrize("release", ["statistics", "scores"])
def test_a_design_key_the_party_does_not_apply_is_refused_unread_and_uncharged(w, release) -> None:
    """The design of a vertical round carries a key the map does not apply: the round's key owner refuses it before
    its charge and before any row is read, and the honest design is then charged once."""
    owner = parties(w, release)[0]
    design = feature_map(w).to_spec()
    refused_unread(owner, request(w, release, design=design | {"clip_outcome": False}),
                   "^dp_effects design option 'clip_outcome' is not one this party applies")
    assert spent(owner) == 0.0
    owner.handle(request(w, release))
    assert len(owner.ledger.history()) == 1


def test_a_stated_sigma_does_not_reach_the_statistics_either(w) -> None:
    """The same for the statistics: a stated sigma is refused uncharged, and L's charge and P's carry the sigma of the
    design's sensitivity."""
    sent = request(w, "statistics")
    refused_uncharged(w.label, request(w, "statistics", sigma=1e-9), InputError, "does not apply: sigma;")
    reply = w.label.handle(sent)
    refused_uncharged(w.other, relayed("statistics", sent, reply, sigma=1e-9), InputError, "does not apply: sigma;")
    w.other.handle(relayed("statistics", sent, reply))
    expected = statistics_sigma(feature_map(w), sent.params["rho"], GROUPS)
    for party in (w.label, w.other):
        assert party.ledger.history()[-1].details["sigma"] == pytest.approx(expected, rel=1e-12)


# --- 3. rounds: exhaustion, replay, mix-ups -----------------------------------------------------------------------

@pytest.fixture
def statistics_columns(w):
    """L's signed statistics columns (L charged, P not)."""
    sent = request(w, "statistics")
    return sent, w.label.handle(sent)


@pytest.fixture
def statistics_round(w, statistics_columns):
    """L's statistics columns, P's honest totals (both charged once)."""
    sent, reply = statistics_columns
    return sent, reply, w.other.handle(relayed("statistics", sent, reply))


def test_more_rounds_than_max_open_rounds_close_the_oldest_which_then_never_opens(w) -> None:
    """The coordinator opens MAX_OPEN_ROUNDS + 1 statistics rounds at L (each charged once, as it encrypts): the
    oldest is closed, its honest totals are refused, and refused again; the newest opens once."""
    share = {k: request(w, "statistics").params[k] / (2 * (MAX_OPEN_ROUNDS + 1)) for k in ("rho", "delta")}
    sent = [request(w, "statistics", **share, round=f"{STUDY}/statistics/{k}") for k in range(MAX_OPEN_ROUNDS + 1)]
    replies = [w.label.handle(s) for s in sent]
    charged = spent(w.label)
    first = w.other.handle(relayed("statistics", sent[0], replies[0]))
    last = w.other.handle(relayed("statistics", sent[-1], replies[-1]))
    for _ in range(2):
        refused_uncharged(w.label, opening("statistics", sent[0].params["round"], first), PolicyError, "closed")
    assert np.isfinite(w.label.handle(opening("statistics", sent[-1].params["round"], last)).array("values")).all()
    refused_uncharged(w.label, opening("statistics", sent[-1].params["round"], last), PolicyError, "closed")
    assert spent(w.label) == charged
    refused_uncharged(w.label, request(w, "statistics", **share, round=sent[0].params["round"]), PolicyError,
                       "already encrypted")


def test_a_secagg_key_the_key_owner_does_not_apply_is_refused_before_the_round_closes(w, statistics_round) -> None:
    """The opening's ``secagg`` carries a key the party does not apply (a claimed ``n_honest``): refused in one line
    naming it, before the round is closed, so the honest opening still opens it, once."""
    sent, _reply, totals = statistics_round
    round_id = sent.params["round"]
    hostile = {"round": f"{round_id}/secagg", "advertisements": [], "n_honest": 9}
    refused_uncharged(w.label, opening("statistics", round_id, totals, secagg=hostile), InputError,
                      "^vertical_statistics_open secagg option 'n_honest' is not one this party applies "
                      r"\(advertisements, round\)")
    assert np.isfinite(w.label.handle(opening("statistics", round_id, totals)).array("values")).all()
    refused_uncharged(w.label, opening("statistics", round_id, totals), PolicyError, "closed")


def test_a_statistics_round_opened_as_scores_is_refused_and_stays_open(w, statistics_round) -> None:
    """The scores opening names L's open statistics round: refused (no open scores round by that id), and the
    round still opens once as what it is."""
    sent, _reply, totals = statistics_round
    round_id = sent.params["round"]
    refused_uncharged(w.label, opening("scores", round_id, totals), PolicyError, "no open scores round")
    assert w.label.handle(opening("statistics", round_id, totals)).array("values").size == 2 * 28 + 2 * 7


@pytest.mark.parametrize("change", [{"study": "another-study"}, {"norm_bounds": [4.0, 4.0]},
                                    {"column_groups": [["a1", "a0", "a2"], ["b0", "b1", "b2"]]},
                                    {"round": f"{STUDY}/scores/0"}])
def test_columns_replayed_under_other_terms_are_refused(w, statistics_columns, change) -> None:
    """L's signed columns relayed to P under another study, declared norm bounds, covariate order or round id:
    refused before P's (second) charge."""
    sent, reply = statistics_columns
    refused_uncharged(w.other, relayed("statistics", sent, reply, **change))


def test_the_same_columns_relayed_twice_are_evaluated_once(w, statistics_round) -> None:
    """The relay sends P the same signed columns again, same terms: P refuses the round id it already evaluated
    (it would be charged again for totals that L never opens), uncharged."""
    sent, reply, _totals = statistics_round
    refused_uncharged(w.other, relayed("statistics", sent, reply), PolicyError, "already")


def _reordered(reply: Message, order: list[int]) -> dict:
    flat = blobs(reply, "ckks_columns")
    return dict(reply.arrays) | blob_arrays("ckks_columns", [bytes(flat[i]) for i in order])


@pytest.mark.parametrize("how", ["swapped", "truncated", "duplicated"])
def test_reordered_truncated_or_duplicated_column_chunks_are_refused(w, statistics_columns, how) -> None:
    """The relay swaps two of L's ciphertexts, drops the last or repeats one (with chunk counts to match): refused
    before P charges (the signature covers the chunks in order, the counts cover the layout)."""
    sent, reply = statistics_columns
    k = len(reply.params["chunks"])
    order = {"swapped": [1, 0, *range(2, k)], "truncated": list(range(k - 1)), "duplicated": [0, *range(k)]}[how]
    counts = [1] * len(order)
    refused_uncharged(w.other, relayed("statistics", sent, reply, _reordered(reply, order), chunks=counts))


@pytest.mark.parametrize("chunks", [[], [1.0] * 6, [True] * 6, [0, 2, 1, 1, 1, 1], "6", [1] * 5, [1] * 7])
def test_malformed_chunk_counts_are_refused(w, statistics_columns, chunks) -> None:
    """Chunk counts that are not positive integers adding up to the relayed ciphertexts: refused, uncharged."""
    sent, reply = statistics_columns
    assert reply.params["chunks"] == [1] * 6  # six factors (site, three covariates, arm, outcome), one chunk each
    refused_uncharged(w.other, relayed("statistics", sent, reply, chunks=chunks))


@pytest.mark.parametrize("count", [0, 2])
def test_a_ciphertext_count_other_than_the_packed_layout_never_opens(w, statistics_round, count) -> None:
    """The packed layout is fixed by the public terms (70 values: one ciphertext at 4,096 slots). The relay sends
    none or the honest one twice: refused before any decryption, and the round is closed (never a second try)."""
    sent, _reply, totals = statistics_round
    honest = blobs(totals, "ckks_totals")
    assert len(honest) == 1
    arrays = blob_arrays("ckks_totals", [bytes(honest[0])] * count)
    refused_uncharged(w.label, opening("statistics", sent.params["round"], totals, arrays), ProtocolError,
                       "totals of 'registry' for a round of 1")
    refused_uncharged(w.label, opening("statistics", sent.params["round"], totals), PolicyError, "closed")


# --- 4. malformed terms -------------------------------------------------------------------------------------------

MALFORMED = [
    {"round": 5}, {"round": None}, {"site": 1}, {"site": -1}, {"site": True}, {"site": "0"}, {"site": 0.0},
    {"n_subjects": 299}, {"n_subjects": "300"}, {"n_subjects": True}, {"n_subjects": None},
    {"column_groups": "a0"}, {"column_groups": [["a0", "a1", "a2"], []]},
    {"column_groups": [["a0", "a1", "a2"], ["b0", "b1", "b2", "b2"]]},
    {"column_groups": [["a0", "a1", "a2", "b0"], ["b1", "b2"]]},
    {"column_groups": [["a0", "a1", "a2"], ["b0", "b1", 7]]},
    {"parties": ["hospital"]}, {"parties": ["hospital", "hospital"]}, {"parties": "hospital"},
    {"rho": -1.0}, {"rho": "0.01"}, {"rho": math.nan}, {"rho": math.inf}, {"rho": True}, {"rho": None},
    {"delta": 0.0}, {"delta": 0.5}, {"delta": "1e-9"}, {"delta": math.nan},
    {"design": "box"}, {"design": {"bounds": "x", "outcome_range": [0, 1], "n_sites": 1}},
    {"design": {"bounds": [[-3, 3]] * 6, "outcome_range": [0, 1], "n_sites": 0}},
    {"design": {"bounds": [[-3, 3]] * 5, "outcome_range": [0, 1], "n_sites": 1}},
    {"design": {"bounds": [[3, -3]] * 6, "outcome_range": [0, 1], "n_sites": 1}},
    {"design": {"bounds": [[-3, 3]] * 6, "outcome_range": [1, 1], "n_sites": 1}},
    {"design": {"bounds": [[-3, 3]] * 6, "outcome_range": [0, 1], "n_sites": 1.0}},
    {"norm_bounds": [1.0]}, {"norm_bounds": [-1.0, 2.0]}, {"norm_bounds": ["x", 1.0]},
    {"norm_bounds": [math.nan, 1.0]}, {"norm_bounds": [math.inf, 1.0]}, {"norm_bounds": 3.0},
]


@pytest.mark.parametrize("change", MALFORMED, ids=lambda c: repr(c)[:60])
def test_every_malformed_term_is_refused_in_one_line_uncharged(w, change) -> None:
    """Each params field of the label holder's first step, of the wrong type or out of range: a one-line
    InputError/PolicyError/ProtocolError naming it, before the charge (and no round is opened)."""
    refused_uncharged(w.label, request(w, "statistics", **change))
    assert not w.label.vertical_rounds


@pytest.mark.parametrize("missing", ["study", "round", "rho", "delta", "design", "site", "column_groups", "parties",
                                     "n_subjects"])
def test_a_missing_term_isrefused_uncharged(w, missing) -> None:
    sent = request(w, "statistics")
    params = {k: v for k, v in sent.params.items() if k != missing}
    refused_uncharged(w.label, Message(sent.operation, params), match=missing if missing != "study" else None)


def test_the_second_party_asked_to_act_as_label_holder_isrefused_uncharged(w) -> None:
    """P is sent the label holder's step, as named (not the label holder) or with the roles and columns swapped
    (it holds no T and Y); L is sent the scores' key owner step: refused, uncharged."""
    refused_uncharged(w.other, request(w, "statistics"), PolicyError, "not the label holder")
    swapped = {"parties": ["registry", "hospital"], "column_groups": [["b0", "b1", "b2"], ["a0", "a1", "a2"]]}
    refused_uncharged(w.other, request(w, "statistics", **swapped), InputError, "no treatment")
    refused_uncharged(w.label, request(w, "scores"), PolicyError, "not the second party")


def _policy(party, operations, **limits) -> PartyPolicy:
    return PartyPolicy(operations, party.table.covariate_names, limits=RequestLimits(**limits))


def test_ciphertexts_above_the_partys_cap_arerefused_uncharged(w, statistics_columns) -> None:
    """P caps relayed ciphertexts at 100 kB (max_ciphertext_bytes): L's context and columns (more bytes) are
    refused before P's charge, naming the key; at a cap of exactly their size they pass that check."""
    sent, reply = statistics_columns
    size = sum(int(a.nbytes) for k, a in reply.arrays.items() if k.startswith("ckks_"))
    assert size > 100_000
    w.other.policy = _policy(w.other, ["vertical_statistics_totals"], max_ciphertext_bytes=100_000)
    refused_uncharged(w.other, relayed("statistics", sent, reply), PolicyError, "max_ciphertext_bytes")
    w.other.policy = _policy(w.other, ["vertical_statistics_totals"], max_ciphertext_bytes=size)
    refused_uncharged(w.other, relayed("statistics", sent, reply, round="another"), IdentityError)


def test_a_policy_without_the_ciphertext_operations_refuses_them_uncharged(w) -> None:
    """A party whose policy does not list the vertical operations refuses each of them first."""
    for party, release in ((w.label, "statistics"), (w.other, "scores")):
        party.policy = _policy(party, ["describe"])
        refused_uncharged(party, request(w, release), PolicyError, "does not allow the operation")
    w.other.policy = _policy(w.other, ["vertical_scores_columns"])
    refused_uncharged(w.other, Message("vertical_statistics_totals", request(w, "statistics").params), PolicyError,
                       "vertical_statistics_totals")


@pytest.mark.parametrize("dtype", [np.float64, np.int8])
def test_ciphertext_arrays_of_another_type_arerefused_uncharged(w, statistics_columns, dtype) -> None:
    """The relay sends the ciphertext bytes as another array type: refused before P's charge."""
    sent, reply = statistics_columns
    arrays = dict(reply.arrays) | {"ckks_columns": reply.arrays["ckks_columns"].astype(dtype)}
    refused_uncharged(w.other, relayed("statistics", sent, reply, arrays), ProtocolError, "uint8")
