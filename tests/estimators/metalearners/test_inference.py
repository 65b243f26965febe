"""EconML's inference API on the meta-learners: types and shapes as EconML's, bootstrap intervals."""

import warnings

import numpy as np
import pandas as pd
import pytest
from sklearn.linear_model import LinearRegression, LogisticRegression

from collabcausal.errors import InputError
from collabcausal.estimators.metalearners import (
    BootstrapInference,
    DRLearner,
    RLearner,
    SLearner,
    TLearner,
    XLearner,
)


def frame_data(n=400, seed=0):
    rng = np.random.default_rng(seed)
    X = pd.DataFrame(rng.normal(size=(n, 2)), columns=["age", "bmi"])
    T = rng.binomial(1, 1 / (1 + np.exp(-0.5 * X["age"].to_numpy())))
    Y = X["age"].to_numpy() + T * (1.0 + X["bmi"].to_numpy()) + rng.normal(size=n)
    return X, T, Y


def ours_and_econml(name):
    metalearners = pytest.importorskip("econml.metalearners")
    econml_dr = pytest.importorskip("econml.dr")
    lin, logit = LinearRegression(), LogisticRegression()
    return {
        "S": (SLearner(lin), metalearners.SLearner(overall_model=lin)),
        "T": (TLearner(lin), metalearners.TLearner(models=lin)),
        "X": (
            XLearner(lin, propensity_model=logit),
            metalearners.XLearner(models=lin, propensity_model=logit),
        ),
        "DR": (
            DRLearner(logit, lin, lin, random_state=0),
            econml_dr.DRLearner(model_propensity=logit, model_regression=lin, model_final=lin, cv=2, random_state=0),
        ),
    }[name]


@pytest.mark.parametrize("name", ["S", "T", "X", "DR"])
def test_return_types_and_shapes_are_econmls_on_the_same_data(name):
    econml_inference = pytest.importorskip("econml.inference")
    X, T, Y = frame_data()
    ours, theirs = ours_and_econml(name)
    ours.fit(Y, T, X=X, inference=BootstrapInference(n_bootstrap_samples=20, random_state=0))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # EconML's own deprecation and convergence chatter
        theirs.fit(Y, T, X=X, inference=econml_inference.BootstrapInference(n_bootstrap_samples=20, n_jobs=1))
        expected = {
            "effect": theirs.effect(X),
            "effect_interval": theirs.effect_interval(X, alpha=0.1),
            "ate": theirs.ate(X),
            "ate_interval": theirs.ate_interval(X, alpha=0.1),
        }
    got = {
        "effect": ours.effect(X),
        "effect_interval": ours.effect_interval(X, alpha=0.1),
        "ate": ours.ate(X),
        "ate_interval": ours.ate_interval(X, alpha=0.1),
    }
    for key in ("effect", "ate"):
        assert np.shape(got[key]) == np.shape(expected[key]), key
    for key in ("effect_interval", "ate_interval"):
        assert isinstance(got[key], tuple) and len(got[key]) == 2, key
        assert [np.shape(b) for b in got[key]] == [np.shape(b) for b in expected[key]], key
    assert isinstance(got["effect"], np.ndarray) and isinstance(got["effect_interval"][0], np.ndarray)
    assert ours.cate_feature_names() == list(theirs.cate_feature_names()) == ["age", "bmi"]
    if name in ("S", "T"):  # deterministic given the data: the very same estimates as EconML's
        np.testing.assert_allclose(got["effect"], expected["effect"], atol=1e-8)
    lower, upper = got["effect_interval"]
    assert np.all(lower <= got["effect"]) and np.all(got["effect"] <= upper)


