"""GP regression with marginal-likelihood hyperparameters (Mooij et al. 2016's ANM regression)."""

import numpy as np
import pytest

from collabcausal.estimators.discovery.gp import fit_gp, fitted_params


def test_gp_recovers_a_smooth_function_and_its_noise_level():
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, 200)
    y = np.sin(3 * x) + 0.1 * rng.normal(size=200)
    xt = np.linspace(-0.9, 0.9, 50)
    model = fit_gp(x, y)
    residuals, (length, noise) = np.sin(3 * xt) - model.predict(xt[:, None]), fitted_params(model)
    assert np.sqrt(np.mean(residuals**2)) < 0.05  # the fit is close to sin(3x)
    assert 0.1 < length < 2.0
    assert noise * np.var(y) == pytest.approx(0.01, rel=0.5)  # noise variance on the data's scale


def test_gp_fit_is_deterministic():
    rng = np.random.default_rng(1)
    x, y = rng.normal(size=80), rng.normal(size=80)
    first, second = fit_gp(x, y), fit_gp(x, y)
    assert first.kernel_ == second.kernel_
    np.testing.assert_array_equal(first.predict(x[:, None]), second.predict(x[:, None]))
