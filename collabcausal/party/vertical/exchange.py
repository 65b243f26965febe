"""What the two parties of a vertical round send each other through the relay, signed and checked.

The key owner sends its public context (with its signed advertisement) and its encrypted columns
(signed with the round's terms: :func:`columns_reply`); the evaluator accepts them only from the peer
the terms name, verified against its pinned peers (:func:`verified_columns`), and returns its totals
signed (:func:`totals_reply`), which the key owner checks before it opens anything (:func:`verified_totals`).
All checks come before the receiving party charges or computes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from collabcausal.errors import IdentityError, PolicyError, ProtocolError
from collabcausal.messages import Message
from collabcausal.party.node import Party
from collabcausal.party.secagg import Identity, require_identity, require_peers
from collabcausal.party.vertical.request import VerticalRequest
from collabcausal.vertical.advertisement import advertise_context, verified_public_context
from collabcausal.vertical.column import RelayedColumn
from collabcausal.vertical.context import PublicContext
from collabcausal.vertical.keys import KeyOwner
from collabcausal.vertical.relay import COLUMNS, CONTEXT, SEALED_FOR, SEALED_FROM, TOTALS, totals_keys
from collabcausal.vertical.sealed import Envelope, seal, seal_round, unseal
from collabcausal.vertical.transcript import (
    COLUMNS_KIND,
    SEALED_KIND,
    TOTALS_KIND,
    blob_arrays,
    blobs,
    sign_transcript,
    verify_transcript,
)

SIGNS = "the vertical rounds' ciphertexts"
"""What a party's certificate signs here (named in the refusal of a party without one)."""
CONTEXT_PARAMETERS = frozenset({"context_advertisement"})
"""The request parameter :func:`verified_context` reads (the key owner's signed context)."""
COLUMNS_PARAMETERS = CONTEXT_PARAMETERS | {"chunks", "columns_advertisement"}
"""The request parameters :func:`verified_columns` reads (the key owner's context and its signed columns)."""
SEAL_KEYS = "seal_keys"
"""The request parameter whose round keys :func:`receiver_keys` verifies (the receivers of this party's sealed
ciphertexts)."""


def pinned_identity(party: Party) -> Identity:
    """The party's identity for the vertical rounds, refused unless it pins its peers: with ``peers = "any"`` the
    coordinator, holding the study CA, could mint a peer's certificate and so substitute its own CKKS context (and
    read the evaluator's totals of its own columns, e.g. one subject's value scaled up) or its own round key for
    sealed ciphertexts (and read them)."""
    identity = require_identity(party, SIGNS)
    if not require_peers(identity).pinned:
        raise PolicyError(f"party {party.name!r} trusts the coordinator's roster (peers = \"any\"), so a certificate "
                          "the coordinator mints could stand for a peer in the vertical rounds",
                          "pin the row group's parties in [secure_aggregation] peers (`collabcausal certs fingerprint` "
                          "at each)")
    return identity


__all__ = ["COLUMNS_PARAMETERS", "CONTEXT_PARAMETERS", "SEAL_KEYS", "columns_reply", "pinned_identity", "receiver_keys",
           "sealed_columns", "sealed_reply", "totals_reply", "verified_columns", "verified_context", "verified_totals"]


def columns_reply(party: Party, request: Message, req: VerticalRequest, owner: KeyOwner,
                  columns: Iterable[RelayedColumn], terms: dict[str, Any]) -> Message:
    """The key owner's reply: its columns of ``req``'s batch, signed for ``terms``, this batch and the fingerprint
    of its public context, which batch 0 carries with its own signed advertisement (each column serialized as it
    comes, so an iterator of columns is never held whole)."""
    signer = pinned_identity(party).signer
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


def verified_context(party: Party, request: Message, req: VerticalRequest, key_owner: str,
                     context: PublicContext | None = None) -> PublicContext:
    """The key owner's public context as relayed with ``req``'s batch 0 (``context`` None), accepted only if
    ``key_owner`` signed it for this round (:func:`~collabcausal.vertical.advertisement.verified_public_context`);
    later batches carry none and keep batch 0's ``context``."""
    sent = [bytes(b) for b in blobs(request, CONTEXT)] if CONTEXT in request.arrays else []
    if len(sent) != (context is None):
        raise ProtocolError(f"{request.operation}: the key owner's context came with batch {req.batch}",
                            "relay the key owner's context with batch 0 only, unchanged")
    if context is not None:
        return context
    verifier = pinned_identity(party).verifier
    return verified_public_context(sent[0], _mapping(request.params.get("context_advertisement")), verifier,
                                   key_owner=key_owner, study=req.study, round_id=req.round_id)


