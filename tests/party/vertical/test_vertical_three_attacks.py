"""A malicious coordinator (it holds the study CA and relays every message) against the vertical rounds of three
column groups, through Party.handle (red3): every attack is refused in one line before the refusing party charges.

``hospital`` is the label holder L (the statistics key), ``registry`` P1 (the scores key), ``insurer`` P2. What the
three-party rounds add to the two-party ones: P1's products of L's encrypted arm, sealed to P2 (statistics), and
P2's score parts under P1's key, sealed to L (scores) (:mod:`collabcausal.vertical.sealed`). Relayed to the key's
owner unsealed, either would be per-subject values in the clear. The coordinator hands them to the key owner,
substitutes the receivers' seal keys, replays, truncates, reorders or drops them, and confuses the roster.
"""

from __future__ import annotations

import numpy as np
import pytest
import tenseal as ts
from three_rounds import (
    COLUMN_GROUPS,
    GROUPS,
    NAMES,
    PARTS,
    STEPS,
    Three,
    opening,
    relayed,
    scores_label,
    scores_round,
    statistics_insurer,
    statistics_round,
)
from vertical_parties import STUDY, refused_uncharged, spent

from collabcausal.errors import IdentityError, InputError, PolicyError, ProtocolError
from collabcausal.estimators.dp.effects.vertical import group_design
from collabcausal.estimators.dp.effects.vertical_program import score_inputs
from collabcausal.messages import Message
from collabcausal.secagg import simulation_identities
from collabcausal.vertical import KeyOwner, preset
from collabcausal.vertical.relay import SEALED_FOR, SEALED_FROM
from collabcausal.vertical.seal_io import untag
from collabcausal.vertical.sealed import Envelope, seal_round, unseal
from collabcausal.vertical.transcript import blob_arrays, blobs


def first_fast(*cases):
    """``cases`` with every one but the first marked slow: each kind of attack runs in ``make test``, its variants in
    ``make test-slow`` (every case builds three parties' rounds: seconds each)."""
    return [cases[0], *(pytest.param(*(c if isinstance(c, tuple) else (c,)), marks=pytest.mark.slow)
                        for c in cases[1:])]


@pytest.fixture
def w(tmp_path) -> Three:
    return Three(tmp_path)


@pytest.fixture
def stats(w):
    """An honest statistics round up to the insurer's request (L and the registry charged, the insurer not)."""
    r = statistics_round(w)
    assert spent(w.insurer) == 0.0
    return r


def _sealed(reply: Message, receiver: int) -> list[bytes]:
    return [bytes(b) for b in blobs(reply, f"{SEALED_FOR}_{receiver}")]


# 1. Sealed ciphertexts handed to the key's owner -------------------------------------------------------------------


def test_the_registrys_sealed_products_never_open_for_the_statistics_key_owner(w, stats) -> None:
    """Unsealed, the registry's products are CKKS ciphertexts under L's key that L would decrypt to the registry's
    per-subject values (arm times a2, b0). Sealed to the insurer, L's key does not read them: as ciphertexts they are
    refused, handed to L as the insurer's totals they are refused, and as a further party's sealed score parts too."""
    terms, reply = stats["terms"], stats["registry"]
    owner = w.label.vertical_rounds[terms["round"]].owner
    entry = reply.params[SEALED_FOR]["2"]
    insurer_key = w.insurer.secagg_rounds[seal_round(terms["round"])].private_key
    plain = [bytes(b) for b in unseal(insurer_key, bytes.fromhex(entry["ephemeral"]), _sealed(reply, 2),
                                      Envelope(STUDY, terms["round"], 0, "registry", "insurer"))]
    # what the seal protects: L's key would open the bare products to the registry's a2 of each treated subject
    grid = owner.parameters.error_bound
    bare = ts.ckks_vector_from(owner._context, untag(plain[0], owner.public.fingerprint, "a product"))
    a2 = np.real(np.asarray(bare.decrypt()))[:w.T.size]
    design = w.feature_map().design(w.X, 0)
    treated = w.T.astype(bool)
    expected = np.where(treated, design[:, 1 + 2], 0.0)  # the site one-hot first, then a0, a1, a2
    assert np.abs(a2 - expected).max() < 1e-3
    for blob in _sealed(reply, 2):  # sealed: not a ciphertext under L's key at all
        with pytest.raises(ProtocolError):
            owner.open(blob, noise=np.full(2, 1e-12), grid=grid)
    assert all(p not in s for p, s in zip(plain, _sealed(reply, 2), strict=True))
    # as the insurer's totals (L closes the round before it opens, so it never opens another set either)
    handed = Message(STEPS["statistics"][2], {"study": STUDY, "round": terms["round"],
                                              "totals_advertisement": reply.params["totals_advertisement"],
                                              "totals_advertisement_1": entry["advertisement"]},
                     {k.replace(f"{SEALED_FOR}_2", "ckks_totals_1"): v for k, v in reply.arrays.items()
                      if k.startswith(f"{SEALED_FOR}_2")} | {k: v for k, v in reply.arrays.items()
                                                             if k.startswith("ckks_totals")})
    refused_uncharged(w.label, handed, (IdentityError, ProtocolError))


