"""The public context: what the evaluator may hold, and the refusal of anything carrying a secret key."""

from __future__ import annotations

import hashlib

import pytest

from collabcausal.errors import ProtocolError
from collabcausal.vertical import fingerprint, load_public_context
from collabcausal.vertical.context import parameters_header
from collabcausal.vertical.seal_io import frame, unframe


def test_the_relayed_context_cannot_decrypt_and_has_the_owner_fingerprint(owner1, evaluator1):
    blob = owner1.public_context()
    assert evaluator1.fingerprint == fingerprint(blob) == hashlib.sha256(blob).hexdigest()
    assert not evaluator1.context.has_secret_key() and evaluator1.context.is_public()
    assert evaluator1.parameters == owner1.parameters


def test_a_context_carrying_a_secret_key_is_refused(owner1):
    header, _, galois = unframe(owner1.public_context(), 3, "blob")
    leaky = frame(header, owner1._context.serialize(save_secret_key=True, save_galois_keys=False), galois)
    with pytest.raises(ProtocolError, match="carries a secret key"):
        load_public_context(leaky)


def test_a_context_that_does_not_match_its_stated_parameters_is_refused(owner1, owner7):
    _, tenseal_bytes, galois = unframe(owner1.public_context(), 3, "blob")
    lying = frame(parameters_header(owner7.parameters), tenseal_bytes, galois)
    with pytest.raises(ProtocolError, match="does not match its stated parameters"):
        load_public_context(lying)


def test_a_context_without_the_rotation_keys_is_refused(owner1, owner7):
    header, tenseal_bytes, _ = unframe(owner1.public_context(), 3, "blob")
    with pytest.raises(ProtocolError, match="Galois keys"):
        load_public_context(frame(header, tenseal_bytes, unframe(owner7.public_context(), 3, "b")[2]))


@pytest.mark.parametrize("part", [0, 1])
def test_unreadable_parts_are_refused_in_one_line(owner1, part):
    parts = unframe(owner1.public_context(), 3, "blob")
    parts[part] = b"garbage"
    with pytest.raises(ProtocolError, match="not readable") as info:
        load_public_context(frame(*parts))
    assert "\n" not in str(info.value)
