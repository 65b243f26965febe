"""Training-set sensitivities: Theorem 7 (HSIC) and the rank stability bound (section 5.1)."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collabcausal.errors import InputError
from collabcausal.estimators.discovery.krr import GaussianKRR, residual_bound
from collabcausal.estimators.discovery.scores import hsic_score, ordinal_ranks
from collabcausal.estimators.discovery.sensitivity import (
    gaussian_lipschitz,
    hsic_train_sensitivity,
    rank_stability_distance,
    score_sensitivity,
)


def test_test_set_sensitivities_have_the_papers_values():
    assert score_sensitivity("spearman", 100) == pytest.approx(0.3)
    assert score_sensitivity("kendall", 100) == pytest.approx(0.04)
    assert score_sensitivity("hsic", 100) == pytest.approx(1189 / 99**2)


def test_gaussian_lipschitz_constant_is_the_largest_slope():
    r = np.linspace(-3, 3, 200001)
    slope = np.abs(np.gradient(np.exp(-(r**2) / (2 * 0.2**2)), r)).max()
    assert slope == pytest.approx(gaussian_lipschitz(0.2), rel=1e-4)


def test_hsic_training_sensitivity_is_theorem_7():
    expected = 8 / 0.5**1.5 * 32 * gaussian_lipschitz(0.1) * math.sqrt(400) / 300
    assert hsic_train_sensitivity(400, 300, 0.5, 0.1) == pytest.approx(expected)


def fit_residuals(x, y, x_test, y_test, lam):
    return y_test - GaussianKRR(lam, 0.3).fit(x, y).predict(x_test)


unit = st.floats(-1.0, 1.0, allow_nan=False, allow_subnormal=False)


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**32 - 1), unit, unit)
def test_hsic_change_from_one_training_row_is_within_theorem_7(seed, xk, yk):
    rng = np.random.default_rng(seed)
    n, m, lam = 40, 30, 0.3
    x, y = rng.uniform(-1, 1, n), rng.uniform(-1, 1, n)
    xt, yt = rng.uniform(-1, 1, m), rng.uniform(-1, 1, m)
    x2, y2 = x.copy(), y.copy()
    x2[5], y2[5] = xk, yk
    before = hsic_score(xt, fit_residuals(x, y, xt, yt, lam), width_a=0.3, width_b=0.1)
    after = hsic_score(xt, fit_residuals(x2, y2, xt, yt, lam), width_a=0.3, width_b=0.1)
    assert abs(before - after) <= hsic_train_sensitivity(m, n, lam, 0.1)


def test_rank_stability_distance_is_the_largest_safe_number_of_changes():
    lam, n = 0.25, 100
    step = 2 * residual_bound(n, lam)  # 1.28
    residuals = np.array([0.0, 3.0 * step, 10.0])
    assert rank_stability_distance(residuals, n, lam) == 2
    assert rank_stability_distance(np.array([0.0, 3.0 * step + 1e-9]), n, lam) == 3
    assert rank_stability_distance(np.array([1.0, 1.0, 2.0]), n, lam) == 0


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**32 - 1), unit, unit)
def test_rank_stability_distance_moves_by_at_most_one_and_protects_ranks(seed, xk, yk):
    rng = np.random.default_rng(seed)
    n, m, lam = 30, 12, 1.0
    x, y = rng.uniform(-1, 1, n), rng.uniform(-1, 1, n)
    xt = rng.uniform(-1, 1, m)
    yt = np.linspace(-1, 1, m) * 40.0  # far-apart residuals so the distance is often positive
    x2, y2 = x.copy(), y.copy()
    x2[0], y2[0] = xk, yk
    r1, r2 = fit_residuals(x, y, xt, yt, lam), fit_residuals(x2, y2, xt, yt, lam)
    d1, d2 = rank_stability_distance(r1, n, lam), rank_stability_distance(r2, n, lam)
    assert abs(d1 - d2) <= 1
    if d1 >= 1:
        assert np.array_equal(ordinal_ranks(r1), ordinal_ranks(r2))


@pytest.mark.parametrize("width", [-0.1, 0.0, float("inf"), float("nan")])
def test_a_residual_width_that_is_not_a_positive_number_is_refused_not_given_a_negative_sensitivity(width):
    # exp(-r^2 / (2 h^2)) is the same kernel for -h, but 1 / (h sqrt(e)) < 0 would drop the training
    # split's sensitivity from max(test, train) and leave its rows unprotected.
    with pytest.raises(InputError, match="residual kernel width"):
        hsic_train_sensitivity(400, 300, 0.5, width)
