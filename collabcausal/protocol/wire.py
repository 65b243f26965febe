"""The Study service's frames on the wire, with chunk frames kept out of protobuf objects.

Array bytes dominate the traffic, and every pass through a protobuf object copies them (building
a ``Chunk``, serializing it, parsing it, reading ``chunk.data``). The wire format is unchanged
(the stubs generated from ``collabcausal.proto`` still talk to this code); only the
(de)serializers of ``PullTask`` and ``UploadResult`` differ:

* sending, :meth:`FrameStream.encoded <collabcausal.protocol.arrays.FrameStream.encoded>` writes
  each chunk frame's protobuf encoding around a view of the array (:func:`encode_chunk`: one copy
  into the message) and :func:`serialize_frame` passes those bytes through;
* receiving, :func:`parse_frame` reads a frame in the canonical encoding of a chunk (the one
  :func:`encode_chunk` and protobuf's serializer write) as a :class:`ChunkView`, a view into the
  received bytes, and hands anything else to protobuf (so every valid encoding reads as protobuf
  reads it).
"""

from __future__ import annotations

from dataclasses import dataclass

import grpc

from collabcausal.protocol.generated import collabcausal_pb2 as pb
from collabcausal.protocol.generated import collabcausal_pb2_grpc as pb_grpc

SERVICE = "collabcausal.v1.Study"
_FRAME_CHUNK = 0x12  # Frame field 2 (chunk), length-delimited
_CHUNK_ARRAY = 0x08  # Chunk field 1 (array), varint
_CHUNK_DATA = 0x12  # Chunk field 2 (data), length-delimited


@dataclass(frozen=True)
class ChunkView:
    """A received chunk frame: the array index and a view of its bytes (no copy).

    Read like the ``Frame`` it encodes: ``WhichOneof("kind")`` is ``"chunk"`` and ``chunk`` is
    itself (with ``array`` and ``data``).
    """

    array: int
    data: memoryview

    @property
    def chunk(self) -> ChunkView:
        return self

    def WhichOneof(self, group: str) -> str:  # protobuf's name
        return "chunk"


def _varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _read_varint(raw: bytes, pos: int) -> tuple[int, int]:
    """(value, next position); (-1, pos) when no varint of at most 10 bytes starts at ``pos``."""
    value = shift = 0
    for end in range(pos, min(pos + 10, len(raw))):
        byte = raw[end]
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, end + 1
        shift += 7
    return -1, pos


def encode_chunk(array: int, data: memoryview) -> bytes:
    """The serialized ``Frame(chunk=Chunk(array=array, data=data))``, as protobuf writes it."""
    inner = (bytes([_CHUNK_ARRAY]) + _varint(array) if array else b"") + bytes([_CHUNK_DATA]) + _varint(len(data))
    return b"".join((bytes([_FRAME_CHUNK]), _varint(len(inner) + len(data)), inner, data))


def serialize_frame(frame: pb.Frame | bytes) -> bytes:
    """A frame's bytes: already-encoded frames pass through."""
    return frame if isinstance(frame, bytes) else frame.SerializeToString()


def parse_frame(raw: bytes) -> pb.Frame | ChunkView:
    """A received frame: a :class:`ChunkView` for a canonically encoded chunk, else the protobuf ``Frame``."""
    if raw[:1] == bytes([_FRAME_CHUNK]):
        size, pos = _read_varint(raw, 1)
        if size == len(raw) - pos:
            array = 0
            if raw[pos : pos + 1] == bytes([_CHUNK_ARRAY]):
                array, pos = _read_varint(raw, pos + 1)
            if array >= 0 and raw[pos : pos + 1] == bytes([_CHUNK_DATA]):
                length, start = _read_varint(raw, pos + 1)
                if length > 0 and length == len(raw) - start:
                    return ChunkView(array, memoryview(raw)[start:])
    return pb.Frame.FromString(raw)


def study_stub(channel: grpc.Channel) -> pb_grpc.StudyStub:
    """The generated client stub, its two frame streams using the serializers above."""
    stub = pb_grpc.StudyStub(channel)
    stub.PullTask = channel.unary_stream(
        f"/{SERVICE}/PullTask",
        request_serializer=pb.PullRequest.SerializeToString,
        response_deserializer=parse_frame,
        _registered_method=True,
    )
    stub.UploadResult = channel.stream_unary(
        f"/{SERVICE}/UploadResult",
        request_serializer=serialize_frame,
        response_deserializer=pb.UploadAck.FromString,
        _registered_method=True,
    )
    return stub


def add_study_servicer(servicer: pb_grpc.StudyServicer, server: grpc.Server) -> None:
    """``add_StudyServicer_to_server``, its two frame streams using the serializers above."""
    handlers = {
        "Register": grpc.unary_unary_rpc_method_handler(
            servicer.Register,
            request_deserializer=pb.RegisterRequest.FromString,
            response_serializer=pb.RegisterReply.SerializeToString,
        ),
        "PullTask": grpc.unary_stream_rpc_method_handler(
            servicer.PullTask,
            request_deserializer=pb.PullRequest.FromString,
            response_serializer=serialize_frame,
        ),
        "UploadResult": grpc.stream_unary_rpc_method_handler(
            servicer.UploadResult,
            request_deserializer=parse_frame,
            response_serializer=pb.UploadAck.SerializeToString,
        ),
        "Status": grpc.unary_unary_rpc_method_handler(
            servicer.Status,
            request_deserializer=pb.StatusRequest.FromString,
            response_serializer=pb.StatusReply.SerializeToString,
        ),
    }
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, handlers),))
    server.add_registered_method_handlers(SERVICE, handlers)