def verified_columns(party: Party, request: Message, req: VerticalRequest, terms: dict[str, Any], key_owner: str,
                     context: PublicContext | None = None) -> tuple[PublicContext, list[RelayedColumn]]:
    """The key owner's context and its columns of ``req``'s batch as relayed in ``request``, accepted only if
    ``key_owner`` signed them for exactly ``terms``, this batch and this context (and this round); checked before
    the evaluator charges. Batch 0 carries the context (``context`` None); later batches are checked against batch
    0's. The columns are read into ciphertexts when used (:class:`~collabcausal.vertical.column.RelayedColumn`)."""
    p = request.params
    verifier = pinned_identity(party).verifier
    flat = blobs(request, COLUMNS)
    counts = p.get("chunks")
    if not _counts(counts, len(flat)):
        raise ProtocolError(f"{request.operation}: the relayed column chunks are malformed",
                            "relay the key owner's reply unchanged")
    context = verified_context(party, request, req, key_owner, context)
    verify_transcript(verifier, p.get("columns_advertisement"), sender=key_owner, study=req.study,
                      round_id=req.round_id, kind=COLUMNS_KIND,
                      terms=_signed(terms, counts, req.batch, context.fingerprint), payload=flat)
    return context, _columns(context, flat, counts, req.batch_size)


def sealed_reply(party: Party, req: VerticalRequest, terms: dict[str, Any], context: PublicContext,
                 columns: Sequence[Sequence[bytes]], keys: Mapping[int, bytes]
                 ) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """This party's ``columns`` (each a list of chunk bytes, under ``context``'s key) sealed to each receiver of
    ``keys`` (row-group index -> its verified round key, :func:`receiver_keys`); each sealing signed for ``terms``,
    this batch, the context and the receiver. Returns the reply's params (``sealed_for``: per receiver index its
    ephemeral key, chunk counts and signature) and arrays (``sealed_for_<index>``)."""
    signer = pinned_identity(party).signer
    counts = [len(c) for c in columns]
    flat = [b for c in columns for b in c]
    params: dict[str, Any] = {}
    arrays: dict[str, np.ndarray] = {}
    for r, key in keys.items():
        name = req.parties[r]
        ephemeral, sealed = seal(key, flat, Envelope(req.study, req.round_id, req.batch, party.name, name))
        signed = _signed(terms, counts, req.batch, context.fingerprint) | {"receiver": name,
                                                                          "ephemeral": ephemeral.hex()}
        params[str(r)] = {"ephemeral": ephemeral.hex(), "chunks": counts, "advertisement": sign_transcript(
            signer, req.study, req.round_id, SEALED_KIND, signed, sealed)}
        arrays |= blob_arrays(f"{SEALED_FOR}_{r}", sealed)
    return {SEALED_FOR: params}, arrays


def sealed_columns(party: Party, request: Message, req: VerticalRequest, terms: dict[str, Any],
                   context: PublicContext, senders: Sequence[int], expected: Mapping[int, int]
                   ) -> dict[int, list[RelayedColumn]]:
    """The columns each of ``senders`` (row-group indices) sealed to this party, as relayed in ``request``
    (``sealed_from``: per sender its ephemeral key, chunk counts and signature; arrays ``sealed_from_<index>``):
    accepted only if the sender signed exactly these sealed bytes for ``terms``, this batch, ``context`` and this
    receiver, and they open with this party's round key for :func:`~collabcausal.vertical.sealed.seal_round`;
    ``expected[s]`` columns from sender ``s``. Checked before this party charges."""
    relayed = request.params.get(SEALED_FROM)
    fix = "relay each sender's sealed ciphertexts unchanged, to the party they were sealed for"
    if not isinstance(relayed, dict):
        raise ProtocolError(f"{request.operation}: no sealed ciphertexts came from {req.parties[senders[0]]!r}", fix)
    key = _own_seal_key(party, req)
    verifier = pinned_identity(party).verifier
    out = {}
    for s in senders:
        entry, name = relayed.get(str(s)), req.parties[s]
        if not isinstance(entry, dict) or f"{SEALED_FROM}_{s}" not in request.arrays:
            raise ProtocolError(f"{request.operation}: no sealed ciphertexts came from {name!r}", fix)
        sealed = blobs(request, f"{SEALED_FROM}_{s}")
        counts, ephemeral = entry.get("chunks"), entry.get("ephemeral")
        if not isinstance(ephemeral, str) or not isinstance(counts, list) or len(counts) != expected[s]:
            raise ProtocolError(f"{request.operation}: the ciphertexts sealed by {name!r} are malformed", fix)
        signed = _signed(terms, counts, req.batch, context.fingerprint) | {"receiver": party.name,
                                                                          "ephemeral": ephemeral}
        verify_transcript(verifier, entry.get("advertisement"), sender=name, study=req.study, round_id=req.round_id,
                          kind=SEALED_KIND, terms=signed, payload=sealed)
        try:
            public = bytes.fromhex(ephemeral)
        except ValueError:
            raise ProtocolError(f"{request.operation}: the ephemeral key sealed by {name!r} is not hex", fix) from None
        flat = unseal(key, public, sealed, Envelope(req.study, req.round_id, req.batch, name, party.name))
        if not _counts(counts, len(flat)):
            raise ProtocolError(f"{request.operation}: the ciphertexts sealed by {name!r} are malformed", fix)
        out[s] = _columns(context, flat, counts, req.batch_size)
    return out


