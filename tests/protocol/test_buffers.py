"""Receive buffers: an arena is reused only once no array refers to it, and never shows old bytes."""

from __future__ import annotations

import gc

import numpy as np
import pytest

from collabcausal.errors import ProtocolError
from collabcausal.messages import Message
from collabcausal.protocol.arrays import message_frames, read_message
from collabcausal.protocol.buffers import POOLED_BYTES, BufferPool

N = POOLED_BYTES


def test_small_buffers_are_fresh_and_not_kept():
    pool = BufferPool()
    buffer = pool.take(N - 1)
    assert buffer.nbytes == N - 1 and buffer.base is None
    del buffer
    assert pool.free_bytes == 0


def test_an_arena_returns_only_when_its_last_view_is_gone():
    pool = BufferPool()
    buffer = pool.take(N)
    address = buffer.ctypes.data
    view = buffer.view(np.float64).reshape(-1, 8)[1:]
    del buffer
    assert pool.free_bytes == 0
    other = pool.take(N)
    assert not np.shares_memory(other, view)
    del view
    assert pool.free_bytes == N
    again = pool.take(N)
    assert again.ctypes.data == address and again.nbytes == N and again.flags.writeable
    assert pool.free_bytes == 0
    del other, again


def test_an_arena_held_in_a_reference_cycle_returns_when_the_cycle_is_collected():
    pool = BufferPool()
    cycle: list = [pool.take(N)]
    cycle.append(cycle)
    del cycle
    gc.collect()
    assert pool.free_bytes == N


def test_an_arena_serves_buffers_above_half_its_size_only():
    pool = BufferPool()
    address = pool.take(3 * N).ctypes.data
    assert pool.free_bytes == 3 * N
    small = pool.take(N)
    assert small.ctypes.data != address and pool.free_bytes == 3 * N
    larger = pool.take(2 * N)
    assert larger.ctypes.data == address and larger.nbytes == 2 * N and pool.free_bytes == 0
    del small, larger


def test_beyond_the_retained_bytes_the_arenas_given_back_longest_ago_are_freed():
    pool = BufferPool(retained_bytes=3 * N)
    older, newer = pool.take(2 * N), pool.take(2 * N)
    address = newer.ctypes.data
    del older, newer
    assert pool.free_bytes == 2 * N
    assert pool.take(2 * N).ctypes.data == address
    pool.take(4 * N)
    assert pool.free_bytes == 2 * N  # the 4N arena, above the limit, is not kept


def _message(seed: int) -> Message:
    return Message("op", {}, {"v": np.random.default_rng(seed).normal(size=(N // 8 // 4, 4))})


def test_messages_read_one_after_another_hold_their_own_bytes():
    first_sent, second_sent = _message(0), _message(1)
    first = read_message(list(message_frames(first_sent))).message
    second = read_message(list(message_frames(second_sent))).message
    assert not np.shares_memory(first.array("v"), second.array("v"))
    address = first.array("v").ctypes.data
    del first
    third = read_message(list(message_frames(first_sent))).message
    assert third.array("v").ctypes.data == address  # the first message's arena, overwritten
    assert np.array_equal(third.array("v"), first_sent.array("v"))
    assert np.array_equal(second.array("v"), second_sent.array("v"))


def test_an_arena_left_by_a_truncated_stream_is_overwritten_before_reuse():
    frames = list(message_frames(_message(2)))
    with pytest.raises(ProtocolError, match="truncated"):
        read_message(frames[:-3])
    sent = _message(3)
    got = read_message(list(message_frames(sent))).message.array("v")
    assert np.array_equal(got, sent.array("v"))
