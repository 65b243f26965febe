"""Meta-learners: known answers on linear designs, splitting plans, EconML agreement, bad input."""

import numpy as np
import pytest
from sklearn.linear_model import LinearRegression, LogisticRegression

from collabcausal.errors import InputError
from collabcausal.estimators.metalearners import (
    DRLearner,
    RLearner,
    SLearner,
    TLearner,
    XLearner,
)


def linear_data(n=4000, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    e = 1 / (1 + np.exp(-0.5 * X[:, 0]))
    T = rng.binomial(1, e)
    tau = 1.0 + X[:, 1]
    Y = X @ np.array([1.0, 0.5, -1.0]) + T * tau + rng.normal(size=n)
    return X, T, Y, tau


def learners():
    lin, logit = LinearRegression(), LogisticRegression()
    return {
        "T": TLearner(lin),
        "X": XLearner(lin, propensity_model=logit),
        "DR": DRLearner(logit, LinearRegression(), lin, random_state=0),
        "R": RLearner(lin, logit, lin, random_state=0),
    }


@pytest.mark.parametrize("name", ["T", "X", "DR", "R"])
def test_correctly_specified_learners_recover_linear_cate(name):
    X, T, Y, tau = linear_data()
    model = learners()[name].fit(Y, T, X=X)
    assert np.mean((model.effect(X) - tau) ** 2) < 0.02
    assert model.ate() == pytest.approx(tau.mean(), abs=0.08)
    assert model.att() == pytest.approx(tau[T == 1].mean(), abs=0.08)


def test_s_learner_with_linear_model_gives_the_constant_effect():
    X, T, Y, _ = linear_data()
    model = SLearner(LinearRegression()).fit(Y, T, X=X)
    eff = model.effect(X)
    assert np.ptp(eff) < 1e-9
    assert eff[0] == pytest.approx(1.0, abs=0.08)


def test_dr_ate_inference_covers_the_truth_and_matches_mean_pseudo_outcome():
    X, T, Y, tau = linear_data(seed=3)
    model = DRLearner(LogisticRegression(), LinearRegression(), LinearRegression(), random_state=1).fit(Y, T, X=X)
    res = model.ate_inference()
    assert model.ate_interval() == (res.ci_low, res.ci_high)
    assert res.estimate == pytest.approx(model.pseudo_outcome_.mean())
    assert res.ci_low < tau.mean() < res.ci_high
    assert res.n_treated + res.n_control == X.shape[0] and res.method == "dr-learner"
    assert res.se == pytest.approx(model.pseudo_outcome_.std(ddof=1) / np.sqrt(X.shape[0]))


def test_two_stage_learner_with_split_uses_disjoint_rows():
    X, T, Y, _ = linear_data(n=400)
    model = DRLearner(LogisticRegression(), LinearRegression(), LinearRegression(), split=(0.25, 0.25, 0.5),
                      random_state=0).fit(Y, T, X=X)
    (r,) = model.plan_
    assert model.final_rows_.size == 200
    assert np.intersect1d(r.train["propensity"], r.train["outcome"]).size == 0


def test_too_few_samples_for_a_split_is_refused():
    X, T, Y, _ = linear_data(n=30)
    with pytest.raises(InputError, match="fewer than"):
        DRLearner(LogisticRegression(), LinearRegression(), LinearRegression(), split=(0.25, 0.25, 0.5)).fit(Y, T, X=X)


def test_unfitted_learner_and_wrong_query_width_are_refused():
    model = TLearner(LinearRegression())
    with pytest.raises(InputError, match="not fitted"):
        model.effect(np.zeros((2, 3)))
    X, T, Y, _ = linear_data(n=200)
    model.fit(Y, T, X=X)
    with pytest.raises(InputError, match="4 features, but TLearner is expecting 3"):
        model.effect(np.zeros((2, 4)))
    with pytest.raises(InputError, match="X is required"):
        SLearner(LinearRegression()).fit(Y, T, X=None)


@pytest.mark.parametrize("cv", [2, 3])
def test_dr_learner_equals_econml_drlearner_on_the_same_stratified_folds_and_models(cv):
    # Same integer seed -> the same StratifiedKFold folds on T; same deterministic models and the
    # same propensity clip -> the same pseudo-outcomes and final fit, up to floating point.
    econml_dr = pytest.importorskip("econml.dr")
    X, T, Y, _ = linear_data(n=1500, seed=7)
    ours = DRLearner(LogisticRegression(), LinearRegression(), LinearRegression(), cv=cv, clip=0.01,
                     random_state=11).fit(Y, T, X=X)
    theirs = econml_dr.DRLearner(model_propensity=LogisticRegression(), model_regression=LinearRegression(),
                                 model_final=LinearRegression(), cv=cv, min_propensity=0.01,
                                 random_state=11).fit(Y, T, X=X)
    np.testing.assert_allclose(ours.effect(X), theirs.effect(X).ravel(), rtol=1e-7, atol=1e-8)
    assert ours.ate() == pytest.approx(float(theirs.ate(X)), abs=1e-8)


def test_cross_fitted_nuisances_are_trained_on_both_arms_of_stratified_folds():
    X, T, Y, _ = linear_data(n=600, seed=2)
    model = RLearner(LinearRegression(), LogisticRegression(), LinearRegression(), cv=3, random_state=5).fit(Y, T, X=X)
    share = T.mean()
    for rnd in model.plan_:
        # StratifiedKFold puts floor or ceil of (arm size / folds) of each arm in every fold
        assert abs(T[rnd.evaluate].sum() - share * rnd.evaluate.size) <= 1.0


@pytest.mark.parametrize("kind", ["DR", "R"])
def test_a_split_learner_meeting_a_one_arm_split_refuses_in_one_line_for_every_seed(kind):
    """40 subjects, 2 treated, paper 000's split: an InputError naming the arm counts, never an IndexError."""
    X, _, Y, _ = linear_data(n=40)
    T = np.zeros(40, dtype=int)
    T[:2] = 1
    lin, logit = LinearRegression(), LogisticRegression()
    outcomes = []
    for seed in range(12):
        model = (DRLearner(logit, lin, lin, split=(0.25, 0.25, 0.5), random_state=seed) if kind == "DR"
                 else RLearner(lin, logit, lin, split=(0.25, 0.25, 0.5), random_state=seed))
        try:
            model.fit(Y, T, X=X)
            outcomes.append("fit")
        except InputError as exc:
            assert "propensity split: " in str(exc) and " treated, " in str(exc)
            outcomes.append("refused")
    assert "refused" in outcomes
