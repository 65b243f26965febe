"""Paper 000's DP meta-algorithm with DP-EBM: disjoint splits, one ledger charge, bounds, bad input."""

import warnings

import numpy as np
import pytest

from collabcausal.errors import BudgetExceededError, InputError, PolicyError
from collabcausal.estimators.dp.mechanisms import gaussian_delta
from collabcausal.estimators.dp.meta_algorithm import (
    DPCATELearner,
    DPEBMClassifier,
    DPEBMRegressor,
    gdp_epsilon,
    gdp_mu,
    pseudo_outcome_bound,
    substitution_dp_ebm_budget,
)
from collabcausal.ledger import PrivacyLedger
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
    # Additive in T: mu(x, 1) - mu(x, 0) is one constant wherever the predictions are not clipped
    # to the declared outcome range (the clip is post-processing and bends the difference).
    ebm, (lo, hi) = model.model_.model_.model_, data.outcome_bounds
    raw = [ebm.predict(np.c_[data.X, np.full(len(data.X), t)]) for t in (0.0, 1.0)]
    inside = np.all([(r > lo) & (r < hi) for r in raw], axis=0)
    assert inside.mean() > 0.5
    assert np.ptp(eff[inside]) < 1e-9
    mse = np.mean((eff[inside] - data.tau[inside]) ** 2)
    assert mse == pytest.approx(np.var(data.tau[inside]) + (eff[inside][0] - data.tau[inside].mean()) ** 2)


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


def test_dp_ebm_regressor_refuses_sample_weights_whose_max_would_scale_the_noise():
    """Issue 11 item 2, the attack: interpret scales DP-EBM noise by the observed max(sample_weight)
    and bins with the exact weight sum, so neighbours differing in one weight (0.01 vs 0.81) would get
    visibly different noise. Weights are refused in DP mode."""
    from interpret.privacy import DPExplainableBoostingRegressor

    rng = np.random.default_rng(0)
    X, y = rng.uniform(size=(100, 1)), rng.uniform(size=100)
    neighbours = [np.r_[np.full(99, 0.01), top] for top in (0.01, 0.81)]
    raw = [DPExplainableBoostingRegressor(epsilon=1.0, privacy_bounds={0: (0, 1)}, privacy_target_min=0.0,
                                          privacy_target_max=1.0, max_rounds=5).fit(X, y, sample_weight=w)
           for w in neighbours]
    # The attack on raw interpret: the released noise scale itself reveals the changed weight (81x).
    assert raw[1].noise_scale_boosting_ / raw[0].noise_scale_boosting_ == pytest.approx(81.0)
    model = DPEBMRegressor(epsilon=1.0, feature_bounds=[(0, 1)], target_bounds=(0.0, 1.0))
    for w in neighbours:
        with pytest.raises(PolicyError, match="sample_weight"):
            model.fit(X, y, sample_weight=w)
    assert not hasattr(model, "model_")


def test_dp_r_learner_final_stage_is_fitted_without_weights_so_its_noise_is_data_independent(data):
    """The DP R-learner's final DP-EBM regresses Y~/T~ unweighted: interpret's noise scale is then
    set by the declared bounds alone (max weight 1), identical across fits on different data."""
    scales = set()
    for seed in (0, 1):
        other = paper000_setup("A", 800, seed=seed)
        model = learner(other, "r", pseudo_outcome_bounds=(-4, 4)).fit(other.Y, other.T, X=other.X)
        assert model.model_.final_weights_ is not None  # the R-loss weights exist ...
        scales.add(model.model_.model_final_.model_.noise_scale_boosting_)  # ... but never reach interpret
    assert len(scales) == 1


def _raw_dp_ebm(epsilon, delta, X, y):
    from interpret.privacy import DPExplainableBoostingRegressor

    return DPExplainableBoostingRegressor(epsilon=epsilon, delta=delta, privacy_bounds={0: (0, 1), 1: (0, 1)},
                                          privacy_target_min=0.0, privacy_target_max=2.0, max_rounds=20).fit(X, y)


