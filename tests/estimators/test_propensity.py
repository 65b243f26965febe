import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression

from collabcausal.errors import InputError, NumericalError
from collabcausal.estimators.propensity import LogisticPropensity


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    n = 1500
    X = rng.normal(size=(n, 4)) + np.array([0.0, 1.0, -2.0, 0.5])
    logit = 0.3 + X @ np.array([0.8, -0.5, 0.3, 0.0])
    t = (rng.random(n) < 1.0 / (1.0 + np.exp(-logit))).astype(int)
    return X, t


def test_unpenalized_fit_matches_sklearn_to_1e_6(data):
    X, t = data
    ours = LogisticPropensity().fit(X, t)
    ref = LogisticRegression(C=np.inf, tol=1e-12, max_iter=10000).fit(X, t)
    assert ours.converged_
    np.testing.assert_allclose(ours.coef_, ref.coef_[0], atol=1e-6)
    assert ours.intercept_ == pytest.approx(ref.intercept_[0], abs=1e-6)
    np.testing.assert_allclose(ours.predict_propensity(X), ref.predict_proba(X)[:, 1], atol=1e-6)


def test_l2_penalty_equals_sklearn_with_c_the_inverse_penalty(data):
    X, t = data
    ours = LogisticPropensity(penalty=5.0).fit(X, t)
    ref = LogisticRegression(C=0.2, tol=1e-12, max_iter=10000).fit(X, t)
    np.testing.assert_allclose(ours.coef_, ref.coef_[0], atol=1e-6)
    assert ours.intercept_ == pytest.approx(ref.intercept_[0], abs=1e-6)


def test_without_intercept_matches_sklearn(data):
    X, t = data
    ours = LogisticPropensity(fit_intercept=False).fit(X, t)
    ref = LogisticRegression(C=np.inf, fit_intercept=False, tol=1e-12, max_iter=10000).fit(X, t)
    np.testing.assert_allclose(ours.coef_, ref.coef_[0], atol=1e-6)
    assert ours.intercept_ == 0.0


def test_propensities_are_invariant_to_invertible_affine_maps(data):
    X, t = data
    rng = np.random.default_rng(1)
    A = rng.normal(size=(4, 4)) * np.array([1e3, 1.0, 1e-2, 50.0])
    base = LogisticPropensity().fit(X, t).predict_propensity(X)
    Xa = X @ A + rng.normal(size=4) * 100
    np.testing.assert_allclose(LogisticPropensity().fit(Xa, t).predict_propensity(Xa), base, atol=1e-8)


def test_one_column_scaled_by_1e6_gives_the_same_fit(data):
    X, t = data
    Xs = X.copy()
    Xs[:, 2] *= 1e6
    base = LogisticPropensity().fit(X, t)
    scaled = LogisticPropensity().fit(Xs, t)
    np.testing.assert_allclose(scaled.predict_propensity(Xs), base.predict_propensity(X), atol=1e-8)
    assert scaled.coef_[2] * 1e6 == pytest.approx(base.coef_[2], rel=1e-7)


def test_converges_on_collaborative_representation_like_scaling():
    rng = np.random.default_rng(2)
    n = 800
    Z = rng.normal(size=(n, 3))
    t = (rng.random(n) < 1.0 / (1.0 + np.exp(-(Z @ np.array([1.0, -1.0, 0.5]))))).astype(int)
    mixing = np.diag([1e3, 1.0, 1e-3]) @ np.linalg.qr(rng.normal(size=(3, 3)))[0]  # singular values 1e3..1e-3
    model = LogisticPropensity().fit(Z @ mixing, t)
    ref = LogisticRegression(C=np.inf, tol=1e-12, max_iter=10000).fit(Z, t)
    np.testing.assert_allclose(model.predict_propensity(Z @ mixing), ref.predict_proba(Z)[:, 1], atol=1e-6)
    assert model.n_iter_ < 20


def test_clip_bounds_the_predicted_propensities(data):
    X, t = data
    e_raw = LogisticPropensity().fit(X, t).predict_propensity(X)
    e = LogisticPropensity(clip=(0.2, 0.8)).fit(X, t).predict_propensity(X)
    assert e.min() == 0.2 and e.max() == 0.8
    inside = (e_raw > 0.2) & (e_raw < 0.8)
    np.testing.assert_array_equal(e[inside], e_raw[inside])


def test_complete_separation_raises_numerical_error_naming_it():
    x = np.linspace(-2, 2, 40)[:, None]
    t = (x[:, 0] > 0).astype(int)
    with pytest.raises(NumericalError, match="separated"):
        LogisticPropensity().fit(x, t)


def test_penalty_makes_a_separated_problem_solvable():
    x = np.linspace(-2, 2, 40)[:, None]
    t = (x[:, 0] > 0).astype(int)
    e = LogisticPropensity(penalty=1.0).fit(x, t).predict_propensity(x)
    assert np.all((e > 0) & (e < 1)) and e[-1] > 0.9


