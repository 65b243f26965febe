"""Signed transcripts: what one party of a vertical round sends the other, bound to the round's public terms.

Every ciphertext of the vertical rounds travels through the coordinator's relay. The coordinator
holds the key owner's public context, so it can encrypt values of its own choosing under the key
owner's key and hand them to the evaluator as the key owner's columns; and it holds the key owner's
columns, so it can compute a "total" of its own (say, one subject's outcome times 250) and have the
key owner open it. Both are closed here: the sender signs, with its study certificate (the
secure-aggregation :class:`~collabcausal.secagg.identity.Signer`), the SHA-256 digest of

    canonical_bytes(kind, canonical JSON of the round's public terms, SHA-256 of each blob in order)

and the receiver recomputes that digest from the terms **it** was asked to compute under and the
blobs **it** received, checks the signature against its pinned peers
(:mod:`collabcausal.secagg.pins`) and that the signer is the peer the round names, before it
charges or computes. The terms (study, round, design, budgets, the score program...) are in the
digest, so a coordinator that gives the two parties different views of the round is refused too.

``kind`` separates columns from totals, from sealed ciphertexts and from the context and key advertisements
(:data:`COLUMNS_KIND`, :data:`TOTALS_KIND`, :data:`SEALED_KIND`): a signature on one is never accepted as another.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from collabcausal.errors import IdentityError, ProtocolError
from collabcausal.messages import Message
from collabcausal.secagg.crypto import canonical_bytes
from collabcausal.secagg.identity import Signer, Verifier

COLUMNS_KIND = "ckks-columns"
"""A key owner's encrypted columns (and its public context's fingerprint)."""
TOTALS_KIND = "ckks-totals"
"""An evaluator's returned totals."""
SEALED_KIND = "ckks-sealed"
"""A party's ciphertexts sealed to one receiver (:mod:`~collabcausal.vertical.sealed`)."""
MAX_BLOBS = 1 << 16
"""More ciphertexts than any round sends (100,000 subjects x 24 columns at 4,096 slots: 600)."""

__all__ = ["COLUMNS_KIND", "MAX_BLOBS", "SEALED_KIND", "TOTALS_KIND", "blob_arrays", "blobs", "sign_transcript",
           "transcript_digest", "verify_transcript"]


def transcript_digest(kind: str, terms: Mapping[str, Any], payload: Sequence[bytes | memoryview]) -> bytes:
    """SHA-256 of ``kind``, the canonical JSON of ``terms`` and each blob's SHA-256, unambiguously encoded."""
    try:
        text = json.dumps(terms, sort_keys=True, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError):
        raise ProtocolError("a vertical round's terms are not finite JSON", "send the round's public terms") from None
    fields = canonical_bytes(kind, text, *(hashlib.sha256(b).hexdigest() for b in payload))
    return hashlib.sha256(fields).digest()


def sign_transcript(signer: Signer, study: str, round_id: str, kind: str, terms: Mapping[str, Any],
                    payload: Sequence[bytes | memoryview]) -> dict[str, str]:
    """The sender's signed advertisement of :func:`transcript_digest` (to send beside the blobs)."""
    return signer.advertise(study, round_id, transcript_digest(kind, terms, payload), kind=kind)


def verify_transcript(verifier: Verifier, advertisement: object, *, sender: str, study: str, round_id: str,
                      kind: str, terms: Mapping[str, Any], payload: Sequence[bytes | memoryview]) -> None:
    """Accept ``payload`` only if ``sender`` signed exactly these blobs under exactly these terms.

    Raises
    ------
    IdentityError
        No advertisement, a signature that does not verify against the pins, another signer than
        ``sender``, or a digest of other blobs or other terms.
    """
    fix = "restart the round; if it recurs, the relay is substituting what the parties sent"
    if not isinstance(advertisement, Mapping):
        raise IdentityError(f"the {kind} of {sender!r} arrived without its signature", fix)
    party, digest = verifier.verify(advertisement, study=study, round_id=round_id, kind=kind)
    if party != sender:
        raise IdentityError(f"the {kind} relayed as {sender!r}'s are signed by {party!r}", fix)
    if digest != transcript_digest(kind, terms, payload):
        raise IdentityError(f"the {kind} relayed as {sender!r}'s are not what it signed for this round", fix)


def blob_arrays(name: str, payload: list[bytes]) -> dict[str, np.ndarray]:
    """Byte strings as two message arrays: ``name`` (their concatenation, uint8) and ``name + "_lengths"``.

    ``payload`` is emptied as it is copied, so a blob is freed once it is in the array (a score round's 0.7 GB
    of ciphertexts is never held twice when the caller keeps no other reference).
    """
    lengths = np.array([len(b) for b in payload], dtype=np.int64)
    data = np.empty(int(lengths.sum()), dtype=np.uint8)
    at = 0
    payload.reverse()
    while payload:
        blob = payload.pop()
        data[at:at + len(blob)] = np.frombuffer(blob, dtype=np.uint8)
        at += len(blob)
    return {name: data, f"{name}_lengths": lengths}


def blobs(message: Message, name: str) -> list[memoryview]:
    """The byte strings :func:`blob_arrays` packed into ``message``, as views of its array (no copy: a relayed
    score round holds 0.7 GB of them); a :class:`ProtocolError` if malformed."""
    data, lengths = message.array(name), message.array(f"{name}_lengths")
    fix = "resend the message as the sending party built it"
    if data.dtype != np.uint8 or data.ndim != 1 or lengths.ndim != 1 or lengths.dtype.kind not in "iu":
        raise ProtocolError(f"{message.operation} {name} is not a uint8 array with integer lengths", fix)
    if lengths.size > MAX_BLOBS or np.any(lengths < 0) or int(lengths.sum()) != data.size:
        raise ProtocolError(f"{message.operation} {name}: {lengths.size} lengths do not split {data.size} bytes", fix)
    raw = memoryview(np.ascontiguousarray(data)).cast("B")
    ends = np.cumsum(lengths)
    return [raw[int(e - n):int(e)] for e, n in zip(ends, lengths, strict=True)]
