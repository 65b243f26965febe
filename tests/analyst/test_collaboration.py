"""Collaborative representation (paper 003, eqs. 31-35)."""

from __future__ import annotations

import numpy as np
import pytest

from collabcausal.analyst.collaboration import AnchorGram, collaborative_representation
from collabcausal.errors import InputError, NumericalError


def blocks(seed: int = 0) -> tuple[list[np.ndarray], list[np.ndarray]]:
    rng = np.random.default_rng(seed)
    a = [rng.normal(size=(300, 4)), rng.normal(size=(300, 3))]
    x = [rng.normal(size=(40, 4)), rng.normal(size=(30, 3))]
    return x, a


def test_g_solves_its_least_squares_problem() -> None:
    x, a = blocks()
    rep = collaborative_representation(x, a, 3)
    a = [ai - ai.mean(axis=0) for ai in a]  # the analyst centres on the anchor
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
    np.testing.assert_allclose(rep.blocks[1], (x[1] - a[1].mean(axis=0)) @ rep.G[1])
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


def test_anchor_gram_over_blocks_of_rows_equals_the_whole_anchor() -> None:
    """Blocks added one by one give the centres, the Gram matrix and X^ of the whole A~, up to round-off."""
    x, a = blocks()
    a = [ai + [5.0, -3.0, 2.0, 1.0][: ai.shape[1]] for ai in a]  # off-centre, as a party's own centring leaves it
    anchor = AnchorGram()
    for rows in (slice(0, 7), slice(7, 150), slice(150, 300)):
        anchor.add([ai[rows] for ai in a])
    assert anchor.rows == 300 and anchor.widths == ((4,), (3,))
    centred = np.hstack([ai - ai.mean(axis=0) for ai in a])
    np.testing.assert_allclose(anchor.gram(), centred.T @ centred, rtol=1e-12, atol=1e-10)
    for (centre,), ai in zip(anchor.centres(), a, strict=True):
        np.testing.assert_allclose(centre, ai.mean(axis=0), rtol=1e-13)
    blocked, whole = collaborative_representation(x, anchor, 3), collaborative_representation(x, a, 3)
    np.testing.assert_allclose(blocked.X_hat, whole.X_hat, rtol=1e-10, atol=1e-12)


def test_anchor_blocks_of_other_widths_or_rows_are_refused() -> None:
    _, a = blocks()
    anchor = AnchorGram()
    anchor.add([ai[:10] for ai in a])
    with pytest.raises(InputError, match=r"do not fit anchors of 10 rows and the widths \(3,\)"):
        anchor.add([a[0][:10], a[1][:10, :2]])
    with pytest.raises(InputError, match="do not fit anchors of 10 rows"):
        anchor.add([a[0][:10], a[1][:9]])
    with pytest.raises(InputError, match="same row groups"):
        anchor.add([a[0][:10]])


def _party_reduce(x: np.ndarray, anchor: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A party's full-rank reducer: standardize on its own rows, then a rotation (PCA basis)."""
    mu, sd = x.mean(axis=0), x.std(axis=0)
    _, _, vt = np.linalg.svd((x - mu) / sd, full_matrices=False)
    return (x - mu) / sd @ vt.T, (anchor - mu) / sd @ vt.T


@pytest.mark.parametrize("split", ["random", "by_column", "shifted"])
def test_full_rank_collaboration_equals_centralized_propensity_for_any_row_split(split: str) -> None:
    from collabcausal.estimators.propensity import LogisticPropensity

    rng = np.random.default_rng(12)
    n, m = 600, 4
    X = rng.normal(size=(n, m))
    t = (rng.random(n) < 1 / (1 + np.exp(-(X @ [0.8, -0.5, 0.3, 0.2])))).astype(int)
    if split == "random":
        groups = rng.permutation(n) % 3
    elif split == "by_column":
        groups = np.digitize(X[:, 0], np.quantile(X[:, 0], [1 / 3, 2 / 3]))
    else:
        groups = np.arange(n) % 3
        X = X + 5.0 * groups[:, None] * np.array([1.0, -2.0, 0.5, 3.0])  # row groups far apart
    anchor = rng.uniform(X.min(axis=0), X.max(axis=0), size=(500, m))
    order = np.argsort(groups, kind="stable")
    reduced = [_party_reduce(X[groups == g], anchor) for g in range(3)]
    rep = collaborative_representation([r[0] for r in reduced], [r[1] for r in reduced], m)
    e_collab = LogisticPropensity().fit(rep.X_hat, t[order]).predict_propensity(rep.X_hat)
    e_central = LogisticPropensity().fit(X[order], t[order]).predict_propensity(X[order])
    assert np.max(np.abs(e_collab - e_central)) < 1e-6
