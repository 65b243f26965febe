"""The scikit-learn-style ATE/ATT estimators give exactly the numbers of psm, ipw and aipw."""

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone
from sklearn.linear_model import LogisticRegression, Ridge

from collabcausal.errors import InputError
from collabcausal.estimators import (
    AugmentedIPW,
    InverseProbabilityWeighting,
    LogisticPropensity,
    PropensityScoreMatching,
    aipw,
    ipw,
    psm,
)


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    n = 800
    X = pd.DataFrame(rng.normal(size=(n, 3)), columns=["age", "bmi", "sbp"])
    e = 1 / (1 + np.exp(-(0.6 * X["age"] - 0.4 * X["bmi"])))
    T = rng.binomial(1, e)
    Y = X.to_numpy() @ [1.0, 0.5, -0.3] + 2.0 * T + rng.normal(size=n)
    return X, T, Y


def the_functions(estimator, X, T, Y, e, alpha):
    Xa = X.to_numpy()
    if isinstance(estimator, PropensityScoreMatching):
        return psm(Y, T, e, estimator.estimand, alpha=alpha)
    if isinstance(estimator, InverseProbabilityWeighting):
        return ipw(Y, T, e, estimator.estimand, alpha=alpha)
    return aipw(Y, T, e, Xa, estimator.estimand, alpha=alpha)


@pytest.mark.parametrize("cls", [PropensityScoreMatching, InverseProbabilityWeighting, AugmentedIPW])
@pytest.mark.parametrize("estimand", ["ate", "att"])
def test_same_numbers_as_the_functions_on_the_fitted_propensity(data, cls, estimand):
    X, T, Y = data
    model = cls(estimand=estimand).fit(Y, T, X=X)
    e = LogisticPropensity().fit(X.to_numpy(), T).predict_propensity(X.to_numpy())
    np.testing.assert_allclose(model.propensity_, e, rtol=1e-12)
    ref = the_functions(model, X, T, Y, e, 0.1)
    point = model.ate() if estimand == "ate" else model.att()
    interval = model.ate_interval(alpha=0.1) if estimand == "ate" else model.att_interval(alpha=0.1)
    assert point == pytest.approx(ref.estimate, rel=1e-12)
    np.testing.assert_allclose(interval, (ref.ci_low, ref.ci_high), rtol=1e-12)
    assert isinstance(interval, tuple) and all(isinstance(b, float) for b in interval)
    table = model.summary(alpha=0.1)
    assert list(table.index) == [estimand]
    assert table.loc[estimand, "stderr"] == pytest.approx(ref.se, rel=1e-12)
    np.testing.assert_array_equal(model.feature_names_in_, ["age", "bmi", "sbp"])


def test_asking_for_the_other_estimand_names_the_fix(data):
    X, T, Y = data
    model = InverseProbabilityWeighting(estimand="att").fit(Y, T, X=X)
    with pytest.raises(InputError, match="estimand='ate'"):
        model.ate()
    with pytest.raises(InputError, match="not fitted"):
        AugmentedIPW().ate_interval()
    with pytest.raises(InputError, match="unknown estimand"):
        AugmentedIPW(estimand="atc").fit(Y, T, X=X)


def test_any_classifier_and_regressor_plug_in_and_clone(data):
    X, T, Y = data
    model = AugmentedIPW(propensity_model=LogisticRegression(C=10.0), outcome_model=Ridge(alpha=1.0), clip=0.02)
    twin = clone(model).fit(Y, T, X=X)
    assert twin.propensity_model_.C == 10.0 and model.get_params()["outcome_model__alpha"] == 1.0
    assert twin.propensity_.min() >= 0.02 and twin.propensity_.max() <= 0.98
    assert abs(twin.ate() - 2.0) < 0.3  # seeded data, true effect 2
