"""The key owner's last step of a vertical release: check the totals, then decrypt, add its noise, round.

Shared by both releases. The round is closed first (:func:`~.rounds.close_round`), so whatever happens
next, no other totals are ever opened under its key; the totals must carry the evaluator's signature for
the round's terms (:func:`~.exchange.verified_totals`); and every decrypted value leaves only with this
party's DP noise share added and rounded to the CKKS error grid (Li & Micciancio 2021;
:meth:`~collabcausal.vertical.keys.KeyOwner.open`).
"""

from __future__ import annotations

import numpy as np

from collabcausal.estimators.dp.effects.vertical_program import noise_share
from collabcausal.messages import Message
from collabcausal.party.node import Party
from collabcausal.party.vertical.exchange import verified_totals
from collabcausal.party.vertical.rounds import close_round
from collabcausal.vertical.dp_effects_rounds import open_totals

__all__ = ["open_release"]


def open_release(party: Party, request: Message, release: str) -> Message:
    """The released vector of ``release``: the key owner's own entries plus its shares, the opened totals."""
    state = close_round(party, request.params.get("round"), release)
    totals = verified_totals(party, request, state.peer, state.terms, int(state.totals.size))
    shares = noise_share(state.parties, state.sigma)
    released = (np.zeros(state.parties.size) if state.local is None else state.local) + shares
    released[state.totals] = open_totals(state.owner, totals, shares[state.totals],
                                         grid=state.owner.parameters.error_bound)
    params = {"sigma": state.sigma, "round": state.terms["round"], "n_subjects": state.terms["n_subjects"]}
    return Message(request.operation, params, {"values": released})