def test_every_interval_type_is_computed_from_the_replicates_as_documented():
    X, T, Y = frame_data(seed=1)
    reps_by_type = {}
    for kind in ("pivot", "percentile", "normal"):
        model = TLearner(LinearRegression()).fit(
            Y, T, X=X, inference=BootstrapInference(n_bootstrap_samples=30, bootstrap_type=kind, random_state=3)
        )
        reps = np.array([est.ate(X.to_numpy()) for est in model.bootstrap_estimators_])
        reps_by_type[kind] = reps
        est = model.ate(X)
        q_lo, q_hi = np.quantile(reps, [0.05, 0.95])
        expected = {
            "pivot": (2 * est - q_hi, 2 * est - q_lo),
            "percentile": (q_lo, q_hi),
            "normal": (est - 1.6448536269514722 * reps.std(ddof=1), est + 1.6448536269514722 * reps.std(ddof=1)),
        }[kind]
        np.testing.assert_allclose(model.ate_interval(X, alpha=0.1), expected, rtol=1e-12)
    # the seed fixes the resamples: every type saw the same replicates
    np.testing.assert_array_equal(reps_by_type["pivot"], reps_by_type["normal"])


def test_slearner_has_an_ate_interval_that_covers_the_truth():
    X, T, Y = frame_data(n=1000, seed=2)
    model = SLearner(LinearRegression()).fit(Y, T, X=X, inference=BootstrapInference(random_state=0))
    lower, upper = model.ate_interval()
    assert isinstance(lower, float) and lower < model.ate() < upper
    # the true effect is 1 + bmi; its sample mean is the target (seeded data: not a chance failure)
    assert lower < 1.0 + X["bmi"].mean() < upper


def test_intervals_without_inference_are_refused_with_the_fix():
    X, T, Y = frame_data()
    model = TLearner(LinearRegression()).fit(Y, T, X=X)
    with pytest.raises(InputError, match='inference="bootstrap"'):
        model.effect_interval(X)
    with pytest.raises(InputError, match='inference="bootstrap"'):
        model.ate_interval()
    assert BootstrapInference.from_argument("bootstrap") == BootstrapInference()  # EconML's shorthand
    with pytest.raises(InputError, match="unknown inference"):  # checked before any fitting
        TLearner(LinearRegression()).fit(Y, T, X=X, inference="jackknife")


def test_summary_is_a_table_named_by_the_dataframes_columns():
    X, T, Y = frame_data(n=1000, seed=4)
    model = DRLearner(LogisticRegression(), LinearRegression(), LinearRegression(), random_state=0).fit(Y, T, X=X)
    table = model.summary()
    assert list(table.index) == ["ate", "att", "cate_intercept", "cate_coef[age]", "cate_coef[bmi]"]
    assert list(table.columns) == ["point_estimate", "stderr", "ci_lower", "ci_upper"]
    np.testing.assert_allclose(table.loc[["cate_coef[age]", "cate_coef[bmi]"], "point_estimate"],
                               model.model_final_.coef_)
    aipw = model.ate_inference()
    assert table.loc["ate", "stderr"] == pytest.approx(aipw.se)  # analytic, without a bootstrap
    assert np.isnan(table.loc["att", "stderr"])
    assert "cate_coef[bmi]" in str(table)
    np.testing.assert_array_equal(model.feature_names_in_, ["age", "bmi"])


def test_summary_with_bootstrap_has_intervals_for_every_row():
    X, T, Y = frame_data(n=600, seed=5)
    model = RLearner(LinearRegression(), LogisticRegression(), LinearRegression(), random_state=0).fit(
        Y, T, X=X, inference=BootstrapInference(n_bootstrap_samples=20, random_state=0)
    )
    table = model.summary(alpha=0.1)
    assert table.notna().all().all()
    assert (table["ci_lower"] <= table["ci_upper"]).all()


def test_columns_renamed_after_fit_are_refused():
    X, T, Y = frame_data()
    model = SLearner(LinearRegression()).fit(Y, T, X=X)
    with pytest.raises(InputError, match="feature names should match"):
        model.effect(X.rename(columns={"bmi": "weight"}))
