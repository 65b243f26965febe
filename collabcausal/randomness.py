"""Explicit seeding: every random draw in collabcausal flows from a ``numpy.random.Generator``.

Derive independent child streams with :func:`child_rng` from a seed and a tuple of names, so that
the same study seed gives the same numbers in every process (in-process simulation or gRPC).
"""

from __future__ import annotations

import hashlib

import numpy as np

SeedLike = int | np.random.Generator | None


def as_generator(seed: SeedLike) -> np.random.Generator:
    """Return a Generator: the one given, or a fresh PCG64 seeded with ``seed``."""
    if isinstance(seed, np.random.Generator):
        return seed
    return np.random.default_rng(seed)


def child_rng(seed: int, *names: str | int) -> np.random.Generator:
    """A Generator derived deterministically from ``seed`` and a path of names.

    Parameters
    ----------
    seed : int
        The study seed.
    *names : str or int
        A path identifying the stream, e.g. ``("anchor",)`` or ``("bootstrap", 17, "row0")``.
        Different paths give statistically independent streams; the same path gives the same
        stream in any process.
    """
    digest = hashlib.sha256("/".join(map(str, names)).encode()).digest()
    words = [int.from_bytes(digest[i : i + 4], "little") for i in range(0, 16, 4)]
    return np.random.default_rng(np.random.SeedSequence([int(seed) & (2**63 - 1), *words]))
