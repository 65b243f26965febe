"""The anchor key's public derivations: its fingerprint in a study and the simulation-only key of a seed."""

from __future__ import annotations

from collabcausal.anchor_key import FINGERPRINT_HEX, anchor_fingerprint, simulation_anchor_key

KEY = bytes(range(32))


def test_fingerprint_tells_keys_apart_and_is_bound_to_the_study() -> None:
    base = anchor_fingerprint(KEY, "s")
    assert base == anchor_fingerprint(bytes(KEY), "s")
    assert len(base) == FINGERPRINT_HEX and int(base, 16) >= 0 and base == base.lower()
    assert base != anchor_fingerprint(bytes(32), "s")
    assert base != anchor_fingerprint(KEY, "t")  # a fingerprint replayed in another study does not match


def test_the_simulation_key_is_a_256_bit_function_of_the_seed_alone() -> None:
    assert len(simulation_anchor_key(0)) == 32
    assert simulation_anchor_key(3) == simulation_anchor_key(3) != simulation_anchor_key(4)
