"""A :class:`~collabcausal.messages.Message` as a stream of frames, and back.

A message travels as one ``MessageHeader`` frame (operation, params as JSON, and for every array
its dtype, byte order, shape and byte count) followed by the arrays' bytes in order, in ``Chunk``
frames of at most :data:`CHUNK_BYTES` (1 MiB, well under gRPC's 4 MiB message limit), so arrays of
any size travel. :func:`read_message` checks everything it is told against what arrives: a
missing header, an unknown dtype, a shape that disagrees with the byte count, a chunk out of order
or above 1 MiB, more bytes than declared, a stream that ends early and a declared size above the
receiver's limit are each a :class:`ProtocolError`, and so are the hostile headers: a structured
or object dtype (``"i8,O"``), more than :data:`MAX_NDIM` dimensions, a dimension above
:data:`MAX_DIMENSION` (``(0, 2**63)``), more than :data:`MAX_ARRAYS` arrays or a repeated array
name, and params nested deeper than :data:`MAX_JSON_DEPTH`. Every limit is checked on the header,
before any buffer is allocated.

The bytes themselves carry no digest (protocol v2): in transit they are TLS records, each
authenticated (AEAD), so a changed byte fails the connection before it reaches this module
(plaintext is allowed only on loopback, where nothing sits between the two processes), and a peer
could match any digest to bytes it chose. A party's audit log records the SHA-256 of every
array it receives and sends (:mod:`collabcausal.party.audit`).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import numpy as np

from collabcausal.errors import CollabCausalError, ProtocolError
from collabcausal.messages import Message, nesting
from collabcausal.protocol.buffers import RECEIVE_BUFFERS
from collabcausal.protocol.generated import collabcausal_pb2 as pb
from collabcausal.protocol.wire import ChunkView, encode_chunk

CHUNK_BYTES = 1 << 20
DEFAULT_MAX_MESSAGE_BYTES = 4 << 30
NUMERIC_KINDS = "biufc"
MAX_NDIM = 32
MAX_DIMENSION = 1 << 40
MAX_ARRAYS = 64
MAX_JSON_DEPTH = 32
_DTYPE = re.compile(r"[biufc](1|2|4|8|16)")
_UPGRADE = "make sure both sides run the same collabcausal version and retry"


class TruncatedStreamError(ProtocolError):
    """A stream that ended early (nothing, or fewer bytes than declared): what a sender's crash leaves."""


@dataclass(frozen=True)
class Envelope:
    """A decoded frame stream: the header's routing fields and the message (if any)."""

    state: int
    task_id: str
    message: Message | None
    error: pb.Error | None
    detail: str


