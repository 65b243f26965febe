"""Paper 000's DP meta-algorithm with DP-EBM: disjoint splits, one ledger charge, bounds, bad input."""

import numpy as np
import pytest

from collabcausal.errors import BudgetExceededError, InputError
from collabcausal.estimators.dp.meta_algorithm import DPCATELearner, DPEBMRegressor, pseudo_outcome_bound
from collabcausal.party.ledger import PrivacyLedger
from collabcausal.simulations.cate_setups import paper000_setup

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


@pytest.fixture(scope="module")
def data():
    return paper000_setup("A", 800, seed=0)


def learner(data, kind="dr", **kw):
    return DPCATELearner(kind, epsilon=kw.pop("epsilon", 4.0), delta=1e-5, feature_bounds=data.feature_bounds,
                         outcome_bounds=kw.pop("outcome_bounds", data.outcome_bounds), random_state=0, **kw)


def test_dr_splits_are_disjoint_with_paper_fractions_and_ledger_is_charged_once(data, tmp_path):
    ledger = PrivacyLedger(tmp_path / "l.db", epsilon=10.0, delta=1e-4)
    model = learner(data, ledger=ledger).fit(data.Y, data.T, X=data.X)
    (r,) = model.model_.plan_
    parts = [r.train["propensity"], r.train["outcome"], r.evaluate]
    assert [p.size for p in parts] == [200, 200, 400]
    assert np.array_equal(np.sort(np.concatenate(parts)), np.arange(800))
    assert len(ledger.history()) == 1
    assert ledger.spent() == pytest.approx((4.0, 1e-5))


def test_r_learner_fits_and_its_effects_are_finite(data):
    model = learner(data, "r", pseudo_outcome_bounds=(-4, 4)).fit(data.Y, data.T, X=data.X)
    assert np.isfinite(model.effect(data.X)).all()


def test_s_learner_on_dp_ebm_is_a_constant_effect_so_its_mse_is_var_tau(data):
    model = learner(data, "s").fit(data.Y, data.T, X=data.X)
    eff = model.effect(data.X)
    assert np.ptp(eff) < 1e-9
    mse = np.mean((eff - data.tau) ** 2)
    assert mse == pytest.approx(np.var(data.tau) + (eff[0] - data.tau.mean()) ** 2)


def test_budget_exceeded_refuses_before_fitting(data, tmp_path):
    ledger = PrivacyLedger(tmp_path / "l.db", epsilon=1.0, delta=1e-4)
    model = learner(data, epsilon=2.0, ledger=ledger)
    with pytest.raises(BudgetExceededError):
        model.fit(data.Y, data.T, X=data.X)
    assert not hasattr(model, "model_")


def test_bad_input_is_refused_with_clear_errors(data, tmp_path):
    with pytest.raises(InputError, match="epsilon"):
        learner(data, epsilon=0.0).fit(data.Y, data.T, X=data.X)
    with pytest.raises(InputError, match="outcome_bounds were not declared"):
        DPCATELearner("dr", epsilon=1.0, feature_bounds=data.feature_bounds).fit(data.Y, data.T, X=data.X)
    ledger = PrivacyLedger(tmp_path / "l.db", epsilon=10.0, delta=1e-4)
    with pytest.raises(InputError, match="fewer than"):
        learner(data, ledger=ledger).fit(data.Y[:30], data.T[:30], X=data.X[:30])
    assert ledger.history() == []
    with pytest.raises(InputError, match="feature_bounds"):
        DPCATELearner("dr", epsilon=1.0, outcome_bounds=(0, 1)).fit(data.Y, data.T, X=data.X)


def test_dp_ebm_regressor_clips_predictions_to_declared_target_bounds():
    rng = np.random.default_rng(0)
    X = rng.uniform(size=(300, 2))
    y = 10 * X[:, 0] + rng.normal(size=300)
    model = DPEBMRegressor(epsilon=1.0, feature_bounds=[(0, 1), (0, 1)], target_bounds=(0.0, 2.0)).fit(X, y)
    pred = model.predict(rng.uniform(-1, 2, size=(50, 2)))
    assert pred.min() >= 0.0 and pred.max() <= 2.0


def test_pseudo_outcome_bounds_follow_from_outcome_range_and_clip():
    assert pseudo_outcome_bound("dr", (0.0, 1.0), 0.1) == pytest.approx(11.0)
    assert pseudo_outcome_bound("r", (0.0, 1.0), 0.1) == pytest.approx(10.0)
