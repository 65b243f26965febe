"""Cross-fitting folds by position, keyed by a party secret (docs/dp-effects.md, step 1).

Under substitution of one record (n public) a record keeps its position, so a split that depends
only on ``n`` and a secret keeps the substituted record in its fold: the folds are disjoint
subsets in the sense of parallel composition (McSherry 2010), and nothing about the split depends
on the values. The secret keeps the analyst from knowing which subjects share a fold.
"""

from __future__ import annotations

import hashlib
import hmac

import numpy as np
from numpy.typing import NDArray

from collabcausal.errors import InputError


def fold_seed(secret: bytes, study: str) -> int:
    """A 128-bit seed ``HMAC-SHA256(secret, "dp_effects folds|" + study)`` (first 16 bytes)."""
    if len(secret) < 16:
        raise InputError("the fold secret is shorter than 16 bytes", "use the party's 32-byte key")
    digest = hmac.new(secret, f"collabcausal dp_effects folds|{study}".encode(), hashlib.sha256).digest()
    return int.from_bytes(digest[:16], "big")


FOLD_CHUNK = 1 << 16
"""Rows per chunk of the fold labels: each chunk is shuffled on its own, so any block of rows gets its
labels without the others'."""


def assign_folds(n: int, n_folds: int, seed: int) -> NDArray[np.int8]:
    """Fold label (0..K-1) of each of ``n`` rows: :func:`fold_labels` of all of them."""
    return fold_labels(slice(0, n), n, n_folds, seed)


def fold_size(n: int, n_folds: int, k: int) -> int:
    """Rows of ``n`` in fold ``k``: :func:`fold_labels` keeps the sizes of ``arange(n) % n_folds``. Public (n)."""
    return len(range(k, n, n_folds))


def fold_labels(rows: slice, n: int, n_folds: int, seed: int) -> NDArray[np.int8]:
    """Fold labels of the rows ``rows`` of ``n``: the cyclic labels ``position % K`` shuffled within chunks.

    Positions ``c * FOLD_CHUNK ...`` up to the next chunk take the labels of their own positions
    modulo K in an order drawn by a generator seeded by ``seed`` and the chunk (the first chunk by
    ``seed`` alone: a table of up to 65,536 rows keeps the folds of earlier versions). The fold sizes
    are those of ``arange(n) % K`` (near-equal parts), a block of rows needs only its chunks (a party
    reading its table out of core holds no n-row array), and the labels depend on ``n`` and the
    seed only, never on the values.
    """
    if n_folds < 1:
        raise InputError(
            f"n_folds must be >= 1, got {n_folds}", "use 1 (full-sample nuisances) or >= 2 (cross-fitting)"
        )
    if n < n_folds:
        raise InputError(f"{n} rows cannot make {n_folds} folds", "use fewer folds or a larger party")
    if n_folds > np.iinfo(np.int8).max:
        raise InputError(f"n_folds {n_folds} is above {np.iinfo(np.int8).max}", "use fewer folds")
    start, stop = rows.start or 0, min(rows.stop, n)
    out = np.empty(max(stop - start, 0), dtype=np.int8)
    for chunk in range(start // FOLD_CHUNK, -(-stop // FOLD_CHUNK)):
        lo, hi = chunk * FOLD_CHUNK, min((chunk + 1) * FOLD_CHUNK, n)
        rng = np.random.default_rng(seed if chunk == 0 else [seed, chunk])
        labels = np.empty(hi - lo, dtype=np.int8)
        labels[rng.permutation(hi - lo)] = np.arange(lo, hi) % n_folds
        keep = slice(max(start, lo), min(stop, hi))
        out[keep.start - start : keep.stop - start] = labels[keep.start - lo : keep.stop - lo]
    return out