@pytest.mark.slow  # a variant of the kinds of attack above (make test-slow)
def test_the_registrys_sealed_products_handed_to_the_label_holder_as_score_parts_are_refused(w, stats) -> None:
    """The only operation where L takes sealed ciphertexts is the scores totals: the registry's products relayed as
    the insurer's sealed parts carry the registry's signature, not the insurer's, and do not open with L's key."""
    s = scores_round(w)
    forged = relayed(STEPS["scores"][1], s["terms"], s["columns"], sealed={2: s["parts"]}, receiver=0)
    moved = {f"{SEALED_FROM}_2" + k[len(f"{SEALED_FOR}_2"):]: v for k, v in stats["registry"].arrays.items()
             if k.startswith(f"{SEALED_FOR}_2")}
    params = forged.params | {SEALED_FROM: {"2": stats["registry"].params[SEALED_FOR]["2"]}}
    refused_uncharged(w.label, Message(forged.operation, params, dict(forged.arrays) | moved),
                       (IdentityError, ProtocolError))


@pytest.fixture
def scores(w):
    """An honest scores round up to L's request (the registry and the insurer charged, L not)."""
    r = scores_round(w)
    assert spent(w.label) == 0.0
    return r


def _insurer_parts(w: Three, s: dict) -> list[bytes]:
    """The insurer's score parts as L unseals them: ciphertexts under the registry's scores key."""
    entry = s["parts"].params[SEALED_FOR]["0"]
    key = w.label.secagg_rounds[seal_round(s["terms"]["round"])].private_key
    return [bytes(b) for b in unseal(key, bytes.fromhex(entry["ephemeral"]), _sealed(s["parts"], 0),
                                     Envelope(STUDY, s["terms"]["round"], 0, "insurer", "hospital"))]


def test_the_insurers_sealed_parts_never_open_for_the_scores_key_owner(w, scores) -> None:
    """Unsealed, the insurer's parts are under the registry's key, which would decrypt them to the insurer's
    per-subject parts. Sealed to L, the registry cannot open them: not with a seal key the coordinator asks it for,
    not as ciphertexts under its key, and handed to it as L's totals they are refused."""
    terms, parts = scores["terms"], scores["parts"]
    owner = w.registry.vertical_rounds[terms["round"]].owner
    bare = ts.ckks_vector_from(owner._context, untag(_insurer_parts(w, scores)[0], owner.public.fingerprint, "a part"))
    assert np.asarray(bare.decrypt()).shape[0] >= w.T.size  # what the seal keeps from the registry
    entry = parts.params[SEALED_FOR]["0"]
    w.seal_key(w.registry, terms["round"])  # the coordinator asks the key owner for a seal key of the round
    registry_key = w.registry.secagg_rounds[seal_round(terms["round"])].private_key
    for receiver in ("hospital", "registry"):
        with pytest.raises(ProtocolError, match="do not open with this party's round key"):
            unseal(registry_key, bytes.fromhex(entry["ephemeral"]), _sealed(parts, 0),
                   Envelope(STUDY, terms["round"], 0, "insurer", receiver))
    for blob in _sealed(parts, 0):
        with pytest.raises(ProtocolError):
            owner.open(blob, noise=np.full(2, 1e-12), grid=owner.parameters.error_bound)
    handed = Message(STEPS["scores"][2], {"study": STUDY, "round": terms["round"],
                                          "totals_advertisement": entry["advertisement"]},
                     {k.replace(f"{SEALED_FOR}_0", "ckks_totals"): v for k, v in parts.arrays.items()})
    refused_uncharged(w.registry, handed, (IdentityError, ProtocolError))


