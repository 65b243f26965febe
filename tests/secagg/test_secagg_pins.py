"""pins.py: the roster rules any protocol applies to signed advertisements relayed by the coordinator."""

from __future__ import annotations

import pytest
from secagg_helpers import NAMES, STUDY

from collabcausal.errors import IdentityError, PolicyError
from collabcausal.secagg import PeerPolicy, Verifier, verified_peers
from collabcausal.secagg.crypto import generate_round_key, public_bytes
from collabcausal.secagg.identity import fingerprint
from collabcausal.secagg.pins import normal_fingerprint

A, B, C, D = NAMES


def _ads(signers, names, round_id="1"):
    return [signers[n].advertise(STUDY, round_id, public_bytes(generate_round_key())) for n in names]


def _peers(ads, verifier, min_parties=3):
    return verified_peers(ads, verifier, min_parties=min_parties, study=STUDY, round_id="1")


def test_a_pinned_roster_returns_every_partys_key(identities):
    signers, verifier = identities
    ads = _ads(signers, NAMES)
    assert _peers(ads, verifier) == {ad["party"]: bytes.fromhex(ad["public_key"]) for ad in ads}


def test_a_name_twice_one_key_under_two_names_and_too_few_parties_are_refused(identities):
    signers, verifier = identities
    ads = _ads(signers, [A, B, C])
    with pytest.raises(IdentityError, match=f"'{B}' is advertised twice"):
        _peers([*ads, ads[1]], verifier)
    same = signers[C].advertise(STUDY, "1", bytes.fromhex(ads[0]["public_key"]))
    with pytest.raises(IdentityError, match=f"'{C}' and '{A}' advertise one key"):
        _peers([ads[0], ads[1], same], verifier)
    with pytest.raises(PolicyError, match=r"2 verified parties .* fewer than min_parties = 3"):
        _peers(ads[:2], verifier)


def test_an_unpinned_party_is_refused_by_the_pins_and_accepted_by_the_ca_alone(identities):
    signers, verifier = identities
    pins = {n: verifier.pins[n] for n in (A, B, C)}
    ads = _ads(signers, NAMES)
    with pytest.raises(IdentityError, match=f"'{D}' is not a pinned peer of this party"):
        _peers(ads, Verifier(verifier.ca, pins))
    assert set(_peers(ads, Verifier(verifier.ca))) == set(NAMES)


def test_a_peer_policy_checks_its_pins_and_adds_the_partys_own_certificate(identities):
    signers, verifier = identities
    pins = {B: verifier.pins[B], C: verifier.pins[C]}
    policy = PeerPolicy(pins, 3)
    assert policy.verifier(verifier.ca, signers[A]).pins == pins | {A: fingerprint(signers[A].certificate)}
    assert "malicious coordinator" in policy.describe() and policy.pinned
    with pytest.raises(PolicyError, match=f"pins this party '{A}' to another certificate"):
        PeerPolicy(pins | {A: verifier.pins[D]}, 3).verifier(verifier.ca, signers[A])
    with pytest.raises(PolicyError, match="not a SHA-256 fingerprint"):
        PeerPolicy({B: "12ab"}, 3)
    with pytest.raises(PolicyError, match="share one certificate fingerprint"):
        PeerPolicy({B: pins[B], C: pins[B]}, 3)
    with pytest.raises(PolicyError, match="min_parties must be an integer >= 2"):
        PeerPolicy(pins, 1)
    assert "honest-but-curious" in PeerPolicy(None, 2).describe()
    assert normal_fingerprint("AB:CD ") == "abcd"
