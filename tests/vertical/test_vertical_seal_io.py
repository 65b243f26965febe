"""Framing of the CKKS blobs: parts come back exactly, anything else is refused."""

from __future__ import annotations

import pytest

from collabcausal.errors import ProtocolError
from collabcausal.vertical.seal_io import frame, tag, unframe, untag


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
