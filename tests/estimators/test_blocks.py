"""Blockwise passes over tall arrays give the whole-array results."""

from __future__ import annotations

import numpy as np
import pytest

from collabcausal.estimators.blocks import ROW_BLOCK, AffineDesign, centred_gram, column_means, row_blocks


def test_row_blocks_cover_the_rows_once_in_order() -> None:
    n = 2 * ROW_BLOCK + 5
    covered = np.concatenate([np.arange(n)[rows] for rows in row_blocks(n)])
    np.testing.assert_array_equal(covered, np.arange(n))
    assert max(rows.stop - rows.start for rows in row_blocks(n)) == ROW_BLOCK


def test_blockwise_grams_equal_the_whole_array_products() -> None:
    rng = np.random.default_rng(0)
    X = rng.normal(3.0, 2.0, size=(ROW_BLOCK + 11, 4))
    center = X.mean(axis=0)
    np.testing.assert_allclose(centred_gram(X, center), (X - center).T @ (X - center), rtol=1e-12)


@pytest.mark.parametrize(("W", "intercept"), [(np.arange(1.0, 13.0).reshape(4, 3), True), (np.full(4, 2.0), False)])
def test_affine_design_products_equal_those_of_the_formed_design(W: np.ndarray, intercept: bool) -> None:
    rng = np.random.default_rng(2)
    X = rng.normal(3.0, 2.0, size=(ROW_BLOCK + 11, 4))
    center = X.mean(axis=0)
    body = (X - center) @ W if W.ndim == 2 else (X - center) / W
    formed = np.column_stack([np.ones(X.shape[0]), body]) if intercept else body
    design = AffineDesign(X, center, W, intercept)
    v, w = rng.normal(size=formed.shape[1]), rng.random(X.shape[0])
    mask = w > 0.5
    assert design.shape == formed.shape
    # dot and tdot move the centring into a constant: rounding of about eps |center| / sd, amplified by W
    np.testing.assert_allclose(design.dot(v), formed @ v, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(design.tdot(w), formed.T @ w, rtol=1e-10)
    np.testing.assert_allclose(design.weighted_gram(w), formed.T @ (formed * w[:, None]), rtol=1e-12)
    np.testing.assert_allclose(design.take(mask), formed[mask], rtol=1e-12)


def test_column_means_equal_numpy_means() -> None:
    X = np.random.default_rng(1).normal(3.0, 2.0, size=(ROW_BLOCK + 11, 4))
    np.testing.assert_allclose(column_means(X), X.mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose(column_means(X[:5]), X[:5].mean(axis=0), rtol=1e-12)
