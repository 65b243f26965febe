"""Signed transcripts: a signature covers the kind, every public term and every blob, and only the named sender."""

from __future__ import annotations

import numpy as np
import pytest

from collabcausal.errors import IdentityError, ProtocolError
from collabcausal.messages import Message
from collabcausal.secagg import simulation_identities
from collabcausal.vertical.transcript import (
    COLUMNS_KIND,
    TOTALS_KIND,
    blob_arrays,
    blobs,
    sign_transcript,
    transcript_digest,
    verify_transcript,
)

TERMS = {"study": "s", "round": "r", "rho": 0.1, "design": {"bounds": [[0, 1]]}}
PAYLOAD = [b"context", b"chunk-1", b"chunk-2"]


@pytest.fixture(scope="module")
def identities():
    return simulation_identities("s", ["label", "other"])


def _verify(verifier, advertisement, **changes) -> None:
    args = {"sender": "label", "study": "s", "round_id": "r", "kind": COLUMNS_KIND, "terms": TERMS,
            "payload": PAYLOAD} | changes
    verify_transcript(verifier, advertisement, **args)


def test_a_signed_transcript_verifies_for_exactly_its_terms_and_blobs(identities) -> None:
    signers, verifier = identities
    signed = sign_transcript(signers["label"], "s", "r", COLUMNS_KIND, TERMS, PAYLOAD)
    _verify(verifier, signed)
    for changes in ({"terms": TERMS | {"rho": 0.2}}, {"payload": [b"context", b"chunk-1", b"chunk-X"]},
                    {"payload": PAYLOAD[:2]}, {"payload": [b"context", b"chunk-2", b"chunk-1"]}):
        with pytest.raises(IdentityError, match="not what it signed"):
            _verify(verifier, signed, **changes)
    with pytest.raises(IdentityError):
        _verify(verifier, signed, kind=TOTALS_KIND)  # a columns signature never passes for totals
    with pytest.raises(IdentityError):
        _verify(verifier, signed, round_id="another")
    with pytest.raises(IdentityError, match="signed by 'label'"):
        _verify(verifier, signed, sender="other")
    with pytest.raises(IdentityError, match="without its signature"):
        _verify(verifier, None)


def test_the_digest_separates_blob_boundaries_and_key_order() -> None:
    """Blobs are hashed one by one (no concatenation ambiguity); terms are canonical JSON (key order is not signed)."""
    assert transcript_digest("k", TERMS, [b"ab", b"c"]) != transcript_digest("k", TERMS, [b"a", b"bc"])
    assert transcript_digest("k", dict(reversed(list(TERMS.items()))), PAYLOAD) == transcript_digest("k", TERMS,
                                                                                                     PAYLOAD)
    with pytest.raises(ProtocolError, match="finite JSON"):
        transcript_digest("k", TERMS | {"rho": float("nan")}, PAYLOAD)


def test_blobs_round_trip_and_malformed_packings_are_refused() -> None:
    payload = list(PAYLOAD)
    message = Message("op", {}, blob_arrays("ckks_x", payload))
    assert payload == []  # emptied as copied: each blob freed once in the array
    assert blobs(message, "ckks_x") == PAYLOAD
    assert blobs(Message("op", {}, blob_arrays("ckks_x", [])), "ckks_x") == []
    bad = [{"ckks_x": np.zeros(3, np.uint8), "ckks_x_lengths": np.array([2, 2])},
           {"ckks_x": np.zeros(3, np.uint8), "ckks_x_lengths": np.array([4, -1])},
           {"ckks_x": np.zeros(3, np.float64), "ckks_x_lengths": np.array([3])},
           {"ckks_x": np.zeros(3, np.uint8), "ckks_x_lengths": np.array([1.5, 1.5])}]
    for arrays in bad:
        with pytest.raises(ProtocolError):
            blobs(Message("op", {}, arrays), "ckks_x")