def test_the_coordinator_with_the_label_holder_gets_the_insurers_parts_only_under_the_registrys_key(w, scores) -> None:
    """Collusion coordinator + L: L unseals the insurer's parts, but they are under the registry's key: refused as
    ciphertexts of L's own statistics key, and a key of the same parameters (L's own, relabelled) decrypts them to
    numbers unrelated to the parts (above 1e90 here)."""
    plain = _insurer_parts(w, scores)
    fm = w.feature_map()
    truth = score_inputs(w.program(), group_design(fm, w.X[:, 4:], 0, GROUPS, 2), 2, GROUPS, fm)[0]
    mine = KeyOwner(preset(7))
    registry = w.registry.vertical_rounds[scores["terms"]["round"]].owner
    payload = untag(plain[0], registry.public.fingerprint, "a part")
    with pytest.raises(ProtocolError):
        mine.open(plain[0], noise=np.full(2, 1e-12), grid=mine.parameters.error_bound)
    garbage = np.real(np.asarray(ts.ckks_vector_from(mine._context, payload).decrypt()))[:w.T.size]
    assert np.abs(truth).max() <= 1.0 and np.abs(garbage - truth).min() > 1e3  # nothing of the parts survives


# 2. The coordinator's own seal key for a receiver --------------------------------------------------------------------


def _rogue_key(name: str, round_id: str) -> dict:
    """A round key the coordinator made, advertised under a certificate its own CA minted for ``name``."""
    rogue = simulation_identities(STUDY, [name])[0][name]
    return rogue.advertise(STUDY, seal_round(round_id), bytes(32 * [9]))


@pytest.mark.parametrize("how", first_fast("minted for the insurer", "minted for a party nobody pinned",
                                           "the label holder's", "the registry's own", "the insurer's of another round",
                                           "the insurer's secagg key"))
def test_a_seal_key_not_the_insurers_for_this_round_is_refused_by_the_registry_before_its_charge(w, how) -> None:
    """The registry seals its products only to the insurer's own round key for this round's sealed ciphertexts."""
    terms = w.terms("statistics")
    columns = w.label.handle(Message(STEPS["statistics"][0], terms))
    key = {"minted for the insurer": lambda: _rogue_key("insurer", terms["round"]),
           "minted for a party nobody pinned": lambda: _rogue_key("mallory", terms["round"]),
           "the label holder's": lambda: w.seal_key(w.label, terms["round"]),
           "the registry's own": lambda: w.seal_key(w.registry, terms["round"]),
           "the insurer's of another round": lambda: w.seal_key(w.insurer, f"{STUDY}/statistics/1"),
           "the insurer's secagg key": lambda: w.insurer.handle(Message(
               "secagg_keys", {"study": STUDY, "round": terms["round"]})).params["advertisement"]}[how]()
    refused_uncharged(w.registry, relayed(STEPS["statistics"][1], terms, columns, seal_keys={"2": key}))


@pytest.mark.parametrize("how", first_fast("minted for the label holder", "the registry's", "the insurer's own"))
def test_a_seal_key_not_the_label_holders_is_refused_by_a_further_party_before_its_charge(w, how) -> None:
    """The insurer seals its score parts only to L's own round key (never to the registry, who holds the key)."""
    terms = w.terms("scores")
    columns = w.registry.handle(Message(STEPS["scores"][0], terms))
    key = {"minted for the label holder": lambda: _rogue_key("hospital", terms["round"]),
           "the registry's": lambda: w.seal_key(w.registry, terms["round"]),
           "the insurer's own": lambda: w.seal_key(w.insurer, terms["round"])}[how]()
    refused_uncharged(w.insurer, relayed(PARTS, terms, columns, seal_keys={"0": key},
                                          keys=("context_advertisement",)))


def test_the_insurers_seal_key_under_another_index_or_none_is_refused(w) -> None:
    """Role index confusion: the insurer's key under the registry's or L's index, no key, a null one, a list, or
    no seal_keys at all: the registry refuses each before its charge."""
    terms = w.terms("statistics")
    columns = w.label.handle(Message(STEPS["statistics"][0], terms))
    key = w.seal_key(w.insurer, terms["round"])
    for keys in ({"1": key}, {"0": key}, {}, {"2": None}, []):
        refused_uncharged(w.registry, relayed(STEPS["statistics"][1], terms, columns, seal_keys=keys))
    refused_uncharged(w.registry, relayed(STEPS["statistics"][1], terms, columns))


# 3. Replayed, truncated or reordered sealed ciphertexts --------------------------------------------------------------


