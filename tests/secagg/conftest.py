"""Fixtures of the secure-aggregation tests: in-memory identities and seeded round keys."""

from __future__ import annotations

import numpy as np
import pytest
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey
from secagg_helpers import NAMES, STUDY

from collabcausal.secagg import simulation_identities


@pytest.fixture(scope="module")
def identities():
    """(signers by name, verifier) of a throwaway study CA for :data:`NAMES`."""
    return simulation_identities(STUDY, NAMES)


@pytest.fixture()
def seeded_keys(monkeypatch):
    """Make round keys reproducible: X25519 keys from a seeded generator (tests only)."""
    rng = np.random.default_rng(20260521)

    def key() -> X25519PrivateKey:
        return X25519PrivateKey.from_private_bytes(rng.bytes(32))

    monkeypatch.setattr("collabcausal.secagg.protocol.generate_round_key", key)
    return rng
