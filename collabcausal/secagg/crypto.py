"""Primitives of secure aggregation, all from the ``cryptography`` library.

* **Key agreement**: one ephemeral X25519 key pair per party, study and round
  (:func:`generate_round_key`); its public key travels as 32 raw bytes (:func:`public_bytes`).
* **Pairwise seed** (:func:`pairwise_seed`): X25519 shared secret, then HKDF-SHA256 to 32 bytes
  with an ``info`` that binds the study, the round, both party names (sorted, so both ends derive
  the same seed) and the release label. A seed therefore never serves two rounds, two releases or
  two pairs.
* **Mask expansion** (:func:`expand_mask`): the ChaCha20 keystream under the seed (a vetted stream
  cipher used as the PRG, as in Bonawitz et al. 2017, section 4) read as little-endian uint64.

No primitive is home-made: X25519 (RFC 7748), HKDF (RFC 5869) and ChaCha20 (RFC 8439) are the
library's. :func:`canonical_bytes` is the one unambiguous byte encoding of a tuple of strings used
both for HKDF's ``info`` and for the signed key advertisements (identity.py).
"""

from __future__ import annotations

import hashlib

import numpy as np
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from numpy.typing import NDArray

from collabcausal.errors import IdentityError, InputError

PUBLIC_KEY_BYTES = 32
SEED_BYTES = 32
DOMAIN = "collabcausal-secagg-v1"
"""Domain-separation tag leading every encoded tuple (key derivation and signatures)."""

__all__ = ["canonical_bytes", "expand_mask", "generate_round_key", "pairwise_seed", "public_bytes"]


def generate_round_key() -> X25519PrivateKey:
    """A fresh ephemeral X25519 private key for one (study, round); never reuse it for another round."""
    return X25519PrivateKey.generate()


def public_bytes(key: X25519PrivateKey) -> bytes:
    """The 32 raw bytes of ``key``'s public key (RFC 7748 encoding)."""
    return key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def canonical_bytes(*fields: str) -> bytes:
    """``DOMAIN`` and ``fields`` as length-prefixed UTF-8: distinct tuples never encode alike."""
    out = bytearray()
    for field in (DOMAIN, *fields):
        data = field.encode("utf-8")
        out += len(data).to_bytes(4, "big") + data
    return bytes(out)


def pairwise_seed(
    own_key: X25519PrivateKey, peer_public: bytes, *, study: str, round_id: str, names: tuple[str, str], label: str
) -> bytes:
    """The 32-byte seed a pair of parties shares for one release of one round.

    ``HKDF-SHA256(X25519(own_key, peer_public), salt=None, info=canonical_bytes("pair-seed", study,
    round_id, min(names), max(names), label))``; both ends compute the same value.

    Raises
    ------
    IdentityError
        ``peer_public`` is not 32 bytes or is a low-order point (the shared secret would be zero).
    """
    if len(peer_public) != PUBLIC_KEY_BYTES:
        raise IdentityError(
            f"an X25519 public key is {PUBLIC_KEY_BYTES} bytes, got {len(peer_public)}", "re-advertise the round's keys"
        )
    try:
        shared = own_key.exchange(X25519PublicKey.from_public_bytes(peer_public))
    except ValueError:
        raise IdentityError(
            "a peer's X25519 public key is a low-order point", "restart the round with fresh keys"
        ) from None
    low, high = sorted(names)
    info = canonical_bytes("pair-seed", study, round_id, low, high, label)
    return HKDF(algorithm=hashes.SHA256(), length=SEED_BYTES, salt=None, info=info).derive(shared)


def expand_mask(seed: bytes, label: str, length: int) -> NDArray[np.uint64]:
    """``length`` pseudorandom uint64 values: the ChaCha20 keystream under ``seed``.

    The 16-byte nonce of the library's ChaCha20 is a zero 32-bit block counter followed by the first
    12 bytes of SHA-256(``label``), so a stream of up to 256 GiB never wraps. Each uint64 is 8
    keystream bytes read little-endian: uniform on [0, 2^64) if the keystream is.
    """
    if len(seed) != SEED_BYTES:
        raise InputError(f"a mask seed is {SEED_BYTES} bytes, got {len(seed)}", "derive it with pairwise_seed()")
    if int(length) < 0:
        raise InputError(f"mask length must be >= 0, got {length}", "pass the number of entries to mask")
    nonce = bytes(4) + hashlib.sha256(label.encode("utf-8")).digest()[:12]
    stream = Cipher(algorithms.ChaCha20(seed, nonce), mode=None).encryptor().update(bytes(8 * int(length)))
    return np.frombuffer(stream, dtype="<u8").astype(np.uint64)
