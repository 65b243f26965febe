"""InProcessGrid: the parties of one round asked one at a time or concurrently (``workers``)."""

from __future__ import annotations

import numpy as np
import pytest
from protocol_helpers import small_party

from collabcausal.errors import InputError, PolicyError
from collabcausal.messages import Message
from collabcausal.protocol.inprocess import InProcessGrid


def test_parties_of_a_round_work_concurrently_and_reply_in_request_order() -> None:
    grid = InProcessGrid([small_party("a"), small_party("b")], workers=2)
    replies = grid.send_and_receive({name: Message("test_rendezvous") for name in ("b", "a")})  # both must be running
    assert list(replies) == ["b", "a"] and [r.params["party"] for r in replies.values()] == ["b", "a"]


def test_concurrent_round_raises_the_first_refusal_in_request_order() -> None:
    grid = InProcessGrid([small_party(name) for name in ("a", "b", "c")], workers=3)
    requests = {
        "a": Message("test_echo", {}, {"v": np.ones(3)}),
        "c": Message("test_refuse"),
        "b": Message("test_refuse"),
    }
    with pytest.raises(PolicyError, match="party 'c' refuses the test"):
        grid.send_and_receive(requests)


def test_fewer_than_one_worker_is_refused() -> None:
    with pytest.raises(InputError, match="workers must be at least 1, got 0"):
        InProcessGrid([small_party("a")], workers=0)
