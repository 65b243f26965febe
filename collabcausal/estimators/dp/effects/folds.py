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
from collabcausal.estimators.blocks import row_blocks


def fold_seed(secret: bytes, study: str) -> int:
    """A 128-bit seed ``HMAC-SHA256(secret, "dp_effects folds|" + study)`` (first 16 bytes)."""
    if len(secret) < 16:
        raise InputError("the fold secret is shorter than 16 bytes", "use the party's 32-byte key")
    digest = hmac.new(secret, f"collabcausal dp_effects folds|{study}".encode(), hashlib.sha256).digest()
    return int.from_bytes(digest[:16], "big")


def assign_folds(n: int, n_folds: int, seed: int) -> NDArray[np.int8]:
    """Fold label (0..K-1) of each of ``n`` rows: a seeded permutation cut into K near-equal parts.

    One byte per row and a transient int32 permutation (int64 past 2^31 rows), so a party reading
    10^8 rows out of core holds 0.1 GB of labels; the permutation is the one
    ``default_rng(seed).permutation(n)`` draws, whatever its integer width.
    """
    if n_folds < 1:
        raise InputError(
            f"n_folds must be >= 1, got {n_folds}", "use 1 (full-sample nuisances) or >= 2 (cross-fitting)"
        )
    if n < n_folds:
        raise InputError(f"{n} rows cannot make {n_folds} folds", "use fewer folds or a larger party")
    if n_folds > np.iinfo(np.int8).max:
        raise InputError(f"n_folds {n_folds} is above {np.iinfo(np.int8).max}", "use fewer folds")
    width = np.int32 if n <= np.iinfo(np.int32).max else np.int64
    order = np.random.default_rng(seed).permutation(np.arange(n, dtype=width))
    folds = np.empty(n, dtype=np.int8)
    for rows in row_blocks(n):
        folds[order[rows]] = np.arange(rows.start, rows.stop) % n_folds
    return folds