@pytest.mark.parametrize("epsilon", [0.5, 1.0, 4.0])
def test_dp_ebm_noise_is_calibrated_for_substitution_not_interprets_add_remove(epsilon, monkeypatch):
    """Issue 11 item 3: interpret calibrates add/remove; a substituted record moves two histogram
    cells (L2 sqrt(2)) and can change one residual sum by 2R. Our adapter asks interpret for the
    converted budget, so its noise is exactly sqrt(2) (binning) and 2 (boosting) times interpret's
    add/remove noise at the requested eps, and each part's exact (Balle-Wang) delta under the
    substitution sensitivity is the half-delta interpret assigns it."""
    from interpret.privacy import DPExplainableBoostingRegressor

    delta = 1e-5
    rng = np.random.default_rng(0)
    X, y = rng.uniform(size=(200, 2)), rng.uniform(0, 2, size=200)
    real_init = DPExplainableBoostingRegressor.__init__
    monkeypatch.setattr(DPExplainableBoostingRegressor, "__init__",
                        lambda self, **kw: real_init(self, **{**kw, "max_rounds": 20}))
    ours = DPEBMRegressor(epsilon=epsilon, delta=delta, feature_bounds=[(0, 1), (0, 1)],
                          target_bounds=(0.0, 2.0)).fit(X, y).model_
    raw = _raw_dp_ebm(epsilon, delta, X, y)
    assert ours.noise_scale_binning_ / raw.noise_scale_binning_ == pytest.approx(np.sqrt(2), rel=1e-6)
    assert ours.noise_scale_boosting_ / raw.noise_scale_boosting_ == pytest.approx(2.0, rel=1e-6)
    f = 0.1  # interpret's default bin_budget_frac: the requested eps is split 0.1 / 0.9, delta in halves
    queries = ours.max_rounds * len(ours.term_features_) * ours.outer_bags
    binning = gaussian_delta(ours.noise_scale_binning_, np.sqrt(2 * X.shape[1]), f * epsilon)
    boosting = gaussian_delta(ours.noise_scale_boosting_, 2 * 2.0 * ours.learning_rate * np.sqrt(queries),
                              (1 - f) * epsilon)
    assert binning == pytest.approx(delta / 2, rel=1e-4)
    assert boosting == pytest.approx(delta / 2, rel=1e-4)


def test_gdp_epsilon_inverts_gdp_mu_and_the_budget_converter_refuses_bad_input():
    for eps in (0.1, 1.0, 10.0):
        assert gdp_epsilon(gdp_mu(eps, 1e-6), 1e-6) == pytest.approx(eps, rel=1e-7)
    interpret_eps, frac = substitution_dp_ebm_budget(1.0, 1e-5)
    assert 0.4 < interpret_eps < 0.5 and 0.1 < frac < 0.2
    with pytest.raises(InputError, match="epsilon"):
        substitution_dp_ebm_budget(0.0, 1e-5)


def test_noise_seed_reproduces_the_dp_ebm_noise_for_experiments(data):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fits = [learner(data, "r", pseudo_outcome_bounds=(-4, 4), noise_seed=s).fit(data.Y, data.T, X=data.X)
                for s in (7, 7, 8)]
    # the caller chose seeded noise: interpret's per-fit "Privacy violation" warning is not repeated
    assert not [w for w in caught if "Privacy violation" in str(w.message)]
    effects = [f.effect(data.X[:20]) for f in fits]
    assert np.array_equal(effects[0], effects[1])
    assert not np.array_equal(effects[0], effects[2])


def test_a_noise_seed_with_a_ledger_is_refused_before_any_charge(data, tmp_path):
    """Red team: noise_seed makes interpret's noise reproducible (NOT private); charging the ledger for
    such a fit would record a DP release that is not one."""
    ledger = PrivacyLedger(tmp_path / "l.db", epsilon=10.0, delta=1e-4)
    with pytest.raises(PolicyError, match="reproducible noise"):
        learner(data, ledger=ledger, noise_seed=3).fit(data.Y, data.T, X=data.X)
    assert ledger.history() == []


@pytest.mark.parametrize("bad", ["treatment 2", "NaN outcome", "short treatment"])
def test_bad_outcomes_or_treatments_are_refused_before_the_charge(data, tmp_path, bad):
    """Red team: Y and T were validated inside the learners, after the ledger was charged."""
    Y, T = data.Y.copy(), data.T.copy()
    if bad == "treatment 2":
        T[0] = 2
    elif bad == "NaN outcome":
        Y[0] = np.nan
    else:
        T = T[:-1]
    ledger = PrivacyLedger(tmp_path / "l.db", epsilon=10.0, delta=1e-4)
    with pytest.raises(InputError):
        learner(data, ledger=ledger).fit(Y, T, X=data.X)
    assert ledger.history() == []


def _one_treated(n=40, treated=1, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 1, (n, 2))
    T = np.zeros(n)
    T[:treated] = 1
    return rng.uniform(0, 1, n), T, X


@pytest.mark.parametrize("seed", range(12))
def test_dr_learner_with_one_treated_refuses_before_charging_naming_the_arm_counts_per_split(tmp_path, seed):
    """40 subjects, 1 treated: no split plan gives both DR nuisances a treated subject (issue 22, item 7)."""
    Y, T, X = _one_treated()
    ledger = PrivacyLedger(tmp_path / "l.db", epsilon=10.0, delta=1e-4)
    model = DPCATELearner("dr", epsilon=1.0, feature_bounds=[(0, 1)] * 2, outcome_bounds=(0, 1), ledger=ledger,
                          random_state=seed)
    with pytest.raises(InputError, match=r"propensity split: \d+ treated, \d+ control.*final stage") as caught:
        model.fit(Y, T, X=X)
    assert "\n" not in str(caught.value) and ledger.history() == []


def test_dp_ebm_classifier_refuses_one_class():
    with pytest.raises(InputError, match="1 class"):
        DPEBMClassifier(feature_bounds=[(0, 1)]).fit(np.zeros((20, 1)), np.zeros(20))
