"""DP linear baselines: functional mechanism, AdaSSP, objective perturbation, two-model wrapper."""

from __future__ import annotations

import numpy as np
import pytest

from collabcausal.errors import InputError
from collabcausal.estimators.dp.linear_baselines import (
    AdaSSPRegression,
    DPTwoModel,
    FunctionalMechanismRegression,
    ObjectivePerturbationLogistic,
)


@pytest.fixture(scope="module")
def linear_data():
    rng = np.random.default_rng(0)
    Z = rng.uniform(-1, 1, (20000, 2))
    y = np.clip(0.2 + 0.5 * Z[:, 0] - 0.3 * Z[:, 1] + rng.normal(0, 0.05, 20000), -1, 1)
    return Z, y


@pytest.mark.parametrize(
    "make",
    [
        lambda rng: FunctionalMechanismRegression(1e6, rng=rng),
        lambda rng: AdaSSPRegression(1e6, 1e-6, rng=rng),
    ],
    ids=["functional", "adassp"],
)
def test_large_epsilon_recovers_least_squares(linear_data, make):
    Z, y = linear_data
    model = make(np.random.default_rng(1)).fit(Z, y)
    assert model.coef_ == pytest.approx([0.2, 0.5, -0.3], abs=0.01)


def test_functional_mechanism_releases_its_coefficients_with_substitution_sensitivity(monkeypatch):
    import collabcausal.estimators.dp.linear_baselines as lb

    seen = {}

    def spy(values, sensitivity, epsilon, *, rng=None):
        seen.update(n=np.size(values), sensitivity=sensitivity, epsilon=epsilon)
        return np.asarray(values, dtype=float)

    monkeypatch.setattr(lb, "laplace", spy)
    FunctionalMechanismRegression(0.5).fit(np.zeros((4, 2)), np.zeros(4))
    # D = 3 (intercept + 2 features): 3 linear + 3 square + 3 cross coefficients; one subject
    # contributes at most 2*3 + 9 = 15 in L1, a substituted one changes them by 2 * 15.
    assert seen == {"n": 9, "sensitivity": 30.0, "epsilon": 0.5}


def test_adassp_calibrates_its_three_releases_for_substitution(monkeypatch):
    import collabcausal.estimators.dp.linear_baselines as lb

    seen = []

    def spy(values, sensitivity, epsilon, delta, *, rng=None):
        seen.append(sensitivity)
        return np.asarray(values, dtype=float)

    monkeypatch.setattr(lb, "gaussian", spy)
    AdaSSPRegression(0.9, 1e-5).fit(np.zeros((4, 2)), np.zeros(4))
    # B^2 = D = 3: eigenvalue B^2, Gram sqrt(2) B^2, X'y 2 B.
    assert seen == pytest.approx([3.0, np.sqrt(2) * 3.0, 2 * np.sqrt(3.0)])


def test_functional_mechanism_trims_an_indefinite_noisy_objective():
    model = FunctionalMechanismRegression(0.01, rng=np.random.default_rng(3)).fit(np.zeros((5, 2)), np.zeros(5))
    assert np.isfinite(model.coef_).all()
    assert 0 <= model.n_trimmed_ <= 3


def test_objective_perturbation_logistic_recovers_the_direction_at_large_epsilon():
    rng = np.random.default_rng(4)
    Z = rng.uniform(-1, 1, (20000, 1))
    p = 1 / (1 + np.exp(-3 * Z[:, 0]))
    y = np.where(rng.random(20000) < p, 1.0, -1.0)
    model = ObjectivePerturbationLogistic(50.0, regularization=1e-5, rng=rng).fit(Z, y)
    pred = (model.predict(np.array([[-0.9], [0.0], [0.9]])) + 1) / 2
    assert pred[0] < 0.2 and abs(pred[1] - 0.5) < 0.1 and pred[2] > 0.8


def test_two_model_recovers_a_linear_uplift_in_outcome_units():
    rng = np.random.default_rng(5)
    x = rng.uniform(0, 10, (20000, 1))
    t = rng.binomial(1, 0.5, 20000)
    y = 3.0 + t * (0.5 * x[:, 0]) + rng.normal(0, 0.1, 20000)
    model = DPTwoModel(lambda: AdaSSPRegression(1e6, 1e-6, rng=rng), 1, [(0, 10)], (0, 10)).fit(x, t, y)
    assert model.predict(np.array([[0.0], [4.0], [8.0]])) == pytest.approx([0.0, 2.0, 4.0], abs=0.05)


def test_bad_inputs_are_input_errors():
    with pytest.raises(InputError, match="delta > 0"):
        AdaSSPRegression(1.0, 0.0).fit(np.zeros((3, 1)), np.zeros(3))
    with pytest.raises(InputError, match="not fitted"):
        FunctionalMechanismRegression(1.0).predict(np.zeros((1, 1)))
    with pytest.raises(InputError, match="x_bounds"):
        DPTwoModel(lambda: FunctionalMechanismRegression(1.0), 1, [(0, 1)], (0, 1)).fit(
            np.zeros((4, 2)), [0, 1, 0, 1], np.zeros(4)
        )