def receiver_keys(party: Party, req: VerticalRequest, receivers: Sequence[int], advertisements: object
                  ) -> dict[int, bytes]:
    """Each receiver's round key for this round's sealed ciphertexts (row-group index -> 32 bytes), as relayed in
    ``advertisements`` (one per receiver, from ``secagg_keys`` for :func:`~collabcausal.vertical.sealed.seal_round`);
    refused (checked before any charge) unless signed by that receiver for this round, and for a party that does not
    pin its peers (``peers = "any"``: the coordinator could mint one)."""
    verifier = pinned_identity(party).verifier
    if not isinstance(advertisements, dict):
        raise ProtocolError("the receivers' round keys for sealed ciphertexts are missing",
                            "ask each receiver for secagg_keys of the round's sealed id and relay them")
    keys = {}
    for r in receivers:
        name = req.parties[r]
        advertisement = advertisements.get(str(r))
        if not isinstance(advertisement, dict):
            raise ProtocolError(f"no round key of {name!r} came to seal ciphertexts to",
                                "ask each receiver for secagg_keys of the round's sealed id and relay them")
        signer, keys[r] = verifier.verify(advertisement, study=req.study, round_id=seal_round(req.round_id))
        if signer != name:
            raise IdentityError(f"the round key relayed as {name!r}'s is advertised by {signer!r}",
                                "restart the round; if it recurs, the relay is substituting keys")
    return keys


def _own_seal_key(party: Party, req: VerticalRequest) -> Any:
    """This party's round key for the sealed ciphertexts of ``req``'s round (made by ``secagg_keys``)."""
    state = party.secagg_rounds.get(seal_round(req.round_id))
    if state is None or state.study != req.study:
        raise PolicyError(f"party {party.name!r} holds no round key for the sealed ciphertexts of {req.round_id!r}",
                          f"ask it for secagg_keys of round {seal_round(req.round_id)!r} first")
    return state.private_key


def _counts(counts: object, total: int) -> bool:
    return isinstance(counts, list) and all(isinstance(c, int) and not isinstance(c, bool) and c > 0
                                            for c in counts) and sum(counts) == total


def _columns(context: PublicContext, flat: Sequence[bytes | memoryview], counts: list[int], n: int
             ) -> list[RelayedColumn]:
    ends = np.cumsum(counts)
    return [RelayedColumn(context, flat[int(e - c):int(e)], n) for e, c in zip(ends, counts, strict=True)]


def _signed(terms: dict[str, Any], counts: list[int], batch: int, context: str) -> dict[str, Any]:
    """What a batch of columns is signed for: the round's terms, its chunk counts, its batch and the key's context."""
    return terms | {"chunks": counts, "batch": batch, "context": context}


def totals_reply(party: Party, request: Message, req: VerticalRequest, totals: Sequence[bytes],
                 terms: dict[str, Any], params: dict[str, Any]) -> Message:
    """The evaluator's reply: its totals, signed for ``terms`` and this round (``params`` added as they are)."""
    signer = pinned_identity(party).signer
    signature = sign_transcript(signer, req.study, req.round_id, TOTALS_KIND, terms, totals)
    return Message(request.operation, params | {"totals_advertisement": signature}, blob_arrays(TOTALS, totals))


def verified_totals(party: Party, request: Message, peer: str, terms: dict[str, Any], expected: int,
                    evaluator: int = 0) -> list[memoryview]:
    """The ``evaluator``-th evaluator's totals relayed in ``request`` (:func:`totals_keys`), accepted only if
    ``peer`` signed these bytes for ``terms``."""
    array, param = totals_keys(evaluator)
    totals = blobs(request, array) if array in request.arrays else []
    if len(totals) != expected:
        raise ProtocolError(f"{request.operation}: {len(totals)} totals of {peer!r} for a round of {expected}",
                            "relay the evaluator's reply unchanged")
    verifier = pinned_identity(party).verifier
    verify_transcript(verifier, request.params.get(param), sender=peer, study=str(terms["study"]),
                      round_id=str(terms["round"]), kind=TOTALS_KIND, terms=terms, payload=totals)
    return totals


def _mapping(value: object) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ProtocolError("the key owner's context arrived without its advertisement",
                            "relay the key owner's reply unchanged")
    return value
