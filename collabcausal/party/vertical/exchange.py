"""What the two parties of a vertical round send each other through the relay, signed and checked.

The key owner sends its public context (with its signed advertisement) and its encrypted columns
(signed with the round's terms: :func:`columns_reply`); the evaluator accepts them only from the peer
the terms name, verified against its pinned peers (:func:`verified_columns`), and returns its totals
signed (:func:`totals_reply`), which the key owner checks before it opens anything (:func:`verified_totals`).
All checks come before the receiving party charges or computes.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from collabcausal.errors import ProtocolError
from collabcausal.messages import Message
from collabcausal.party.node import Party
from collabcausal.party.secagg import require_identity
from collabcausal.party.vertical.request import VerticalRequest
from collabcausal.vertical.advertisement import advertise_context, verified_public_context
from collabcausal.vertical.column import RelayedColumn
from collabcausal.vertical.context import PublicContext
from collabcausal.vertical.keys import KeyOwner
from collabcausal.vertical.transcript import (
    COLUMNS_KIND,
    TOTALS_KIND,
    blob_arrays,
    blobs,
    sign_transcript,
    verify_transcript,
)

CONTEXT = "ckks_context"
COLUMNS = "ckks_columns"
TOTALS = "ckks_totals"
"""Message arrays of ciphertext bytes (capped by ``max_ciphertext_bytes``, not ``max_request_bytes``)."""
SIGNS = "the vertical rounds' ciphertexts"
"""What a party's certificate signs here (named in the refusal of a party without one)."""

__all__ = ["COLUMNS", "CONTEXT", "TOTALS", "columns_reply", "totals_reply", "verified_columns", "verified_totals"]


def columns_reply(party: Party, request: Message, req: VerticalRequest, owner: KeyOwner,
                  columns: Iterable[RelayedColumn], terms: dict[str, Any]) -> Message:
    """The key owner's reply: its columns of ``req``'s batch, signed for ``terms``, this batch and the fingerprint
    of its public context, which batch 0 carries with its own signed advertisement (each column serialized as it
    comes, so an iterator of columns is never held whole)."""
    signer = require_identity(party, SIGNS).signer
    context = owner.public_context()
    flat: list[bytes | memoryview] = []
    counts = []
    for column in columns:
        chunks = column.to_bytes()
        flat += chunks
        counts.append(len(chunks))
    signed = _signed(terms, counts, req.batch, owner.public.fingerprint)
    params: dict[str, Any] = {"chunks": counts, "batch": req.batch,
                              "columns_advertisement": sign_transcript(signer, req.study, req.round_id, COLUMNS_KIND,
                                                                       signed, flat)}
    if req.batch > 0:
        return Message(request.operation, params, blob_arrays(COLUMNS, flat))
    params["context_advertisement"] = advertise_context(signer, req.study, req.round_id, context)
    return Message(request.operation, params, blob_arrays(CONTEXT, [context]) | blob_arrays(COLUMNS, flat))


def verified_columns(party: Party, request: Message, req: VerticalRequest, terms: dict[str, Any],
                     context: PublicContext | None = None) -> tuple[PublicContext, list[RelayedColumn]]:
    """The key owner's context and its columns of ``req``'s batch as relayed in ``request``, accepted only if the
    peer signed them for exactly ``terms``, this batch and this context (and this round); checked before the
    evaluator charges. Batch 0 carries the context (``context`` None); later batches are checked against batch
    0's. The columns are read into ciphertexts when used (:class:`~collabcausal.vertical.column.RelayedColumn`)."""
    p = request.params
    verifier = require_identity(party, SIGNS).verifier
    sent = [bytes(b) for b in blobs(request, CONTEXT)] if CONTEXT in request.arrays else []
    flat = blobs(request, COLUMNS)
    counts = p.get("chunks")
    if len(sent) != (context is None) or not isinstance(counts, list) or not all(
            isinstance(c, int) and not isinstance(c, bool) and c > 0 for c in counts) or sum(counts) != len(flat):
        raise ProtocolError(f"{request.operation}: the relayed context or column chunks are malformed",
                            "relay the key owner's reply unchanged")
    if context is None:
        context = verified_public_context(sent[0], _mapping(p.get("context_advertisement")), verifier,
                                          key_owner=req.peer, study=req.study, round_id=req.round_id)
    verify_transcript(verifier, p.get("columns_advertisement"), sender=req.peer, study=req.study,
                      round_id=req.round_id, kind=COLUMNS_KIND,
                      terms=_signed(terms, counts, req.batch, context.fingerprint), payload=flat)
    ends = np.cumsum(counts)
    columns = [RelayedColumn(context, flat[int(e - c):int(e)], req.batch_size)
               for e, c in zip(ends, counts, strict=True)]
    return context, columns


def _signed(terms: dict[str, Any], counts: list[int], batch: int, context: str) -> dict[str, Any]:
    """What a batch of columns is signed for: the round's terms, its chunk counts, its batch and the key's context."""
    return terms | {"chunks": counts, "batch": batch, "context": context}


def totals_reply(party: Party, request: Message, req: VerticalRequest, totals: Sequence[bytes],
                 terms: dict[str, Any], params: dict[str, Any]) -> Message:
    """The evaluator's reply: its totals, signed for ``terms`` and this round (``params`` added as they are)."""
    signer = require_identity(party, SIGNS).signer
    signature = sign_transcript(signer, req.study, req.round_id, TOTALS_KIND, terms, totals)
    return Message(request.operation, params | {"totals_advertisement": signature}, blob_arrays(TOTALS, totals))


def verified_totals(party: Party, request: Message, peer: str, terms: dict[str, Any], expected: int
                    ) -> list[memoryview]:
    """The totals relayed in ``request``, accepted only if ``peer`` signed these bytes for ``terms``."""
    totals = blobs(request, TOTALS)
    if len(totals) != expected:
        raise ProtocolError(f"{request.operation}: {len(totals)} totals for a round of {expected}",
                            "relay the evaluator's reply unchanged")
    verifier = require_identity(party, SIGNS).verifier
    verify_transcript(verifier, request.params.get("totals_advertisement"), sender=peer, study=str(terms["study"]),
                      round_id=str(terms["round"]), kind=TOTALS_KIND, terms=terms, payload=totals)
    return totals


def _mapping(value: object) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ProtocolError("the key owner's context arrived without its advertisement",
                            "relay the key owner's reply unchanged")
    return value
