"""Analytic IPW/AIPW SEs with the propensity estimated, against independent computations.

The reference is the textbook stacked M-estimation sandwich ``A^{-1} B A^{-T} / n`` built here
from scratch: every estimating equation written out from its definition, the Jacobian ``A`` by
central finite differences, ``B`` the mean outer product. It shares no code with
:mod:`collabcausal.estimators.sandwich`.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import expit

from collabcausal.errors import InputError
from collabcausal.estimators import LogisticPropensity, aipw, ipw, psm
from collabcausal.estimators.sandwich import LogisticNuisance


def _data(seed: int, n: int = 600):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2))
    t = (rng.random(n) < expit(0.2 + X @ [0.8, -0.6])).astype(np.int8)
    y = 1.0 + X @ [1.0, 2.0] + t * (1.0 + 0.5 * X[:, 0]) + rng.normal(size=n)
    return X, t, y


def _numerical_sandwich(psi, theta: np.ndarray) -> np.ndarray:
    """A^{-1} B A^{-T} / n with A the finite-difference Jacobian of mean psi at theta."""
    values = psi(theta)
    n, k = values.shape
    A = np.empty((k, k))
    for j in range(k):
        h = 1e-5 * max(1.0, abs(theta[j]))
        up, down = theta.copy(), theta.copy()
        up[j] += h
        down[j] -= h
        A[:, j] = (psi(up).mean(axis=0) - psi(down).mean(axis=0)) / (2 * h)
    B = values.T @ values / n
    Ainv = np.linalg.inv(A)
    return Ainv @ B @ Ainv.T / n


def _logistic(X, t):
    model = LogisticPropensity(tol=1e-14).fit(X, t)
    return np.r_[model.intercept_, model.coef_]


def _ipw_reference_se(X, t, y, estimand: str, normalized: bool) -> tuple[float, float]:
    Z = np.column_stack([np.ones(len(t)), X])
    beta = _logistic(X, t)
    p = Z.shape[1]

    def parts(b):
        e_b = expit(Z @ b)
        if estimand == "ate":
            r1, r0 = t / e_b, (1 - t) / (1 - e_b)
            d1, d0 = (r1, r0) if normalized else (np.ones_like(e_b), np.ones_like(e_b))
        else:
            r1, r0 = t * 1.0, (1 - t) * e_b / (1 - e_b)
            d1, d0 = (r1, r0) if normalized else (t * 1.0, t * 1.0)
        return e_b, r1, r0, d1, d0

    _, r1, r0, d1, d0 = parts(beta)
    theta = np.r_[beta, (r1 @ y) / d1.sum(), (r0 @ y) / d0.sum()]

    def psi(th):
        b, mu1, mu0 = th[:p], th[p], th[p + 1]
        e_b, r1, r0, d1, d0 = parts(b)
        return np.column_stack([Z * (t - e_b)[:, None], r1 * y - mu1 * d1, r0 * y - mu0 * d0])

    V = _numerical_sandwich(psi, theta)
    c = np.zeros(p + 2)
    c[p], c[p + 1] = 1.0, -1.0
    return float(theta[p] - theta[p + 1]), float(np.sqrt(c @ V @ c))


@pytest.mark.parametrize("estimand", ["ate", "att"])
@pytest.mark.parametrize("normalized", [True, False])
def test_ipw_se_with_estimated_propensity_equals_numerical_stacked_sandwich(estimand, normalized):
    X, t, y = _data(0)
    e = LogisticPropensity(tol=1e-14).fit(X, t).predict_propensity(X)
    ours = ipw(y, t, e, estimand, normalized, X_propensity=X)
    estimate, se = _ipw_reference_se(X, t, y, estimand, normalized)
    assert ours.estimate == pytest.approx(estimate, rel=1e-10)
    assert ours.se == pytest.approx(se, rel=1e-6)
    assert ours.diagnostics["se_kind"] == "propensity estimated"
    assert abs(ours.diagnostics["influence"].mean()) < 1e-8 * ours.diagnostics["influence"].std()


def _aipw_reference_se(X, t, y, estimand: str) -> tuple[float, float]:
    n = len(t)
    Z = np.column_stack([np.ones(n), X])
    p = Z.shape[1]
    beta = _logistic(X, t)
    alpha1 = np.linalg.lstsq(Z[t == 1], y[t == 1], rcond=None)[0]
    alpha0 = np.linalg.lstsq(Z[t == 0], y[t == 0], rcond=None)[0]

    def effect_terms(b, a1, a0):
        e_b = expit(Z @ b)
        m1, m0 = Z @ a1, Z @ a0
        if estimand == "ate":
            return m1 - m0 + t * (y - m1) / e_b - (1 - t) * (y - m0) / (1 - e_b)
        return (t - (1 - t) * e_b / (1 - e_b)) * (y - m0)

    phi = effect_terms(beta, alpha1, alpha0)
    tau = phi.mean() if estimand == "ate" else phi.sum() / t.sum()
    theta = np.r_[beta, alpha1, alpha0, tau]

    def psi(th):
        b, a1, a0, tau_ = th[:p], th[p : 2 * p], th[2 * p : 3 * p], th[3 * p]
        e_b = expit(Z @ b)
        cols = [
            Z * (t - e_b)[:, None],
            Z * (t * (y - Z @ a1))[:, None],
            Z * ((1 - t) * (y - Z @ a0))[:, None],
        ]
        term = effect_terms(b, a1, a0) - (tau_ if estimand == "ate" else tau_ * t)
        return np.column_stack([*cols, term])

    V = _numerical_sandwich(psi, theta)
    return float(tau), float(np.sqrt(V[-1, -1]))


@pytest.mark.parametrize("estimand", ["ate", "att"])
@pytest.mark.parametrize("outcome_misspecified", [False, True])
def test_aipw_se_with_estimated_nuisances_equals_numerical_stacked_sandwich(estimand, outcome_misspecified):
    X, t, y = _data(1)
    if outcome_misspecified:
        y = y + 2.0 * X[:, 1] ** 2  # outcome model linear in X: now wrong, the stacking matters
    e = LogisticPropensity(tol=1e-14).fit(X, t).predict_propensity(X)
    ours = aipw(y, t, e, X, estimand, X_propensity=X)
    estimate, se = _aipw_reference_se(X, t, y, estimand)
    assert ours.estimate == pytest.approx(estimate, rel=1e-10)
    assert ours.se == pytest.approx(se, rel=1e-6)
    assert ours.diagnostics["se_kind"] == "outcome models estimated, propensity estimated"


def test_ipw_se_equals_post_stratification_formula_for_a_saturated_propensity():
    """One binary covariate: Hajek IPW is the post-stratified difference of means, whose variance
    is (1/n^2) sum_s n_s [(tau_s - tau)^2 + s1_s^2 / pi_s + s0_s^2 / (1 - pi_s)] (ddof-0 variances)."""
    rng = np.random.default_rng(3)
    n = 900
    x = (rng.random(n) < 0.4).astype(float)
    t = (rng.random(n) < np.where(x == 1, 0.7, 0.3)).astype(np.int8)
    y = 2.0 * x + t * (1.0 + x) + rng.normal(size=n) * (1.0 + x)
    e = LogisticPropensity(tol=1e-14).fit(x[:, None], t).predict_propensity(x[:, None])
    ours = ipw(y, t, e, "ate", X_propensity=x[:, None])
    cells = [x == v for v in (0.0, 1.0)]
    tau_s = [y[c & (t == 1)].mean() - y[c & (t == 0)].mean() for c in cells]
    tau = sum(c.mean() * ts for c, ts in zip(cells, tau_s, strict=True))
    var = 0.0
    for c, ts in zip(cells, tau_s, strict=True):
        pi = t[c].mean()
        var += c.sum() * ((ts - tau) ** 2 + y[c & (t == 1)].var() / pi + y[c & (t == 0)].var() / (1 - pi))
    assert ours.estimate == pytest.approx(tau, rel=1e-12)
    assert ours.se == pytest.approx(np.sqrt(var) / n, rel=1e-9)
    known = ipw(y, t, e, "ate")
    assert known.se > ours.se  # treating the estimated propensity as known overstates the SE


def test_ipw_and_aipw_match_statsmodels_treatment_effect():
    te_module = pytest.importorskip("statsmodels.treatment.treatment_effects")
    import statsmodels.api as sm

    X, t, y = _data(2, n=800)
    Z = sm.add_constant(X)
    te = te_module.TreatmentEffect(sm.OLS(y, Z), t, results_select=sm.Logit(t, Z).fit(disp=0))
    e = LogisticPropensity(tol=1e-14).fit(X, t).predict_propensity(X)
    checks = [
        (te.ipw(return_results=True, effect_group="all", disp=False), ipw(y, t, e, "ate", X_propensity=X)),
        (te.ipw(return_results=True, effect_group=1, disp=False), ipw(y, t, e, "att", X_propensity=X)),
        (te.aipw(return_results=True, disp=False), aipw(y, t, e, X, "ate", X_propensity=X)),
    ]
    for reference, ours in checks:
        assert ours.estimate == pytest.approx(reference.effect[0], rel=1e-6)
        assert ours.se == pytest.approx(reference.sd[0], rel=1e-5)


def test_clipped_or_foreign_propensity_is_refused_for_the_estimated_propensity_se():
    X, t, y = _data(4)
    e = LogisticPropensity(clip=(0.2, 0.8)).fit(X, t).predict_propensity(X)
    with pytest.raises(InputError, match="not the unpenalized logistic fit"):
        ipw(y, t, e, X_propensity=X)
    with pytest.raises(InputError, match="not the unpenalized logistic fit"):
        aipw(y, t, np.full(t.size, 0.5), X, X_propensity=X)


@pytest.mark.parametrize("estimand", ["ate", "att"])
def test_one_logistic_nuisance_shared_by_the_estimators_gives_their_standard_errors(estimand):
    X, t, y = _data(5)
    e = LogisticPropensity().fit(X, t).predict_propensity(X)
    shared = LogisticNuisance(X, t, e)
    pairs = [
        (ipw(y, t, e, estimand, X_propensity=X), ipw(y, t, e, estimand, X_propensity=shared)),
        (aipw(y, t, e, X, estimand, X_propensity=X), aipw(y, t, e, X, estimand, X_propensity=shared)),
        (psm(y, t, e, estimand, X_propensity=X), psm(y, t, e, estimand, X_propensity=shared)),
    ]
    for own, with_shared in pairs:
        assert with_shared.se == pytest.approx(own.se, rel=1e-12)


def test_a_logistic_nuisance_of_other_propensities_is_refused():
    X, t, y = _data(6)
    e = LogisticPropensity().fit(X, t).predict_propensity(X)
    other = LogisticPropensity().fit(X[:, :1], t).predict_propensity(X[:, :1])
    shared = LogisticNuisance(X[:, :1], t, other)
    with pytest.raises(InputError, match="another treatment or other propensities"):
        ipw(y, t, e, X_propensity=shared)


def test_the_estimators_without_their_checks_give_the_checked_estimates():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(400, 3))
    t = (rng.random(400) < 1.0 / (1.0 + np.exp(-X[:, 0]))).astype(np.int8)
    y = X @ np.array([1.0, 0.5, -0.5]) + 2.0 * t + rng.normal(size=400)
    e = LogisticPropensity().fit(X, t).predict_propensity(X)
    for estimand in ("ate", "att"):
        for estimator, args in ((psm, (y, t, e)), (ipw, (y, t, e)), (aipw, (y, t, e, X))):
            checked = estimator(*args, estimand=estimand, X_propensity=X)
            bare = estimator(*args, estimand=estimand, X_propensity=X, check_input=False)
            assert (bare.estimate, bare.se) == (checked.estimate, checked.se)
