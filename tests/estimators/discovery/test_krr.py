"""Kernel ridge regression of paper 002, eq. 5, and its residual bound (Theorem 5)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collabcausal.errors import InputError
from collabcausal.estimators.discovery.krr import GaussianKRR, gaussian_kernel, loo_select, residual_bound


def test_dual_coefficients_solve_the_first_order_condition_of_eq_5():
    rng = np.random.default_rng(0)
    x, y = rng.uniform(-1, 1, 30), rng.uniform(-1, 1, 30)
    lam, n = 0.05, 30
    model = GaussianKRR(lam, 0.4).fit(x, y)
    K = gaussian_kernel(x, x, 0.4)
    # gradient of (lam/2)||w||^2 + (1/n) sum (f(x_i) - y_i)^2 with w = sum alpha_i phi(x_i), times K^-1
    assert np.allclose(lam * model.dual_coef_ + (2.0 / n) * (K @ model.dual_coef_ - y), 0.0, atol=1e-10)
    assert np.allclose(model.predict(x), K @ model.dual_coef_)
    assert np.allclose(model.fitted_, model.predict(x), atol=1e-10)  # the normal equations' fitted values


def test_krr_fits_a_smooth_function():
    x = np.linspace(-1, 1, 200)
    model = GaussianKRR(1e-4, 0.3).fit(x, np.sin(2 * x))
    assert np.max(np.abs(model.predict(x) - np.sin(2 * x))) < 0.05


@pytest.mark.parametrize("lam", [0.0, -1.0, 1.5])
def test_regularization_outside_zero_one_is_refused(lam):
    with pytest.raises(InputError, match="regularization"):
        GaussianKRR(lam).fit([0.0, 1.0], [0.0, 1.0])


def test_nonpositive_kernel_width_is_refused():
    with pytest.raises(InputError, match="width"):
        GaussianKRR(0.1, 0.0).fit([0.0, 1.0], [0.0, 1.0])


unit = st.floats(-1.0, 1.0, allow_nan=False, allow_subnormal=False)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(
    st.integers(5, 30),
    st.sampled_from([0.01, 0.1, 1.0]),
    st.sampled_from([0.1, 0.5]),
    st.integers(0, 2**32 - 1),
    unit,
    unit,
)
def test_one_changed_training_row_moves_each_test_residual_by_at_most_theorem_5(n, lam, width, seed, xk, yk):
    rng = np.random.default_rng(seed)
    x, y = rng.uniform(-1, 1, n), rng.uniform(-1, 1, n)
    x2, y2 = x.copy(), y.copy()
    x2[0], y2[0] = xk, yk
    grid = np.linspace(-1, 1, 41)
    change = np.abs(GaussianKRR(lam, width).fit(x, y).predict(grid) - GaussianKRR(lam, width).fit(x2, y2).predict(grid))
    assert change.max() <= residual_bound(n, lam) + 1e-12


def test_closed_form_leave_one_out_equals_refitting_without_each_point():
    rng = np.random.default_rng(2)
    x = rng.uniform(-1, 1, 25)
    y = np.sin(3 * x) + 0.1 * rng.normal(size=25)
    width, lam = loo_select(x, y, widths=(0.3,), regularizations=(0.01,))
    assert (width, lam) == (0.3, 0.01)
    # the selection criterion itself: brute-force LOO error for two grid points, closed form must rank them alike
    def brute(w, lam_):
        errs = []
        for i in range(25):
            keep = np.arange(25) != i
            # eq. 5 uses c = n lam / 2 with the full n; keep c fixed so the LOO identity is exact
            model = GaussianKRR(lam_ * 25 / 24, w).fit(x[keep], y[keep])
            errs.append((y[i] - model.predict(x[i : i + 1])[0]) ** 2)
        return np.mean(errs)
    best = loo_select(x, y, widths=(0.05, 0.5), regularizations=(1e-3,))
    assert best[0] == min((0.05, 0.5), key=lambda w: brute(w, 1e-3))


def test_leave_one_out_choice_predicts_new_data_better_than_the_fixed_default():
    rng = np.random.default_rng(3)
    x, x_new = rng.uniform(-1, 1, 200), rng.uniform(-1, 1, 2000)
    truth = lambda u: 0.5 * u  # noqa: E731  nearly linear and noisy: the default (0.3, 1e-3) overfits
    y = truth(x) + 0.3 * rng.normal(size=200)
    width, lam = loo_select(x, y)
    chosen = np.mean((GaussianKRR(lam, width).fit(x, y).predict(x_new) - truth(x_new)) ** 2)
    default = np.mean((GaussianKRR(1e-3, 0.3).fit(x, y).predict(x_new) - truth(x_new)) ** 2)
    assert chosen < 0.5 * default
