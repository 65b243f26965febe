"""StandardizedPCA: the party's private reducer f_ij (paper 003, eq. 30)."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.decomposition import PCA
from sklearn.preprocessing import StandardScaler

from collabcausal.errors import InputError
from collabcausal.party.reducer import StandardizedPCA


def data() -> np.ndarray:
    rng = np.random.default_rng(1)
    return rng.normal(size=(200, 5)) @ rng.normal(size=(5, 5)) + 10.0


def test_matches_sklearn_standardize_then_pca_up_to_sign() -> None:
    X = data()
    ours = StandardizedPCA(3).fit_transform(X)
    ref = PCA(3).fit_transform(StandardScaler().fit_transform(X))
    np.testing.assert_allclose(np.abs(ours), np.abs(ref), atol=1e-10)


def test_signs_are_deterministic_largest_loading_positive() -> None:
    reducer = StandardizedPCA(4).fit(data())
    rows = np.arange(4)
    assert (reducer.components_[rows, np.argmax(np.abs(reducer.components_), axis=1)] > 0).all()


def test_fraction_keeps_fewest_components_reaching_the_share() -> None:
    reducer = StandardizedPCA(0.8).fit(data())
    full = StandardizedPCA(5).fit(data()).explained_variance_ratio_
    k = reducer.n_components_
    assert full[:k].sum() >= 0.8 > full[: k - 1].sum()


def test_constant_column_in_a_resample_does_not_divide_by_zero() -> None:
    X = data()
    X[:, 2] = 3.0
    out = StandardizedPCA(2).fit_transform(X)
    assert np.isfinite(out).all()


@pytest.mark.parametrize("k", [0, 6, 1.5, "two"])
def test_invalid_component_counts_are_refused(k) -> None:
    with pytest.raises(InputError, match="n_components"):
        StandardizedPCA(k).fit(data())


def test_transform_refuses_other_column_counts() -> None:
    with pytest.raises(InputError, match="columns"):
        StandardizedPCA(2).fit(data()).transform(np.ones((3, 4)))
