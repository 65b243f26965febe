"""The key owner's last step of a vertical release: check the totals, then decrypt, add its noise, round.

Shared by both releases. The round is closed first (:func:`~.rounds.close_round`), so whatever happens
next, no other totals are ever opened under its key; the totals must carry the evaluator's signature for
the round's terms (:func:`~.exchange.verified_totals`: as many ciphertexts as hold the round's values
packed, :mod:`~collabcausal.vertical.packing`); and every decrypted value leaves only with this
party's DP noise share added and rounded to the CKKS error grid (Li & Micciancio 2021;
:meth:`~collabcausal.vertical.keys.KeyOwner.open`).

**Across row groups** (``secagg`` in the request: the round and the key owners' advertisements, as in
secure aggregation, docs/secure-aggregation.md): the key owner's share is its secure-aggregation share,
calibrated so that the shares of every key owner of the verified roster but one give the release's
guarantee (:func:`~collabcausal.party.secagg.masked_release`, checked against its pins and ``min_parties``),
and the noisy vector leaves encoded and masked, so the coordinator learns only the sum over row groups.
The evaluator's share inside the totals is unchanged (full: the key owner sees it).
"""

from __future__ import annotations

import numpy as np

from collabcausal.errors import ProtocolError
from collabcausal.estimators.dp.effects.vertical_program import noise_share
from collabcausal.messages import Message
from collabcausal.party.node import Party
from collabcausal.party.secagg import masked_release, secagg_spec
from collabcausal.party.vertical.exchange import verified_totals
from collabcausal.party.vertical.rounds import KeyRound, close_round
from collabcausal.secagg import NOISE_TAIL, SCALE_BITS, encode
from collabcausal.vertical.dp_effects_rounds import open_totals
from collabcausal.vertical.packing import packed_count
from collabcausal.vertical.relay import totals_keys

__all__ = ["open_parameters", "open_release"]


def open_parameters(evaluators: int) -> frozenset[str]:
    """The request parameters :func:`open_release` reads for a round of up to ``evaluators`` evaluators: ``round``,
    optional ``secagg`` and each evaluator's totals signature (:func:`~collabcausal.vertical.relay.totals_keys`)."""
    return frozenset({"round", "secagg", *(totals_keys(k)[1] for k in range(evaluators))})


def open_release(party: Party, request: Message, release: str) -> Message:
    """The released vector of ``release``: the key owner's own entries plus its shares, the opened totals (masked
    for secure aggregation when the request carries ``secagg``, checked before the round closes)."""
    secagg = secagg_spec(request.params.get("secagg"), request.operation)
    state = close_round(party, request.params.get("round"), release)
    if state.sent != state.batches:
        raise ProtocolError(f"round {state.terms['round']!r} is opened after {state.sent} of its {state.batches} "
                            "batches were encrypted", "run the release again, relaying every batch")
    slots = state.owner.parameters.slot_count
    totals = [verified_totals(party, request, peer, state.terms, packed_count(int(at.size), slots), k)
              for k, (peer, at) in enumerate(zip(state.peers, state.totals, strict=True))]
    if secagg is None:
        released = _opened(state, totals, noise_share(state.parties, state.sigma))
        params = {"sigma": state.sigma, "round": state.terms["round"], "n_subjects": state.terms["n_subjects"]}
        return Message(request.operation, params, {"values": released})
    n = float(state.terms["n_subjects"])
    prepared = masked_release(party, str(state.terms["study"]), secagg, request.operation,
                              sensitivity=state.sensitivity, rho=float(state.terms["rho"]),
                              length=int(state.parties.size), value_bound=n + NOISE_TAIL * state.sigma)
    share = prepared.share()
    released = _opened(state, totals, share / 2.0**SCALE_BITS)
    return prepared.masked(request.operation, encode(released, SCALE_BITS))


def _opened(state: KeyRound, totals: list[list[memoryview]], shares: np.ndarray) -> np.ndarray:
    """The key owner's own entries plus ``shares``, and each evaluator's totals decrypted with its share added and
    rounded."""
    released = (np.zeros(state.parties.size) if state.local is None else state.local) + shares
    for at, returned in zip(state.totals, totals, strict=True):
        released[at] = open_totals(state.owner, returned, shares[at], grid=state.owner.parameters.error_bound)
    return released
