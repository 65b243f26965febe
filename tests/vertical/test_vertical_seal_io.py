"""Framing of the CKKS blobs: parts come back exactly, anything else is refused."""

from __future__ import annotations

import numpy as np
import pytest
import tenseal as ts
from tenseal import sealapi

from collabcausal.errors import ProtocolError
from collabcausal.vertical.seal_io import frame, save_seal, tag, tenseal_vector, unframe, untag


def test_parts_round_trip_including_empty_ones():
    parts = [b"header", b"", b"\x00" * 1000]
    assert unframe(frame(*parts), 3, "blob") == parts


@pytest.mark.parametrize(
    "mangle",
    [lambda b: b[:-1], lambda b: b + b"x", lambda b: b"other" + b[5:], lambda b: "text"],
    ids=["truncated", "trailing", "magic", "not-bytes"],
)
def test_a_mangled_blob_is_refused(mangle):
    with pytest.raises(ProtocolError, match="not a collabcausal CKKS blob of 2 parts"):
        unframe(mangle(frame(b"a", b"bc")), 2, "the blob")


def test_a_tagged_payload_comes_back_only_under_its_own_context():
    tagged = tag("ab" * 32, b"ciphertext")
    assert untag(tagged, "ab" * 32, "a chunk") == b"ciphertext"
    with pytest.raises(ProtocolError, match="a chunk is under another CKKS context"):
        untag(tagged, "cd" * 32, "a chunk")


def test_a_seal_ciphertext_reads_as_tenseals_vector(owner1, evaluator1):
    """tenseal_vector wraps a SEAL ciphertext as TenSEAL's serialized CKKSVector: TenSEAL reads it whole."""
    parameters = owner1.parameters
    plain, ciphertext = sealapi.Plaintext(), sealapi.Ciphertext()
    evaluator1.encoder.encode([0.25] * parameters.slot_count, 2.0**parameters.scale_bits, plain)
    evaluator1.encryptor.encrypt(plain, ciphertext)
    vector = ts.ckks_vector_from(evaluator1.context, tenseal_vector(save_seal(ciphertext), parameters.slot_count,
                                                                    2.0**parameters.scale_bits))
    assert vector.size() == parameters.slot_count
    values = np.asarray(ts.ckks_vector_from(owner1._context, vector.serialize()).decrypt())
    assert np.max(np.abs(values - 0.25)) < parameters.error_bound
