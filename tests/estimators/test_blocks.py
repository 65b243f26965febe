"""Blockwise passes over tall arrays give the whole-array results."""

from __future__ import annotations

import numpy as np

from collabcausal.estimators.blocks import ROW_BLOCK, centred_gram, column_means, row_blocks, weighted_gram


def test_row_blocks_cover_the_rows_once_in_order() -> None:
    n = 2 * ROW_BLOCK + 5
    covered = np.concatenate([np.arange(n)[rows] for rows in row_blocks(n)])
    np.testing.assert_array_equal(covered, np.arange(n))
    assert max(rows.stop - rows.start for rows in row_blocks(n)) == ROW_BLOCK


def test_blockwise_grams_equal_the_whole_array_products() -> None:
    rng = np.random.default_rng(0)
    X = rng.normal(3.0, 2.0, size=(ROW_BLOCK + 11, 4))
    w = rng.random(X.shape[0])
    center = X.mean(axis=0)
    np.testing.assert_allclose(centred_gram(X, center), (X - center).T @ (X - center), rtol=1e-12)
    np.testing.assert_allclose(weighted_gram(X, w), X.T @ (X * w[:, None]), rtol=1e-12)


def test_column_means_equal_numpy_means() -> None:
    X = np.random.default_rng(1).normal(3.0, 2.0, size=(ROW_BLOCK + 11, 4))
    np.testing.assert_allclose(column_means(X), X.mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose(column_means(X[:5]), X[:5].mean(axis=0), rtol=1e-12)
