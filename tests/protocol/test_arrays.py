"""Arrays as frames: exact round trips, 1 MiB chunks, and refusal of bad streams."""

from __future__ import annotations

import numpy as np
import pytest
from protocol_helpers import malformed_streams

from collabcausal.errors import ProtocolError
from collabcausal.messages import Message
from collabcausal.protocol.arrays import CHUNK_BYTES, message_frames, read_message
from collabcausal.protocol.generated import collabcausal_pb2 as pb


def _roundtrip(message: Message, **kwargs) -> Message:
    return read_message(list(message_frames(message)), **kwargs).message


@pytest.mark.parametrize(
    "array",
    [
        np.arange(12, dtype=np.float64).reshape(3, 4),
        np.arange(6, dtype=">i4").reshape(2, 3),
        np.array(3.5),
        np.zeros((0, 3)),
        np.array([True, False]),
        np.array([1 + 2j], dtype=np.complex128),
        np.arange(20, dtype=np.uint8).reshape(4, 5)[:, ::2],
    ],
    ids=["float64", "big-endian", "0-d", "empty", "bool", "complex", "strided"],
)
def test_arrays_round_trip_exactly(array):
    back = _roundtrip(Message("op", {"x": 1.25, "names": ["a"]}, {"v": array})).array("v")
    assert back.dtype == array.dtype and back.shape == array.shape
    assert np.array_equal(back, array)


def test_params_and_operation_survive_with_float_precision():
    value = 0.1 + 0.2
    back = _roundtrip(Message("op", {"x": value, "nested": {"k": [1, 2]}}))
    assert back.operation == "op" and back.params["x"] == value and back.params["nested"] == {"k": [1, 2]}


def test_large_array_travels_in_chunks_of_at_most_one_mebibyte():
    array = np.random.default_rng(0).normal(size=(3 * CHUNK_BYTES // 8 + 5,))
    frames = list(message_frames(Message("op", {}, {"v": array})))
    chunks = [f.chunk.data for f in frames[1:]]
    assert len(chunks) == 4 and max(map(len, chunks)) == CHUNK_BYTES
    header = frames[0].header.arrays[0]
    assert list(header.shape) == [array.size] and header.nbytes == array.nbytes
    assert np.array_equal(read_message(frames).message.array("v"), array)


def test_non_numeric_arrays_and_non_json_params_are_refused_at_the_sender():
    with pytest.raises(ProtocolError, match="not numeric"):
        message_frames(Message("op", {}, {"s": np.array(["a"])}))
    with pytest.raises(ProtocolError, match="cannot travel as JSON"):
        message_frames(Message("op", {"x": np.float32(1.0)}))
    with pytest.raises(ProtocolError, match="cannot travel as JSON"):
        message_frames(Message("op", {"x": float("nan")}))


def _frames(array=None):
    array = np.arange(300_000, dtype=np.float64) if array is None else array
    return list(message_frames(Message("op", {}, {"v": array}), chunk_bytes=CHUNK_BYTES // 2))


def _chunk(index: int, data: bytes) -> pb.Frame:
    return pb.Frame(chunk=pb.Chunk(array=index, data=data))


def test_truncated_stream_is_refused():
    with pytest.raises(ProtocolError, match="truncated"):
        read_message(_frames()[:-1])


def test_extra_bytes_are_refused():
    with pytest.raises(ProtocolError, match=r"beyond the declared|more bytes"):
        read_message([*_frames(), _chunk(0, b"x")])


def test_chunk_above_one_mebibyte_is_refused():
    frames = _frames(np.zeros(CHUNK_BYTES // 4, dtype=np.float64))
    big = b"".join(f.chunk.data for f in frames[1:])
    with pytest.raises(ProtocolError, match="chunk of"):
        read_message([frames[0], _chunk(0, big)])


def test_declared_size_above_the_limit_is_refused_before_reading():
    with pytest.raises(ProtocolError, match="above the limit"):
        read_message(_frames(), max_bytes=1000)


def test_stream_without_header_is_refused():
    with pytest.raises(ProtocolError, match="header"):
        read_message(_frames()[1:])
    with pytest.raises(ProtocolError, match="header"):
        read_message([])


@pytest.mark.parametrize(
    ("field", "value", "match"),
    [("dtype", "O8", "unsupported dtype"), ("byte_order", "?", "unsupported dtype"), ("nbytes", 7, "does not match")],
)
def test_inconsistent_array_header_is_refused(field, value, match):
    frames = _frames()
    setattr(frames[0].header.arrays[0], field, value)
    with pytest.raises(ProtocolError, match=match):
        read_message(frames)


def test_unreadable_params_are_refused():
    frame = pb.Frame(header=pb.MessageHeader(operation="op", params_json="{not json"))
    with pytest.raises(ProtocolError, match="unreadable params"):
        read_message([frame])


@pytest.mark.parametrize("case", sorted(malformed_streams()))
def test_every_malformed_stream_is_one_protocol_error_line(case):
    with pytest.raises(ProtocolError) as info:
        read_message(malformed_streams()[case], max_bytes=1 << 30)
    assert "\n" not in str(info.value) and len(str(info.value)) < 400


def test_header_check_runs_before_any_buffer_is_allocated():
    def refuse(header):
        raise ProtocolError(f"no task {header.task_id!r} outstanding")

    frames = _frames()
    frames[0].header.task_id = "t9"
    with pytest.raises(ProtocolError, match="no task 't9'"):
        read_message(iter([frames[0]]), check_header=refuse)