def _with_sealed(request: Message, sealed: list[bytes] | None = None, **entry) -> Message:
    """``request`` with the registry's sealed products replaced by ``sealed`` and its entry's fields by ``entry``."""
    params = dict(request.params)
    params[SEALED_FROM] = {"1": dict(params[SEALED_FROM]["1"]) | entry}
    arrays = dict(request.arrays)
    if sealed is not None:
        arrays |= blob_arrays(f"{SEALED_FROM}_1", sealed)
    return Message(request.operation, params, arrays)


@pytest.mark.parametrize("how", first_fast("truncated", "reordered", "one dropped", "one duplicated", "a byte flipped",
                                           "another ephemeral key"))
def test_altered_sealed_products_are_refused_by_the_insurer_before_its_charge(w, stats, how) -> None:
    honest = statistics_insurer(w, stats)
    sealed = [bytes(b) for b in blobs(honest, f"{SEALED_FROM}_1")]
    assert len(sealed) >= 2
    if how == "another ephemeral key":
        forged = _with_sealed(honest, ephemeral=bytes(32 * [7]).hex())
    else:
        changed = {"truncated": lambda: [sealed[0][:-16], *sealed[1:]], "reordered": lambda: sealed[::-1],
                   "one dropped": lambda: sealed[:-1], "one duplicated": lambda: [sealed[0], *sealed],
                   "a byte flipped": lambda: [bytes([sealed[0][0] ^ 1]) + sealed[0][1:], *sealed[1:]]}[how]()
        forged = _with_sealed(honest, changed)
    refused_uncharged(w.insurer, forged, (IdentityError, ProtocolError))
    w.insurer.handle(honest)  # the honest request still goes through, charged once
    assert spent(w.insurer) > 0.0


@pytest.mark.slow  # a variant of the kinds of attack above (make test-slow)
def test_sealed_products_of_another_round_are_refused(w) -> None:
    """Two statistics rounds (a quarter of the budget each): the registry's sealed products of the second round
    relayed to the insurer in the first."""
    rho = w.terms("statistics")["rho"] / 4
    first = statistics_round(w, rho=rho)
    second = statistics_round(w, rho=rho, round=f"{STUDY}/statistics/again")
    refused_uncharged(w.insurer, relayed(STEPS["statistics"][1], first["terms"], first["columns"],
                                          sealed={1: second["registry"]}, receiver=2), IdentityError)


@pytest.mark.slow  # a variant of the kinds of attack above (make test-slow)
def test_sealed_products_of_another_batch_are_refused_at_batch_zero(w) -> None:
    """Two batches of 150 subjects: the registry's sealed products of batch 1 relayed with L's columns of batch 0."""
    r = statistics_round(w, batch_rows=150)
    later = r["terms"] | {"batch": 1}
    columns_1 = w.label.handle(Message(STEPS["statistics"][0], later))
    registry_1 = w.registry.handle(relayed(STEPS["statistics"][1], later, columns_1, seal_keys={"2": r["key"]}))
    refused_uncharged(w.insurer, relayed(STEPS["statistics"][1], r["terms"], r["columns"], sealed={1: registry_1},
                                          receiver=2), IdentityError)


@pytest.mark.slow  # a variant of the kinds of attack above (make test-slow)
def test_the_insurers_sealed_parts_relayed_from_another_sender_index_are_refused(w, scores) -> None:
    """The insurer's sealed parts relayed as sealed by the registry (index 1) or as for the registry (index 1)."""
    honest = scores_label(w, scores)
    entry = honest.params[SEALED_FROM]["2"]
    moved = {k.replace(f"{SEALED_FROM}_2", f"{SEALED_FROM}_1"): v for k, v in honest.arrays.items()
             if k.startswith(f"{SEALED_FROM}_2")}
    others = {k: v for k, v in honest.arrays.items() if not k.startswith(SEALED_FROM)}
    refused_uncharged(w.label, Message(honest.operation, honest.params | {SEALED_FROM: {"1": entry}},
                                        others | moved), ProtocolError)


# 4. Sealed ciphertexts dropped ----------------------------------------------------------------------------------------


def test_missing_sealed_products_are_refused_by_the_insurer_before_its_charge(w, stats) -> None:
    honest = statistics_insurer(w, stats)
    bare = {k: v for k, v in honest.arrays.items() if not k.startswith(SEALED_FROM)}
    params = {k: v for k, v in honest.params.items() if k != SEALED_FROM}
    refused_uncharged(w.insurer, Message(honest.operation, params, bare), ProtocolError)
    refused_uncharged(w.insurer, Message(honest.operation, honest.params, bare), ProtocolError)
    refused_uncharged(w.insurer, Message(honest.operation, params | {SEALED_FROM: {"1": None}}, honest.arrays),
                       ProtocolError)


