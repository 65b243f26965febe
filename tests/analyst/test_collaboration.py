"""Collaborative representation (paper 003, eqs. 31-35)."""

from __future__ import annotations

import numpy as np
import pytest

from collabcausal.analyst.collaboration import collaborative_representation
from collabcausal.errors import InputError, NumericalError


def blocks(seed: int = 0) -> tuple[list[np.ndarray], list[np.ndarray]]:
    rng = np.random.default_rng(seed)
    a = [rng.normal(size=(300, 4)), rng.normal(size=(300, 3))]
    x = [rng.normal(size=(40, 4)), rng.normal(size=(30, 3))]
    return x, a


def test_g_solves_its_least_squares_problem() -> None:
    x, a = blocks()
    rep = collaborative_representation(x, a, 3)
    U, s, _ = np.linalg.svd(np.hstack(a), full_matrices=False)
    np.testing.assert_allclose(rep.singular_values, s, rtol=1e-10)
    for ai, G in zip(a, rep.G, strict=True):
        # G_i = pinv(A~_i) U1 up to the sign of each of U1's columns (SVD sign freedom).
        reference = np.linalg.pinv(ai) @ U[:, :3]
        np.testing.assert_allclose(np.abs(G), np.abs(reference), atol=1e-9)
        signs = np.sign(np.sum(G * reference, axis=0))
        np.testing.assert_allclose(G, reference * signs, atol=1e-9)


def test_stacked_representation_follows_row_group_order() -> None:
    x, a = blocks()
    rep = collaborative_representation(x, a, 2)
    assert rep.X_hat.shape == (70, 2)
    np.testing.assert_allclose(rep.blocks[1], x[1] @ rep.G[1])
    np.testing.assert_allclose(rep.X_hat[40:], rep.blocks[1])


def test_default_components_are_the_smallest_row_group_width() -> None:
    x, a = blocks()
    assert collaborative_representation(x, a).X_hat.shape[1] == 3


def test_too_many_components_is_a_clear_error() -> None:
    x, a = blocks()
    with pytest.raises(NumericalError, match=r"m\^ = 8 .* rank 7"):
        collaborative_representation(x, a, 8)


def test_rank_deficient_anchor_block_is_a_clear_error() -> None:
    x, a = blocks()
    a[1] = np.column_stack([a[1][:, :2], a[1][:, 0] + a[1][:, 1]])
    with pytest.raises(NumericalError, match="rank 2 < 3 columns"):
        collaborative_representation(x, a, 2)


def test_mismatched_shapes_are_refused() -> None:
    x, a = blocks()
    with pytest.raises(InputError, match="do not fit anchors"):
        collaborative_representation([x[0], x[1][:, :2]], a, 2)
