"""Parties that trust the coordinator's roster (``peers = "any"``) in the vertical rounds (red3).

The coordinator holds the study CA, so for such a party it can mint a certificate in any name. Before this test
the registry accepted a round key the coordinator minted as the insurer's, was charged and sealed its products of
L's arm to the coordinator; minting L's too (its own CKKS context, the arm a column of ones), the coordinator would
decrypt the registry's every per-subject value with no party colluding, and likewise a further party's score parts
(sealed to a minted L, under a minted registry's context). With two parties a minted key owner's context and
columns let the coordinator read one subject's value from the evaluator's total. So a party that does not pin its
peers refuses every vertical operation, before its charge.
"""

from __future__ import annotations

from three_rounds import PARTS, STEPS, Three, relayed
from vertical_parties import refused_uncharged

from collabcausal.errors import PolicyError
from collabcausal.messages import Message
from collabcausal.party.secagg import Identity
from collabcausal.secagg.pins import PeerPolicy


def _unpinned(party) -> None:
    """``party`` keeps its certificate and trusts the coordinator's roster (``peers = "any"``)."""
    held = party.secagg_identity
    party.secagg_identity = Identity(held.signer, held.ca, PeerPolicy(None, 2))


def test_an_unpinned_registry_refuses_to_seal_to_any_key(tmp_path) -> None:
    """Even the insurer's own round key: the registry cannot tell it from one the coordinator minted."""
    w = Three(tmp_path)
    _unpinned(w.registry)
    terms = w.terms("statistics")
    columns = w.label.handle(Message(STEPS["statistics"][0], terms))
    key = w.seal_key(w.insurer, terms["round"])
    refused_uncharged(w.registry, relayed(STEPS["statistics"][1], terms, columns, seal_keys={"2": key}), PolicyError,
                      match="peers")


def test_an_unpinned_further_party_refuses_to_seal_its_score_parts(tmp_path) -> None:
    w = Three(tmp_path)
    _unpinned(w.insurer)
    terms = w.terms("scores")
    columns = w.registry.handle(Message(STEPS["scores"][0], terms))
    key = w.seal_key(w.label, terms["round"])
    refused_uncharged(w.insurer, relayed(PARTS, terms, columns, seal_keys={"0": key}, keys=("context_advertisement",)),
                      PolicyError, match="peers")


def test_two_unpinned_parties_refuse_the_vertical_rounds_before_their_charge(tmp_path) -> None:
    """With two column groups too: a coordinator minting L's certificate would relay its own context and columns
    (e.g. ``20000 * 1[subject k]``) and decrypt P's total, one subject's value scaled far past the noise. An
    unpinned key owner refuses to encrypt and an unpinned evaluator to total, each uncharged."""
    from hostile_rounds import relayed as two_party_relayed
    from hostile_rounds import request as two_party_request
    from hostile_rounds import small_world

    w = small_world(tmp_path)
    _unpinned(w.other)
    columns = w.label.handle(two_party_request(w, "statistics"))
    refused_uncharged(w.other, two_party_relayed("statistics", two_party_request(w, "statistics"), columns),
                      PolicyError, match="peers")
    refused_uncharged(w.other, two_party_request(w, "scores"), PolicyError, match="peers")