def test_collinear_columns_raise_numerical_error():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(100, 2))
    X = np.column_stack([X, X[:, 0] - 2 * X[:, 1]])
    t = rng.integers(0, 2, 100)
    with pytest.raises(NumericalError, match="collinear"):
        LogisticPropensity().fit(X, t)


def test_too_few_iterations_raise_non_convergence(data):
    X, t = data
    with pytest.raises(NumericalError, match="did not converge"):
        LogisticPropensity(max_iter=1, tol=1e-300).fit(X, t)


@pytest.mark.parametrize(
    ("params", "match"),
    [({"penalty": -1.0}, "penalty"), ({"clip": (0.0, 0.9)}, "clip"), ({"clip": (0.9, 0.1)}, "clip"),
     ({"max_iter": 0}, "max_iter"), ({"tol": 0.0}, "tol")],
)
def test_bad_parameters_raise_input_error(data, params, match):
    X, t = data
    with pytest.raises(InputError, match=match):
        LogisticPropensity(**params).fit(X, t)


def test_bad_inputs_raise_input_error(data):
    X, t = data
    with pytest.raises(InputError, match="Only binary"):
        LogisticPropensity().fit(X, t + t[::-1])
    with pytest.raises(InputError, match="1 class"):
        LogisticPropensity().fit(X, np.ones_like(t))
    with pytest.raises(InputError, match="NaN"):
        LogisticPropensity().fit(np.where(X > 3, np.nan, X), t)
    with pytest.raises(InputError, match="entries"):
        LogisticPropensity().fit(X, t[:-1])
    with pytest.raises(InputError, match="not fitted"):
        LogisticPropensity().predict_propensity(X)
    with pytest.raises(InputError, match="2 features, but LogisticPropensity is expecting 4"):
        LogisticPropensity().fit(X, t).predict_propensity(X[:, :2])


def test_propensity_stays_inside_the_open_interval_where_the_logit_underflows():
    """A quasi-separated subject's logit below -745 (LaLonde B-clb resamples: 14 of 200) gave e == 0 exactly."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(200, 1))
    t = rng.binomial(1, 1 / (1 + np.exp(-2 * x[:, 0])))
    model = LogisticPropensity().fit(x, t)
    far = np.array([[-1e4], [1e4]])
    assert np.abs(model.decision_function(far)).min() > 745
    e = model.predict_propensity(far)
    assert 0.0 < e[0] < 1e-300 and 1 - 1e-15 < e[1] < 1.0


def test_a_start_logit_near_the_optimum_gives_the_same_fit_in_fewer_iterations(data):
    """A bootstrap replicate starts from the full-sample logits of its subjects (issue 24)."""
    X, t = data
    full = LogisticPropensity().fit(X, t)
    rows = np.random.default_rng(1).integers(0, X.shape[0], X.shape[0])
    cold = LogisticPropensity().fit(X[rows], t[rows])
    warm = LogisticPropensity().fit(X[rows], t[rows], start_logit=full.decision_function(X[rows]))
    assert warm.n_iter_ < cold.n_iter_
    np.testing.assert_allclose(warm.coef_, cold.coef_, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(warm.predict_propensity(X), cold.predict_propensity(X), rtol=1e-8, atol=1e-12)


@pytest.mark.parametrize("scale", [-50.0, 1e6])
def test_a_poor_start_logit_is_not_taken_and_the_fit_is_unchanged(data, scale):
    X, t = data
    cold = LogisticPropensity().fit(X, t)
    wild = LogisticPropensity().fit(X, t, start_logit=scale * cold.decision_function(X))
    assert wild.n_iter_ == cold.n_iter_
    np.testing.assert_array_equal(wild.coef_, cold.coef_)


def test_a_start_logit_of_the_wrong_length_or_not_finite_is_refused(data):
    X, t = data
    with pytest.raises(InputError, match="start_logit has 3 entries"):
        LogisticPropensity().fit(X, t, start_logit=np.zeros(3))
    with pytest.raises(InputError, match="start_logit contains NaN"):
        LogisticPropensity().fit(X, t, start_logit=np.full(X.shape[0], np.nan))


def test_a_fit_without_its_checks_is_the_checked_fit_on_checked_input(data):
    X, t = data
    start = 0.3 + X @ np.array([0.7, -0.4, 0.2, 0.1])
    checked = LogisticPropensity().fit(X, t, start_logit=start)
    bare = LogisticPropensity().fit(X.astype(np.float64), t.astype(np.int8), start_logit=start, check_input=False)
    np.testing.assert_array_equal(bare.coef_, checked.coef_)
    assert bare.intercept_ == checked.intercept_ and bare.n_features_in_ == 4
    np.testing.assert_array_equal(bare.classes_, checked.classes_)
    np.testing.assert_array_equal(bare.predict_propensity(X, check_input=False), checked.predict_propensity(X))
