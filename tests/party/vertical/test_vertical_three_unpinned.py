"""Parties that trust the coordinator's roster (``peers = "any"``) in a row group of three column groups (red3).

The coordinator holds the study CA, so for such a party it can mint a certificate in any name. Before this test
the registry accepted a round key the coordinator minted as the insurer's, was charged and sealed its products of
L's arm to the coordinator; minting L's too (its own CKKS context, the arm a column of ones), the coordinator would
decrypt the registry's every per-subject value with no party colluding, and likewise a further party's score parts
(sealed to a minted L, under a minted registry's context). So a party refuses to seal anything unless it pins its
peers, before its charge.
"""

from __future__ import annotations

import pytest
from cryptography.hazmat.primitives.asymmetric import ec
from three_rounds import PARTS, STEPS, Three, relayed
from vertical_parties import STUDY, spent

from collabcausal.errors import PolicyError
from collabcausal.messages import Message
from collabcausal.party.secagg import Identity
from collabcausal.protocol.certs import make_ca, make_certificate
from collabcausal.secagg.crypto import generate_round_key, public_bytes
from collabcausal.secagg.identity import Signer
from collabcausal.secagg.pins import PeerPolicy
from collabcausal.vertical.sealed import seal_round


def _any(w: Three):
    """Every party with a certificate of a CA the coordinator holds and ``peers = "any"``; the CA's key."""
    ca_key, ca_cert = make_ca(name="study CA", days=30)
    for party in w.parties:
        key = ec.generate_private_key(ec.SECP256R1())
        signer = Signer(make_certificate(ca_key, ca_cert, party.name, key.public_key(), days=30), key)
        party.secagg_identity = Identity(signer, ca_cert, PeerPolicy(None, 2))
    return ca_key, ca_cert


def _minted(ca_key, ca_cert, name: str) -> Signer:
    key = ec.generate_private_key(ec.SECP256R1())
    return Signer(make_certificate(ca_key, ca_cert, name, key.public_key(), days=30), key)


def test_an_unpinned_registry_refuses_to_seal_to_a_key_the_coordinator_minted(tmp_path) -> None:
    w = Three(tmp_path)
    ca_key, ca_cert = _any(w)
    terms = w.terms("statistics")
    columns = w.label.handle(Message(STEPS["statistics"][0], terms))
    coordinator = generate_round_key()
    minted = _minted(ca_key, ca_cert, "insurer").advertise(STUDY, seal_round(terms["round"]),
                                                             public_bytes(coordinator))
    with pytest.raises(PolicyError, match="peers") as caught:
        w.registry.handle(relayed(STEPS["statistics"][1], terms, columns, seal_keys={"2": minted}))
    assert "\n" not in str(caught.value)
    assert spent(w.registry) == 0.0
    honest = w.seal_key(w.insurer, terms["round"])  # the insurer's own key does not help either: unpinned, refused
    with pytest.raises(PolicyError, match="peers"):
        w.registry.handle(relayed(STEPS["statistics"][1], terms, columns, seal_keys={"2": honest}))
    assert spent(w.registry) == 0.0


def test_an_unpinned_further_party_refuses_to_seal_its_score_parts(tmp_path) -> None:
    w = Three(tmp_path)
    ca_key, ca_cert = _any(w)
    terms = w.terms("scores")
    columns = w.registry.handle(Message(STEPS["scores"][0], terms))
    minted = _minted(ca_key, ca_cert, "hospital").advertise(STUDY, seal_round(terms["round"]),
                                                              public_bytes(generate_round_key()))
    with pytest.raises(PolicyError, match="peers"):
        w.insurer.handle(relayed(PARTS, terms, columns, seal_keys={"0": minted}, keys=("context_advertisement",)))
    assert spent(w.insurer) == 0.0
