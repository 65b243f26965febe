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
from collabcausal.vertical.column import EncryptedColumn, RelayedColumn
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
                  columns: Iterable[EncryptedColumn], terms: dict[str, Any]) -> Message:
    """The key owner's reply: its public context, its columns, both signed for ``terms`` and this round (each
    column serialized as it comes, so an iterator of columns is never held whole)."""
    signer = require_identity(party, SIGNS).signer
    context = owner.public_context()
    flat: list[bytes] = []
    counts = []
    for column in columns:
        chunks = column.to_bytes()
        flat += chunks
        counts.append(len(chunks))
    signed = terms | {"chunks": counts}
    params = {"chunks": signed["chunks"],
              "context_advertisement": advertise_context(signer, req.study, req.round_id, context),
              "columns_advertisement": sign_transcript(signer, req.study, req.round_id, COLUMNS_KIND, signed,
                                                       [context, *flat])}
    return Message(request.operation, params, blob_arrays(CONTEXT, [context]) | blob_arrays(COLUMNS, flat))


def verified_columns(party: Party, request: Message, req: VerticalRequest, terms: dict[str, Any]
                     ) -> tuple[PublicContext, list[RelayedColumn]]:
    """The key owner's context and columns as relayed in ``request``, accepted only if the peer signed them
    for exactly ``terms`` (and this round); checked before the evaluator charges. The columns are read into
    ciphertexts when used (:class:`~collabcausal.vertical.column.RelayedColumn`)."""
    p = request.params
    verifier = require_identity(party, SIGNS).verifier
    context = [bytes(b) for b in blobs(request, CONTEXT)]
    flat = blobs(request, COLUMNS)
    counts = p.get("chunks")
    if len(context) != 1 or not isinstance(counts, list) or not all(
            isinstance(c, int) and not isinstance(c, bool) and c > 0 for c in counts) or sum(counts) != len(flat):
        raise ProtocolError(f"{request.operation}: the relayed context or column chunks are malformed",
                            "relay the key owner's reply unchanged")
    signed = terms | {"chunks": counts}
    verify_transcript(verifier, p.get("columns_advertisement"), sender=req.peer, study=req.study,
                      round_id=req.round_id, kind=COLUMNS_KIND, terms=signed, payload=[context[0], *flat])
    public = verified_public_context(context[0], _mapping(p.get("context_advertisement")), verifier,
                                     key_owner=req.peer, study=req.study, round_id=req.round_id)
    ends = np.cumsum(counts)
    columns = [RelayedColumn(public, flat[int(e - c):int(e)], req.n_subjects)
               for e, c in zip(ends, counts, strict=True)]
    return public, columns


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
