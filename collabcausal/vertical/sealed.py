"""Ciphertexts sealed end to end to one pinned party, so the relay cannot hand them to anyone else.

With three or more column groups a party passes on intermediate ciphertexts under a key it does not own: its
products of the label holder's encrypted arm with its own columns (statistics), its parts of the linear predictors
under the scores key owner's key (scores). Relayed as they are, a coordinator could hand them to the key's owner,
who would decrypt another party's per-subject values. So the sender seals them to the one party meant to compute on
them, whose X25519 key for the round it verified against its pins (the receiver's signed advertisement,
:class:`~collabcausal.secagg.identity.Verifier`):

* **key agreement**: a fresh ephemeral X25519 key pair of the sender per sealing, with the receiver's advertised
  round key (RFC 7748);
* **key derivation**: HKDF-SHA256 (RFC 5869) of the shared secret, ``info`` binding the study, the round, the
  batch, the sender, the receiver and the ephemeral public key (:func:`~collabcausal.secagg.crypto.canonical_bytes`);
* **encryption**: AES-256-GCM (NIST SP 800-38D) of each blob, nonce the blob's index (a key seals one set of
  blobs, once), the associated data the index and the number of blobs, so none can be dropped, reordered or
  moved to another set unnoticed.

All three are the ``cryptography`` library's. The sender also signs the sealed bytes with its certificate
(:mod:`~collabcausal.vertical.transcript`), so the receiver knows who sealed them; the seal keeps them from
everyone else, the coordinator and the key owner included.
"""

from __future__ import annotations

from collections.abc import Sequence

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from collabcausal.errors import ProtocolError
from collabcausal.secagg.crypto import PUBLIC_KEY_BYTES, canonical_bytes, generate_round_key, public_bytes

KEY_BYTES = 32
NONCE_BYTES = 12

__all__ = ["Envelope", "Opened", "seal", "seal_round", "unseal"]


def seal_round(round_id: str) -> str:
    """The id of the round key a receiver advertises for ``round_id``'s sealed ciphertexts (``secagg_keys``)."""
    return f"{round_id}/sealed"


class Envelope:
    """Where sealed blobs go: study, round, batch, sender and receiver names (all bound into the key)."""

    def __init__(self, study: str, round_id: str, batch: int, sender: str, receiver: str) -> None:
        self.fields = (study, round_id, str(int(batch)), sender, receiver)

    def _key(self, shared: bytes, ephemeral: bytes) -> AESGCM:
        info = canonical_bytes("vertical-sealed", *self.fields, ephemeral.hex())
        return AESGCM(HKDF(algorithm=hashes.SHA256(), length=KEY_BYTES, salt=None, info=info).derive(shared))


def _exchange(own: X25519PrivateKey, peer_public: bytes, low_order: ProtocolError) -> bytes:
    """The X25519 shared secret of ``own`` and ``peer_public``; ``low_order`` raised for a low-order point."""
    try:
        return own.exchange(X25519PublicKey.from_public_bytes(bytes(peer_public)))
    except ValueError:
        raise low_order from None


def _associated(index: int, count: int) -> bytes:
    return canonical_bytes("vertical-sealed-blob", str(index), str(count))


def _nonce(index: int) -> bytes:
    return index.to_bytes(NONCE_BYTES, "big")


def seal(receiver_public: bytes, blobs: Sequence[bytes | memoryview], envelope: Envelope) -> tuple[bytes, list[bytes]]:
    """``blobs`` sealed to the holder of ``receiver_public`` (its verified round key): the ephemeral public key
    (32 bytes, sent along) and each blob's AES-GCM ciphertext."""
    if len(receiver_public) != PUBLIC_KEY_BYTES:
        raise ProtocolError(f"a receiver's round key is {PUBLIC_KEY_BYTES} bytes, got {len(receiver_public)}",
                            "relay the receiver's advertisement unchanged")
    ephemeral = generate_round_key()
    ephemeral_public = public_bytes(ephemeral)
    aead = envelope._key(_exchange(ephemeral, receiver_public, ProtocolError(
        "the receiver's round key is a low-order point", "restart the round with fresh keys")), ephemeral_public)
    count = len(blobs)
    return ephemeral_public, [aead.encrypt(_nonce(i), bytes(b), _associated(i, count)) for i, b in enumerate(blobs)]


class Opened:
    """One sealed ciphertext of a set that opened, decrypted again each time it is read (``bytes(blob)``): a receiver
    holding hundreds of megabytes of sealed ciphertexts never holds them twice (:func:`unseal`)."""

    __slots__ = ("_aead", "_count", "_index", "_sealed")

    def __init__(self, aead: AESGCM, sealed: bytes | memoryview, index: int, count: int) -> None:
        self._aead, self._sealed, self._index, self._count = aead, sealed, index, count

    def __bytes__(self) -> bytes:
        return self._aead.decrypt(_nonce(self._index), bytes(self._sealed), _associated(self._index, self._count))


def unseal(own: X25519PrivateKey, ephemeral_public: bytes, sealed: Sequence[bytes | memoryview],
           envelope: Envelope) -> list[Opened]:
    """The blobs sealed to ``own``'s public key under ``envelope``, each checked to open now (so a refusal comes
    before the receiver charges) and decrypted again when read (:class:`Opened`); a :class:`ProtocolError` in one
    line if any was sealed to another key or envelope, altered, dropped or reordered."""
    fix = "relay the sender's sealed ciphertexts unchanged, to the party they were sealed for"
    if len(ephemeral_public) != PUBLIC_KEY_BYTES:
        raise ProtocolError(f"sealed ciphertexts came with a {len(ephemeral_public)}-byte ephemeral key", fix)
    aead = envelope._key(_exchange(own, ephemeral_public, ProtocolError(
        "sealed ciphertexts came with a low-order ephemeral key", fix)), bytes(ephemeral_public))
    opened = [Opened(aead, b, i, len(sealed)) for i, b in enumerate(sealed)]
    try:
        for blob in opened:
            bytes(blob)
    except InvalidTag:
        _, round_id, batch, sender, receiver = envelope.fields
        raise ProtocolError(f"the ciphertexts {sender!r} sealed for {receiver!r} (round {round_id!r}, batch {batch}) "
                            "do not open with this party's round key", fix) from None
    return opened
