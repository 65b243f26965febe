"""Input checks at the estimators' door: finiteness of numeric arrays, however it is tested."""

from __future__ import annotations

import numpy as np
import pytest

from collabcausal.errors import InputError
from collabcausal.estimators.validation import all_finite, check_matrix, check_vector


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_one_nan_or_infinite_value_anywhere_is_found(bad: float) -> None:
    X = np.random.default_rng(0).normal(size=(1000, 3))
    X[617, 2] = bad
    assert not all_finite(X)
    with pytest.raises(InputError, match="X contains NaN or infinite values"):
        check_matrix(X)
    with pytest.raises(InputError, match="y contains NaN or infinite values"):
        check_vector(X[:, 2])


def test_finite_values_whose_sum_overflows_are_finite() -> None:
    X = np.full((4, 2), np.finfo(np.float64).max)  # their sum is inf
    assert all_finite(X)
    assert check_matrix(X) is X


def test_integer_boolean_and_empty_arrays_are_finite() -> None:
    assert all_finite(np.arange(5)) and all_finite(np.ones(3, dtype=bool)) and all_finite(np.empty((0, 4)))
