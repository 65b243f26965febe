"""SEAL objects to bytes and back (TenSEAL's ``sealapi`` saves and loads through a file path only)."""

from __future__ import annotations

import tempfile
from functools import cache
from pathlib import Path
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from collabcausal.errors import ProtocolError

__all__ = ["frame", "load_seal", "save_seal", "tag", "tenseal_vector", "unframe", "untag"]

MAGIC = b"collabcausal-ckks-v1"


def save_seal(obj: Any) -> bytes:
    """The bytes SEAL writes for ``obj`` (a ciphertext, Galois keys or their serializable form)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "object"
        obj.save(str(path))
        return path.read_bytes()


def load_seal(obj: Any, seal_context: Any, data: bytes, what: str) -> Any:
    """Load ``data`` into the empty SEAL object ``obj`` under ``seal_context``; SEAL checks it is valid for it."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "object"
        path.write_bytes(data)
        try:
            obj.load(seal_context, str(path))
        except (ValueError, RuntimeError, TypeError):
            raise ProtocolError(
                f"{what} is not valid under this round's CKKS context", "resend it from the same round's key owner"
            ) from None
    return obj


def frame(*parts: bytes) -> bytes:
    """``MAGIC`` and ``parts``, each with an 8-byte big-endian length: one unambiguous blob."""
    return MAGIC + b"".join(len(p).to_bytes(8, "big") + p for p in parts)


def tag(fingerprint: str, payload: bytes) -> bytes:
    """``payload`` (a ciphertext) labelled with the fingerprint of the public context it is under."""
    return frame(fingerprint.encode("ascii"), payload)


def untag(data: bytes, fingerprint: str, what: str) -> bytes:
    """The payload of :func:`tag`, refused in one line when it is labelled with another context."""
    label, payload = unframe(data, 2, what)
    if label != fingerprint.encode("ascii"):
        raise ProtocolError(
            f"{what} is under another CKKS context (another key owner or round)",
            "send only ciphertexts of this round's key owner",
        )
    return payload


def unframe(data: bytes, count: int, what: str) -> list[bytes]:
    """The ``count`` parts of a :func:`frame` blob, refusing anything else in one line."""
    bad = ProtocolError(f"{what} is not a collabcausal CKKS blob of {count} parts", "resend it unchanged")
    if not isinstance(data, bytes | bytearray) or not bytes(data).startswith(MAGIC):
        raise bad
    view, pos, parts = bytes(data), len(MAGIC), []
    for _ in range(count):
        if pos + 8 > len(view):
            raise bad
        size = int.from_bytes(view[pos : pos + 8], "big")
        pos += 8
        if pos + size > len(view):
            raise bad
        parts.append(view[pos : pos + size])
        pos += size
    if pos != len(view):
        raise bad
    return parts


def tenseal_vector(ciphertext: bytes, size: int, scale: float) -> bytes:
    """A saved SEAL ciphertext as TenSEAL's serialized ``CKKSVector`` of ``size`` slots at ``scale`` (what
    ``tenseal.ckks_vector_from`` reads: its ``CKKSVectorProto`` of tenseal/proto/tensors.proto, written with
    protobuf's runtime), so that a ciphertext TenSEAL cannot make (a seeded symmetric encryption, complex slots)
    is read as any other chunk."""
    return _vector_proto()(sizes=[int(size)], ciphertexts=[ciphertext], scale=float(scale)).SerializeToString()


@cache
def _vector_proto() -> Any:
    """The message class of TenSEAL's ``CKKSVectorProto`` (fields 1 sizes, 2 ciphertexts, 3 scale)."""
    field = descriptor_pb2.FieldDescriptorProto
    file = descriptor_pb2.FileDescriptorProto(name="collabcausal_tenseal_vector.proto", package="collabcausal.tenseal",
                                              syntax="proto3")
    message = file.message_type.add(name="CKKSVectorProto")
    message.field.add(name="sizes", number=1, type=field.TYPE_UINT32, label=field.LABEL_REPEATED)
    message.field.add(name="ciphertexts", number=2, type=field.TYPE_BYTES, label=field.LABEL_REPEATED)
    message.field.add(name="scale", number=3, type=field.TYPE_DOUBLE, label=field.LABEL_OPTIONAL)
    pool = descriptor_pool.DescriptorPool()
    return message_factory.GetMessageClass(pool.Add(file).message_types_by_name["CKKSVectorProto"])
