import numpy as np
import pytest

from collabcausal.messages import Message
from collabcausal.protocol.arrays import message_frames, read_message
from collabcausal.protocol.generated import collabcausal_pb2 as pb
from collabcausal.protocol.wire import ChunkView, encode_chunk, parse_frame, serialize_frame


@pytest.mark.parametrize("array", [0, 1, 127, 128, 70_000])
@pytest.mark.parametrize("size", [1, 127, 128, 16_384, 1 << 20])
def test_encode_chunk_writes_what_protobuf_writes_and_parse_frame_reads_it_back(array, size):
    data = np.random.default_rng(size).integers(0, 256, size, dtype=np.uint8).tobytes()
    encoded = encode_chunk(array, memoryview(data))
    assert encoded == pb.Frame(chunk=pb.Chunk(array=array, data=data)).SerializeToString()
    parsed = parse_frame(encoded)
    assert isinstance(parsed, ChunkView) and parsed.array == array and bytes(parsed.data) == data
    assert parsed.WhichOneof("kind") == "chunk" and parsed.chunk is parsed


@pytest.mark.parametrize(
    "frame",
    [
        pb.Frame(header=pb.MessageHeader(operation="op", task_id="t")),
        pb.Frame(chunk=pb.Chunk(array=2, data=b"")),  # empty data: protobuf's reading, refused later
        pb.Frame(),
    ],
)
def test_parse_frame_leaves_every_other_frame_to_protobuf(frame):
    parsed = parse_frame(frame.SerializeToString())
    assert isinstance(parsed, pb.Frame) and parsed == frame


def test_a_non_canonical_chunk_encoding_is_read_as_protobuf_reads_it():
    data = b"abc"
    # Chunk fields in reverse order (data, then array): valid protobuf, not the canonical layout
    inner = b"\x12\x03" + data + b"\x08\x01"
    parsed = parse_frame(b"\x12" + bytes([len(inner)]) + inner)
    assert isinstance(parsed, pb.Frame) and parsed.chunk.array == 1 and parsed.chunk.data == data


def test_encoded_frames_carry_the_same_message_through_the_wire_functions():
    message = Message("op", {"x": 1}, {"a": np.arange(300_000.0), "b": np.ones((3, 2), dtype=np.int32)})
    stream = message_frames(message, task_id="t", chunk_bytes=1 << 18)
    wire = [serialize_frame(frame) for frame in stream.encoded()]
    assert wire == [frame.SerializeToString() for frame in stream]
    got = read_message(parse_frame(raw) for raw in wire).message
    assert got.params == {"x": 1}
    assert all(np.array_equal(got.arrays[k], message.arrays[k]) for k in message.arrays)