def message_frames(
    message: Message | None,
    *,
    state: int = pb.TASK,
    task_id: str = "",
    error: CollabCausalError | None = None,
    detail: str = "",
    chunk_bytes: int = CHUNK_BYTES,
) -> FrameStream:
    """Frames carrying ``message`` (header first, then chunks); see the module docstring.

    An error travels as its nearest class of :mod:`collabcausal.errors` (which the receiver
    re-raises). The header is built at once, so a message that cannot travel (non-JSON params, non-numeric
    arrays) raises :class:`ProtocolError` here rather than inside a gRPC stream.
    """
    header = pb.MessageHeader(state=state, task_id=task_id, detail=detail)
    if error is not None:
        kind = next(c.__name__ for c in type(error).__mro__ if c.__module__ == "collabcausal.errors")
        header.error.CopyFrom(pb.Error(kind=kind, problem=error.problem, fix=error.fix or ""))
    flats: list[memoryview] = []
    if message is not None:
        header.operation = message.operation
        try:
            header.params_json = json.dumps(dict(message.params), sort_keys=True, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise ProtocolError(
                f"params of {message.operation!r} cannot travel as JSON ({exc})",
                "use plain int, float (finite), str, bool, list and dict values",
            ) from None
        for name, value in message.arrays.items():
            array = np.require(np.asarray(value), requirements="C")
            if array.dtype.kind not in NUMERIC_KINDS:
                raise ProtocolError(
                    f"array {name!r} of {message.operation!r} has dtype {array.dtype}, not numeric",
                    "send numbers only (encode strings as integer codes or bytes as uint8)",
                )
            flat = memoryview(array.reshape(-1).view(np.uint8))
            flats.append(flat)
            header.arrays.append(
                pb.ArrayHeader(
                    name=name,
                    dtype=f"{array.dtype.kind}{array.dtype.itemsize}",
                    byte_order=array.dtype.byteorder if array.dtype.byteorder != "=" else _native(),
                    shape=list(array.shape),
                    nbytes=flat.nbytes,
                )
            )
    return FrameStream(header, flats, chunk_bytes)


@dataclass(frozen=True)
class FrameStream:
    """An encoded message: iterate it (as often as needed, e.g. to resend) for its frames."""

    header: pb.MessageHeader
    flats: list[memoryview]
    chunk_bytes: int = CHUNK_BYTES

    def __iter__(self) -> Iterator[pb.Frame]:
        yield pb.Frame(header=self.header)
        for index, flat in enumerate(self.flats):
            for start in range(0, flat.nbytes, self.chunk_bytes):
                yield pb.Frame(chunk=pb.Chunk(array=index, data=bytes(flat[start : start + self.chunk_bytes])))

    def encoded(self) -> Iterator[pb.Frame | bytes]:
        """The same frames for :func:`collabcausal.protocol.wire.serialize_frame`: chunks already encoded."""
        yield pb.Frame(header=self.header)
        for index, flat in enumerate(self.flats):
            for start in range(0, flat.nbytes, self.chunk_bytes):
                yield encode_chunk(index, flat[start : start + self.chunk_bytes])


def read_message(
    frames: Iterable[pb.Frame | ChunkView],
    *,
    max_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
    check_header: Callable[[pb.MessageHeader], None] | None = None,
) -> Envelope:
    """Assemble and verify a frame stream written by :func:`message_frames`.

    Parameters
    ----------
    frames : iterable of Frame or ChunkView
        As protobuf parses them, or chunks as :func:`collabcausal.protocol.wire.parse_frame` reads them.
    max_bytes : int
        Refuse messages whose arrays declare more bytes in total.
    check_header : callable, optional
        Called with the verified header before any array buffer is allocated; raises
        :class:`ProtocolError` to refuse the message unread (e.g. no task outstanding).

    Raises
    ------
    ProtocolError
        Malformed, truncated or oversized stream (the message names which).
    """
    stream = iter(frames)
    first = next(stream, None)
    if first is None:
        raise TruncatedStreamError("a message stream ended before its header", "the sender stopped; it will resend")
    if first.WhichOneof("kind") != "header":
        raise ProtocolError("a message stream did not start with its header", _UPGRADE)
    header = first.header
    if len(header.arrays) > MAX_ARRAYS:
        raise ProtocolError(
            f"message {header.operation!r} declares {len(header.arrays)} arrays, above the limit of {MAX_ARRAYS}",
            _UPGRADE,
        )
    specs = [_array_spec(a, header.operation) for a in header.arrays]
    if len({name for name, _, _, _ in specs}) != len(specs):
        raise ProtocolError(f"message {header.operation!r} names an array twice", _UPGRADE)
    total = sum(nbytes for _, _, _, nbytes in specs)
    if total > max_bytes:
        raise ProtocolError(
            f"message {header.operation!r} declares {total} bytes of arrays, above the limit of {max_bytes}",
            "split the request, or raise the receiver's limit (a party's [policy] max_request_bytes)",
        )
    params = _params(header)
    if check_header is not None:
        check_header(header)
    buffers = [RECEIVE_BUFFERS.take(nbytes) for _, _, _, nbytes in specs]
    views = [memoryview(buffer) for buffer in buffers]
    filled = [0] * len(specs)
    current = 0
    for frame in stream:
        if frame.WhichOneof("kind") != "chunk":
            raise ProtocolError(f"message {header.operation!r} has a second header", _UPGRADE)
        chunk = frame.chunk
        data = chunk.data  # each access to a protobuf bytes field copies it: read it once
        while current < len(specs) and filled[current] == specs[current][3]:
            current += 1
        if chunk.array != current or current >= len(specs):
            raise ProtocolError(
                f"message {header.operation!r}: a chunk for array {chunk.array} arrived out of order "
                "or beyond the declared bytes",
                _UPGRADE,
            )
        size = len(data)
        if size == 0 or size > CHUNK_BYTES:
            raise ProtocolError(
                f"message {header.operation!r}: a chunk of {size} bytes (allowed 1..{CHUNK_BYTES})", _UPGRADE
            )
        end = filled[current] + size
        if end > specs[current][3]:
            raise ProtocolError(
                f"message {header.operation!r}: array {specs[current][0]!r} got more bytes than its declared "
                f"{specs[current][3]}",
                _UPGRADE,
            )
        views[current][filled[current] : end] = data
        filled[current] = end
    arrays = {}
    for (name, dtype, shape, nbytes), buffer, got in zip(specs, buffers, filled, strict=True):
        if got != nbytes:
            raise TruncatedStreamError(
                f"message {header.operation!r} was truncated: array {name!r} has {got} of {nbytes} bytes",
                "the sender stopped early; it will resend the message",
            )
        arrays[name] = buffer.view(dtype).reshape(shape)
    message = Message(header.operation, params, arrays) if header.operation else None
    error = header.error if header.HasField("error") else None
    return Envelope(header.state, header.task_id, message, error, header.detail)


def _params(header: pb.MessageHeader) -> dict:
    """The header's params: a JSON object nested at most :data:`MAX_JSON_DEPTH` deep."""
    if not header.operation:
        return {}
    where = f"message {header.operation!r}"
    try:
        params = json.loads(header.params_json or "{}")
    except json.JSONDecodeError as exc:
        raise ProtocolError(f"{where} has unreadable params ({exc.msg})", _UPGRADE) from None
    except RecursionError:
        raise ProtocolError(f"{where}: params nested deeper than {MAX_JSON_DEPTH}", _UPGRADE) from None
    if not isinstance(params, dict):
        raise ProtocolError(f"{where}: params are not a JSON object", _UPGRADE)
    if nesting(params, MAX_JSON_DEPTH)[0] > MAX_JSON_DEPTH:
        raise ProtocolError(f"{where}: params nested deeper than {MAX_JSON_DEPTH}", _UPGRADE)
    return params


def _array_spec(spec: pb.ArrayHeader, operation: str) -> tuple[str, np.dtype, tuple[int, ...], int]:
    where = f"message {operation!r}, array {spec.name!r}"
    if spec.byte_order not in ("<", ">", "|") or not _DTYPE.fullmatch(spec.dtype):
        raise ProtocolError(f"{where}: unsupported dtype {spec.byte_order}{spec.dtype!r}", _UPGRADE)
    try:
        dtype = np.dtype(spec.byte_order + spec.dtype)
    except TypeError:
        raise ProtocolError(f"{where}: unsupported dtype {spec.dtype!r}", _UPGRADE) from None
    if len(spec.shape) > MAX_NDIM or any(s > MAX_DIMENSION for s in spec.shape):
        raise ProtocolError(
            f"{where}: shape of {len(spec.shape)} dimensions with extent up to {max(spec.shape)}, above the limits "
            f"of {MAX_NDIM} dimensions and {MAX_DIMENSION} per dimension",
            _UPGRADE,
        )
    shape = tuple(int(s) for s in spec.shape)
    if math.prod(shape) * dtype.itemsize != spec.nbytes:
        raise ProtocolError(f"{where}: shape {shape} of {dtype} does not match {spec.nbytes} bytes", _UPGRADE)
    return spec.name, dtype, shape, int(spec.nbytes)


def _native() -> str:
    return "<" if np.little_endian else ">"
