"""Fixtures of the encrypted-arithmetic tests: one key owner per preset and the evaluator's view of it."""

from __future__ import annotations

import pytest

from collabcausal.vertical import KeyOwner, load_public_context, preset


@pytest.fixture(scope="session")
def owner1():
    """A key owner of the depth-1 preset (N = 8192)."""
    return KeyOwner(preset(1))


@pytest.fixture(scope="session")
def evaluator1(owner1):
    """The evaluator's public context of :func:`owner1`, read from the blob as relayed."""
    return load_public_context(owner1.public_context())


@pytest.fixture(scope="session")
def owner2():
    """A key owner of the depth-2 preset (N = 16384: the statistics of three or more column groups)."""
    return KeyOwner(preset(2))


@pytest.fixture(scope="session")
def owner7():
    """A key owner of the depth-7 preset (N = 16384)."""
    return KeyOwner(preset(7))


@pytest.fixture(scope="session")
def evaluator7(owner7):
    """The evaluator's public context of :func:`owner7`."""
    return load_public_context(owner7.public_context())
