"""Fold labels by position in chunks (estimators/dp/effects/folds.py): any block of rows gets its own labels."""

from __future__ import annotations

import numpy as np
import pytest

from collabcausal.errors import InputError
from collabcausal.estimators.dp.effects.folds import FOLD_CHUNK, assign_folds, fold_labels, fold_size


def test_any_block_of_rows_gets_the_labels_of_the_whole():
    n = 3 * FOLD_CHUNK + 1234
    whole = assign_folds(n, 5, 99)
    for lo, hi in [(0, 7), (FOLD_CHUNK - 3, FOLD_CHUNK + 3), (1000, 2 * FOLD_CHUNK + 17), (n - 1, n), (0, n)]:
        np.testing.assert_array_equal(fold_labels(slice(lo, hi), n, 5, 99), whole[lo:hi])
    assert whole.dtype == np.int8


def test_fold_sizes_are_those_of_the_cyclic_labels_and_each_chunk_is_shuffled():
    n = 2 * FOLD_CHUNK + 11
    labels = assign_folds(n, 3, 5)
    np.testing.assert_array_equal(np.bincount(labels), np.bincount(np.arange(n) % 3))
    assert [fold_size(n, 3, k) for k in range(3)] == np.bincount(labels).tolist()
    second = labels[FOLD_CHUNK : 2 * FOLD_CHUNK]
    assert not np.array_equal(second, np.arange(FOLD_CHUNK, 2 * FOLD_CHUNK) % 3)
    assert not np.array_equal(second, labels[:FOLD_CHUNK])  # chunks are shuffled independently


def test_a_table_of_one_chunk_keeps_the_folds_of_earlier_versions():
    """The earlier definition: one seeded permutation of all n rows cut cyclically."""
    n = 5000
    order = np.random.default_rng(1234).permutation(n)
    earlier = np.empty(n, dtype=np.int64)
    earlier[order] = np.arange(n) % 4
    np.testing.assert_array_equal(assign_folds(n, 4, 1234), earlier)


@pytest.mark.parametrize(("n", "k", "match"), [(3, 4, "cannot make 4 folds"), (10, 0, "n_folds must be >= 1"),
                                               (1000, 200, "above 127")])
def test_impossible_folds_are_refused(n, k, match):
    with pytest.raises(InputError, match=match):
        assign_folds(n, k, 1)