def test_missing_sealed_parts_are_refused_by_the_label_holder_before_its_charge(w, scores) -> None:
    honest = scores_label(w, scores)
    bare = {k: v for k, v in honest.arrays.items() if not k.startswith(SEALED_FROM)}
    params = {k: v for k, v in honest.params.items() if k != SEALED_FROM}
    refused_uncharged(w.label, Message(honest.operation, params, bare), ProtocolError)
    refused_uncharged(w.label, Message(honest.operation, honest.params, bare), ProtocolError)


def test_a_receiver_without_its_seal_key_refuses_before_its_charge(w) -> None:
    """The coordinator never asked the insurer for a seal key, relaying another's: the registry refuses to seal to
    it, and the insurer, holding no key for the round, refuses sealed products."""
    terms = w.terms("statistics")
    columns = w.label.handle(Message(STEPS["statistics"][0], terms))
    refused_uncharged(w.registry, relayed(STEPS["statistics"][1], terms, columns,
                                           seal_keys={"2": _rogue_key("insurer", terms["round"])}), IdentityError)
    bare = relayed(STEPS["statistics"][1], terms, columns)
    refused_uncharged(w.insurer, Message(bare.operation, bare.params | {SEALED_FROM: {"1": {}}}, bare.arrays),
                       PolicyError, match="holds no round key")


# 6. The roster ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("who", "operation"), first_fast(
    ("insurer", STEPS["scores"][0]), ("registry", PARTS), ("hospital", PARTS), ("hospital", STEPS["statistics"][1]),
    ("insurer", STEPS["statistics"][0]), ("insurer", STEPS["scores"][1])))
def test_a_party_sent_another_roles_operation_refuses_it_uncharged(w, who, operation) -> None:
    release = "scores" if "scores" in operation else "statistics"
    refused_uncharged(w.by_name[who], Message(operation, w.terms(release)), PolicyError, match="is not")


@pytest.mark.parametrize("parties", first_fast(["hospital", "registry", "registry"], ["hospital", "insurer", "insurer"],
                                                ["hospital", "hospital", "insurer"]))
def test_a_roster_naming_a_party_twice_isrefused_uncharged(w, parties) -> None:
    for party in w.parties:
        for release in ("statistics", "scores"):
            for operation in (*STEPS[release][:2], PARTS):
                refused_uncharged(party, Message(operation, w.terms(release, parties=parties)), InputError,
                                   match="twice")


def test_evaluators_told_another_order_than_the_label_holder_signed_are_refused(w, stats) -> None:
    """The insurer told it is the second party and the registry the third (their column groups swapped to match):
    L signed the other order, so each refuses before its charge."""
    swapped = {"parties": [NAMES[0], NAMES[2], NAMES[1]],
               "column_groups": [COLUMN_GROUPS[0], COLUMN_GROUPS[2], COLUMN_GROUPS[1]]}
    terms = stats["terms"] | swapped
    refused_uncharged(w.insurer, relayed(STEPS["statistics"][1], terms, stats["columns"],
                                          seal_keys={"2": w.seal_key(w.registry, terms["round"])}), IdentityError)
    honest = statistics_insurer(w, stats)
    refused_uncharged(w.insurer, Message(honest.operation, honest.params | swapped, honest.arrays), IdentityError)


def test_evaluators_totals_swapped_in_the_opening_are_refused_and_never_opened(w, stats) -> None:
    """L opens the registry's totals as its first evaluator's and the insurer's as its second: swapped, the
    signatures do not match the evaluators L's terms name; the round is closed, so nothing under its key opens."""
    insurer = w.insurer.handle(statistics_insurer(w, stats))
    before = spent(w.label)
    with pytest.raises((IdentityError, ProtocolError)):
        w.label.handle(opening("statistics", stats["terms"], [insurer, stats["registry"]]))
    with pytest.raises(PolicyError, match="closed"):
        w.label.handle(opening("statistics", stats["terms"], [stats["registry"], insurer]))
    assert spent(w.label) == before


@pytest.mark.slow  # a variant of the kinds of attack above (make test-slow)
def test_a_further_partys_batch_relayed_twice_is_sealed_once_and_charged_once(w, scores) -> None:
    """The coordinator asks the insurer for the same batch of score parts again (a second sealing of the same
    subjects, to another key it might then substitute): refused, uncharged."""
    again = relayed(PARTS, scores["terms"], scores["columns"], seal_keys={"0": scores["key"]},
                    keys=("context_advertisement",))
    refused_uncharged(w.insurer, again)
