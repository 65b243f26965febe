"""The evaluator's side of a vertical round: its running sums, batch by batch, until it returns the totals once.

When the key owner's columns travel in batches of subjects (:mod:`~collabcausal.party.vertical.request`), the
evaluator is charged at batch 0 (:func:`begin`, after the columns verify), adds each batch's summands under
encryption (:func:`add_batch`: in order, each once, under the key owner's context of batch 0 and the round's
terms) and, after the last, packs the totals with its noise share: what it returns is the same as for one
batch of every subject. A round id is evaluated once; at most
:data:`~collabcausal.party.vertical.rounds.MAX_OPEN_ROUNDS` evaluations stay open (an older one is dropped:
its study restarts the release).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from collabcausal.errors import PolicyError
from collabcausal.party.node import Party
from collabcausal.party.vertical.request import VerticalRequest
from collabcausal.party.vertical.rounds import MAX_OPEN_ROUNDS, check_continues
from collabcausal.vertical.context import PublicContext
from collabcausal.vertical.packing import Summands

__all__ = ["Evaluation", "add_batch", "begin", "count_batch", "evaluation"]


@dataclass
class Evaluation:
    """One open evaluation: the release, the terms its batches must carry, the key owner's context (from batch 0),
    the summands so far and the number of batches added."""

    release: str
    terms: dict[str, Any]
    context: PublicContext
    summands: Summands | None = None
    received: int = 0


def _evaluations(party: Party) -> OrderedDict[str, Evaluation | None]:
    return party.vertical_evaluations


def evaluation(party: Party, req: VerticalRequest, release: str, terms: dict[str, Any]) -> Evaluation | None:
    """The open evaluation ``req``'s batch continues (checked), or ``None`` for a new round's batch 0."""
    store = _evaluations(party)
    if req.batch == 0:
        if req.round_id in store:
            raise PolicyError(f"party {party.name!r} already evaluated round {req.round_id!r}",
                              "run the release again from its first step, with a new round id")
        return None
    state = store.get(req.round_id)
    check_continues(party, req, state, release, terms, "evaluation", None if state is None else state.received)
    return state


def begin(party: Party, req: VerticalRequest, release: str, terms: dict[str, Any], context: PublicContext
          ) -> Evaluation:
    """Open the evaluation of ``req``'s round (at batch 0, once charged); drop the oldest beyond the limit."""
    store = _evaluations(party)
    state = Evaluation(release, terms, context)
    store[req.round_id] = state
    for dropped in [r for r, s in store.items() if s is not None][:-MAX_OPEN_ROUNDS]:
        store[dropped] = None
    return state


def add_batch(party: Party, req: VerticalRequest, state: Evaluation, summands: Summands) -> Summands | None:
    """Add a batch's summands; after the last batch, close the evaluation and return the round's summands."""
    state.summands = summands if state.summands is None else state.summands.plus(summands, state.context)
    return state.summands if count_batch(party, req, state) else None


def count_batch(party: Party, req: VerticalRequest, state: Evaluation) -> bool:
    """Count ``req``'s batch as done; after the last, close the evaluation (``True``)."""
    state.received += 1
    if not req.last_batch:
        return False
    _evaluations(party)[req.round_id] = None
    return True
