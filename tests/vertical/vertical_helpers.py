"""Helpers of the encrypted-arithmetic tests: what only a test may do with a key owner's secret key."""

from __future__ import annotations

import numpy as np
from tenseal import sealapi

from collabcausal.vertical import EncryptedColumn, KeyOwner
from collabcausal.vertical.seal_io import load_seal, untag


def relay(owner: KeyOwner, evaluator, values: np.ndarray) -> EncryptedColumn:
    """``values`` encrypted by ``owner`` and read by the evaluator from the bytes, as over the relay."""
    return EncryptedColumn.from_bytes(evaluator, owner.encrypt(values).to_bytes(), values.size)


def decrypt_column(owner: KeyOwner, column: EncryptedColumn) -> np.ndarray:
    """Every value of ``column``, un-noised (a test's view: the key owner's API never returns this)."""
    secret = owner._context.secret_key()
    values = np.concatenate([np.asarray(chunk.decrypt(secret)) for chunk in column._chunks])
    return values[: column.n]


def decrypt_slots(owner: KeyOwner, total: bytes) -> np.ndarray:
    """All slots of a returned total as complex numbers, un-noised (what a curious key owner sees)."""
    seal_context = owner._context.seal_context().data
    ciphertext = sealapi.Ciphertext()
    load_seal(ciphertext, seal_context, untag(total, owner.public.fingerprint, "a total"), "a total")
    plain = sealapi.Plaintext()
    sealapi.Decryptor(seal_context, owner._context.secret_key().data).decrypt(ciphertext, plain)
    return np.asarray(sealapi.CKKSEncoder(seal_context).decode_complex(plain))
