"""Sealed ciphertexts open only for the receiver's round key and the envelope they were sealed under."""

from __future__ import annotations

import pytest

from collabcausal.errors import ProtocolError
from collabcausal.secagg.crypto import generate_round_key, public_bytes
from collabcausal.vertical.sealed import Envelope, seal, seal_round, unseal

BLOBS = [b"first ciphertext", b"", b"third" * 1000]


def _envelope(**changes) -> Envelope:
    fields = {"study": "s", "round_id": "s/statistics/0", "batch": 0, "sender": "registry", "receiver": "insurer"}
    return Envelope(**(fields | changes))


def test_the_receiver_opens_what_was_sealed_for_it() -> None:
    receiver = generate_round_key()
    ephemeral, sealed = seal(public_bytes(receiver), BLOBS, _envelope())
    assert all(b not in s for b, s in zip(BLOBS[::2], sealed[::2], strict=True))
    assert [bytes(b) for b in unseal(receiver, ephemeral, sealed, _envelope())] == BLOBS
    assert seal_round("s/statistics/0") == "s/statistics/0/sealed"


@pytest.mark.parametrize("change", [
    {"receiver": "hospital"},  # handed to another party (the key owner): another key and envelope
    {"batch": 1},  # replayed as another batch
    {"round_id": "s/statistics/1"},  # replayed in another round
    {"sender": "insurer"},  # claimed to come from someone else
])
def test_another_envelope_does_not_open(change) -> None:
    receiver = generate_round_key()
    ephemeral, sealed = seal(public_bytes(receiver), BLOBS, _envelope())
    with pytest.raises(ProtocolError, match="do not open with this party's round key"):
        unseal(receiver, ephemeral, sealed, _envelope(**change))


def test_another_key_altered_dropped_or_reordered_blobs_do_not_open() -> None:
    receiver, other = generate_round_key(), generate_round_key()
    ephemeral, sealed = seal(public_bytes(receiver), BLOBS, _envelope())
    flipped = bytearray(sealed[2])
    flipped[7] ^= 1
    for key, blobs in [(other, sealed), (receiver, [sealed[0], sealed[1], bytes(flipped)]), (receiver, sealed[:2]),
                       (receiver, [sealed[2], sealed[1], sealed[0]])]:
        with pytest.raises(ProtocolError, match="do not open"):
            unseal(key, ephemeral, blobs, _envelope())
    with pytest.raises(ProtocolError, match="32"):
        seal(b"short", BLOBS, _envelope())
    with pytest.raises(ProtocolError, match="ephemeral key"):
        unseal(receiver, b"short", sealed, _envelope())
