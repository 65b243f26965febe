"""The key owner's side of a vertical round: its CKKS key and what it must finish, until it opens once.

A key owner makes one :class:`~collabcausal.vertical.keys.KeyOwner` per round when it encrypts (and is
charged), keeps it here with the round's terms and anything the open step adds, encrypts the round's later
batches of subjects with it (:func:`next_batch`: in order, each once, under the same terms), and opens the
returned totals once: the round is closed **before** the open computes, so no second set of totals is ever
decrypted under the same key, whatever happens after. A round id is never reused, and at most
:data:`MAX_OPEN_ROUNDS` rounds stay open (an older one is closed: its study restarts the release).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from collabcausal.errors import PolicyError, ProtocolError
from collabcausal.party.node import Party
from collabcausal.party.vertical.request import VerticalRequest
from collabcausal.vertical.keys import KeyOwner

MAX_OPEN_ROUNDS = 4
"""Open rounds a party keeps (each holds a CKKS secret key and, for the statistics, its local sums)."""

__all__ = ["MAX_OPEN_ROUNDS", "KeyRound", "check_continues", "check_new_round", "close_round", "next_batch",
           "open_round"]


@dataclass
class KeyRound:
    """One open round of a key owner.

    Attributes
    ----------
    release : str
        ``"statistics"`` or ``"scores"``.
    owner : KeyOwner
        The round's secret key.
    terms : dict
        The public terms it signed (:meth:`~collabcausal.party.vertical.request.VerticalRequest.terms` and the
        release's own), which the evaluator's totals must be signed for.
    peers : tuple of str
        The evaluators, whose signatures their totals must carry (one; with three or more column groups the
        statistics round has one per party but the label holder).
    sigma : float
        The release's noise scale; this party's shares are drawn from it when it opens (without secure
        aggregation across row groups).
    sensitivity : float
        The release's L2 sensitivity (its share's calibration under secure aggregation).
    parties : ndarray of int
        For each entry of the released vector, how many parties compute it (its noise share's calibration).
    totals : tuple of ndarray of int
        The entries each evaluator's totals fill, in their order.
    local : ndarray or None
        The entries the key owner computes alone, exact until the open adds its noise (zero elsewhere).
    batches : int
        Batches of subjects the round's columns travel in; ``sent`` of them are encrypted so far.
    """

    release: str
    owner: KeyOwner
    terms: dict[str, Any]
    peers: tuple[str, ...]
    sigma: float
    sensitivity: float
    parties: NDArray[np.int64]
    totals: tuple[NDArray[np.int64], ...]
    local: NDArray[np.float64] | None = None
    batches: int = 1
    sent: int = 1


def _rounds(party: Party) -> OrderedDict[str, KeyRound | None]:
    return party.vertical_rounds


def check_new_round(party: Party, round_id: str) -> None:
    """Refuse a round id this party already used (before any charge)."""
    if round_id in _rounds(party):
        raise PolicyError(f"party {party.name!r} already encrypted for round {round_id!r}",
                          "start a new round id: a round's key encrypts once")


def open_round(party: Party, round_id: str, state: KeyRound) -> None:
    """Keep ``state`` for ``round_id``; close the oldest open round beyond :data:`MAX_OPEN_ROUNDS`."""
    rounds = _rounds(party)
    check_new_round(party, round_id)
    rounds[round_id] = state
    open_ids = [r for r, s in rounds.items() if s is not None]
    for closed in open_ids[:-MAX_OPEN_ROUNDS]:
        rounds[closed] = None


def next_batch(party: Party, req: VerticalRequest, release: str, terms: dict[str, Any]) -> KeyRound:
    """The open round that ``req``'s batch (past the first) continues: same release and terms, the next batch."""
    state = _rounds(party).get(req.round_id)
    check_continues(party, req, state, release, terms, "round", None if state is None else state.sent)
    assert state is not None
    state.sent += 1
    return state


def check_continues(party: Party, req: VerticalRequest, state: Any, release: str, terms: dict[str, Any], kind: str,
                    done: int | None) -> None:
    """Refuse ``req``'s batch unless it continues the open ``kind`` (a key owner's round, an evaluator's
    evaluation) ``state`` of ``release``: under the terms of its batch 0 and next after the ``done`` ones."""
    if state is None or state.release != release:
        raise PolicyError(f"party {party.name!r} holds no open {release} {kind} {req.round_id!r} for batch "
                          f"{req.batch}", "start the round at batch 0, with a new round id")
    if state.terms != terms:
        raise ProtocolError(f"batch {req.batch} of round {req.round_id!r} came with other terms than its batch 0",
                            "send every batch with the round's terms")
    if req.batch != done:
        raise ProtocolError(f"batch {req.batch} of round {req.round_id!r} came, batch {done} is next",
                            "send the batches in order, each once")


def close_round(party: Party, round_id: object, release: str) -> KeyRound:
    """Take ``round_id``'s state and close it (before anything is opened): a second open is refused."""
    rounds = _rounds(party)
    state = rounds.get(round_id) if isinstance(round_id, str) else None
    if state is None or state.release != release:
        known = isinstance(round_id, str) and round_id in rounds
        raise PolicyError(f"party {party.name!r} holds no open {release} round {round_id!r}"
                          + (" (closed: opened already, or superseded)" if known else ""),
                          "run the release again from its first step, with a new round id")
    rounds[round_id] = None
    return state
