import numpy as np
import pytest
from sklearn.dummy import DummyRegressor
from sklearn.linear_model import LinearRegression

from collabcausal.errors import InputError
from collabcausal.estimators.doubly_robust import aipw
from collabcausal.estimators.weighting import ipw


def _confounded(n, rng, *, nonlinear_outcome=False, noise=1.0):
    X = rng.normal(size=(n, 2))
    e = 1.0 / (1.0 + np.exp(-(0.3 + X[:, 0] + 0.8 * X[:, 1])))
    t = (rng.random(n) < e).astype(int)
    tau = 1.0 + X[:, 0]
    base = X[:, 0] ** 2 + np.exp(X[:, 1]) if nonlinear_outcome else X[:, 0] + 2.0 * X[:, 1]
    y = base + t * tau + noise * rng.normal(size=n)
    return X, t, e, y, tau


def test_ate_and_att_are_exact_when_the_outcome_model_is_exact():
    rng = np.random.default_rng(0)
    X, t, e, y, tau = _confounded(500, rng, noise=0.0)
    assert aipw(y, t, e, X, "ate").estimate == pytest.approx(tau.mean(), abs=1e-10)
    assert aipw(y, t, e, X, "att").estimate == pytest.approx(tau[t == 1].mean(), abs=1e-10)


@pytest.mark.parametrize("estimand", ["ate", "att"])
def test_consistent_with_misspecified_propensity_but_right_outcome_model(estimand):
    rng = np.random.default_rng(1)
    X, t, _, y, tau = _confounded(20000, rng)
    wrong_e = np.full(t.size, 0.5)
    target = tau.mean() if estimand == "ate" else tau[t == 1].mean()
    est = aipw(y, t, wrong_e, X, estimand)
    assert abs(est.estimate - target) < 4 * est.se
    assert abs(ipw(y, t, wrong_e, estimand).estimate - target) > 10 * est.se  # IPW alone is fooled


@pytest.mark.parametrize("estimand", ["ate", "att"])
def test_consistent_with_misspecified_outcome_model_but_right_propensity(estimand):
    rng = np.random.default_rng(2)
    X, t, e, y, tau = _confounded(40000, rng, nonlinear_outcome=True)
    target = tau.mean() if estimand == "ate" else tau[t == 1].mean()
    est = aipw(y, t, e, X, estimand, outcome_model=DummyRegressor())  # arm means: ignores X
    assert abs(est.estimate - target) < 4 * est.se
    naive = y[t == 1].mean() - y[t == 0].mean()  # what the outcome model alone gives
    assert abs(naive - target) > 5 * est.se
    assert est.diagnostics["outcome_model"] == "DummyRegressor"


def test_default_outcome_model_equals_sklearn_linear_regression_and_the_model_is_cloned():
    rng = np.random.default_rng(3)
    X, t, e, y, _ = _confounded(300, rng)
    model = LinearRegression()
    ours = aipw(y, t, e, X, "ate")
    theirs = aipw(y, t, e, X, "ate", outcome_model=model)
    assert ours.estimate == pytest.approx(theirs.estimate, abs=1e-10)
    np.testing.assert_allclose(ours.diagnostics["mu1_hat"], theirs.diagnostics["mu1_hat"], atol=1e-10)
    assert not hasattr(model, "coef_")
    assert theirs.diagnostics["outcome_model"] == "LinearRegression"


def test_influence_function_se_matches_the_monte_carlo_spread():
    rng = np.random.default_rng(4)
    estimates, ses = [], []
    for _ in range(200):
        X, t, e, y, _ = _confounded(400, rng)
        est = aipw(y, t, e, X, "ate")
        estimates.append(est.estimate)
        ses.append(est.se)
    assert np.mean(ses) == pytest.approx(np.std(estimates), rel=0.15)


def test_aipw_validates_its_inputs():
    rng = np.random.default_rng(5)
    X, t, e, y, _ = _confounded(50, rng)
    with pytest.raises(InputError, match="rows"):
        aipw(y, t, e, X[:-1])
    with pytest.raises(InputError, match=r"\(0, 1\)"):
        aipw(y, t, np.ones_like(e), X)
    with pytest.raises(InputError, match="0/1"):
        aipw(y, t + 2, e, X)
    with pytest.raises(InputError, match="too few"):
        aipw(y[:6], np.array([1, 1, 0, 0, 0, 0]), e[:6], np.hstack([X, X ** 2])[:6])


@pytest.mark.parametrize("estimand", ["ate", "att"])
def test_aipw_without_se_gives_the_same_estimate(estimand):
    rng = np.random.default_rng(4)
    X = rng.normal(size=(300, 3))
    t = (rng.random(300) < 0.4).astype(int)
    y = X @ np.array([1.0, -0.5, 0.2]) + t + rng.normal(size=300)
    e = np.full(300, 0.4)
    full = aipw(y, t, e, X, estimand)
    quick = aipw(y, t, e, X, estimand, compute_se=False)
    assert quick.estimate == full.estimate and full.se is not None
    assert quick.se is None and quick.ci_low is None and "influence" not in quick.diagnostics
    assert quick.diagnostics["se_kind"] == "not computed"
