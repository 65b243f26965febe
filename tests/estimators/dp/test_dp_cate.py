"""DP-CATE (paper 004): calibration constants, influence functions, GP batch vs iterative, ledger, bad input."""

import numpy as np
import pytest
from sklearn.ensemble import GradientBoostingClassifier, GradientBoostingRegressor

from collabcausal.errors import InputError, PolicyError
from collabcausal.estimators.dp import mechanisms
from collabcausal.estimators.dp.dp_cate import DPCATE, c_factor, gaussian_kernel
from collabcausal.estimators.dp.dp_cate_functional import GaussianProcessPath
from collabcausal.ledger import PrivacyLedger
from collabcausal.simulations.cate_setups import paper004_dataset

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


@pytest.fixture(scope="module")
def data():
    return paper004_dataset(1, 500, seed=0)


def fitted(data, stage, **kw):
    return DPCATE("r", stage, epsilon=kw.pop("epsilon", 2.0), feature_bounds=data.feature_bounds,
                  outcome_bounds=data.outcome_bounds, random_state=0,
                  model_propensity=GradientBoostingClassifier(max_depth=2, n_estimators=30, random_state=0),
                  model_outcome=GradientBoostingRegressor(max_depth=2, n_estimators=30, random_state=0), **kw).fit(
        data.Y, data.T, X=data.X)


def test_c_factor_matches_theorem_1():
    assert c_factor(1.0, 1e-5, 1000) == pytest.approx(5 * np.sqrt(2 * np.log(1000) * np.log(2e5)) / 1000)


@pytest.mark.parametrize("stage", ["krr", "linear"])
def test_influence_direction_matches_numerical_derivative_of_the_weighted_fit(data, stage):
    """IF(z) = h rho (phi - g) up to a z-free term (the ridge's), which cancels between neighbours."""
    m = fitted(data, stage)
    Xq = np.array([[0.2, 0.3], [0.7, 0.9]])
    n, t = m.X_.shape[0], 1e-6

    def moved(z_x, z_rho, z_phi):
        X_aug = np.vstack([m.X_, z_x])
        v = np.concatenate([m.rho_ * (1 - t) / n, [z_rho * t]])
        phi = np.concatenate([m.phi_, [z_phi]])
        if stage == "krr":
            K = gaussian_kernel(X_aug, X_aug, m.bandwidth_)
            alpha = np.linalg.solve(v[:, None] * K + m.ridge * np.eye(n + 1), v * phi)
            return gaussian_kernel(Xq, X_aug, m.bandwidth_) @ alpha
        B = np.column_stack([np.ones(n + 1), X_aug])
        theta = np.linalg.solve((B.T * v) @ B + m.ridge * np.eye(3), B.T @ (v * phi))
        return np.column_stack([np.ones(2), Xq]) @ theta

    def analytic(z_x, z_rho, z_phi):
        return m._influence_directions(Xq, z_x)[:, 0] * z_rho * (z_phi - m._predict(z_x)[0])

    z1, z2 = (np.array([[0.4, 0.6]]), 0.3, 5.0), (np.array([[0.9, 0.1]]), 0.8, -2.0)
    numeric = (moved(*z1) - moved(*z2)) / t
    assert numeric == pytest.approx(analytic(*z1) - analytic(*z2), rel=1e-3, abs=1e-6)


def test_finite_release_noise_is_gamma_times_c(data):
    m = fitted(data, "linear", noise_rng=np.random.default_rng(0))
    Xq = np.array([[0.1, 0.1], [0.5, 0.5], [0.9, 0.2]])
    rel = m.release(Xq, allow_noise_above_range=True)
    assert m.noise_scale_ == pytest.approx(m.sensitivity_ * c_factor(2.0, 1e-5, m.X_.shape[0]))
    grid = np.stack(np.meshgrid(np.linspace(0, 1, 41), np.linspace(0, 1, 41)), -1).reshape(-1, 2)
    dense = np.linalg.norm(m._influence_directions(Xq, grid), axis=0) * m._worst_residual(grid)
    assert m.sensitivity_ >= dense.max() * 0.999
    assert rel.estimates.shape == (3,)


def test_finite_release_with_noise_above_the_outcome_range_is_refused_before_any_draw(data, monkeypatch):
    """Issue 12: a release whose predicted noise sd exceeds the declared outcome range says why, draws nothing."""
    m = fitted(data, "linear", epsilon=0.05)
    drawn = []
    monkeypatch.setattr(mechanisms, "perturb", lambda *a, **k: drawn.append(a))
    grid = np.stack(np.meshgrid(np.linspace(0, 1, 20), np.linspace(0, 1, 20)), -1).reshape(-1, 2)
    span = data.outcome_bounds[1] - data.outcome_bounds[0]
    with pytest.raises(InputError, match=r"predicted noise sd .* exceeds the declared outcome range"):
        m.release(grid)
    assert m.noise_scale_ > span and drawn == []
    m.release(grid, allow_noise_above_range=True)  # explicit opt-in, e.g. to reproduce paper 004's table
    assert len(drawn) == 1


def test_iterative_gp_answers_follow_the_batch_distribution():
    pts = np.array([[0.1, 0.2], [0.3, 0.1], [0.9, 0.9]])

    def kernel(A, B):
        return gaussian_kernel(A, B, 0.3)

    rng = np.random.default_rng(0)
    reps = 4000
    batch = np.array([GaussianProcessPath(kernel, rng)(pts) for _ in range(reps)])
    iterative = np.empty_like(batch)
    for k in range(reps):
        path = GaussianProcessPath(kernel, rng)
        iterative[k] = [path(p[None, :])[0] for p in pts]
    target = kernel(pts, pts)
    for sample in (batch, iterative):
        assert np.abs(np.cov(sample.T) - target).max() < 0.06
        assert np.abs(sample.mean(axis=0)).max() < 0.06


def test_finite_and_functional_releases_form_the_noisy_sum_inside_opendp(data, monkeypatch):
    """Issue 11 item 5: OpenDP receives g_D itself (zero-noise fake: the release is exactly g_D), so no
    float64 ``g + noise`` of ours and no other sampler touches the released numbers."""
    received = []
    monkeypatch.setattr(mechanisms, "_opendp_draw", lambda kind, atom, scale, arr: received.append(arr) or arr.copy())
    Xq = np.array([[0.1, 0.1], [0.5, 0.5]])
    m = fitted(data, "linear")
    assert np.array_equal(m.release(Xq, allow_noise_above_range=True).estimates, m.effect(Xq))
    assert np.array_equal(received[-1], m.effect(Xq))
    f = fitted(data, "functional").release_function()
    assert f(Xq) == pytest.approx(f._owner.effect(Xq), abs=1e-8)


def test_functional_release_noise_shrinks_with_epsilon_and_uses_the_conservative_scale(data):
    m1 = fitted(data, "functional", epsilon=1.0)
    m8 = fitted(data, "functional", epsilon=8.0)
    used1, paper1 = m1.function_noise_scale()
    used8, _ = m8.function_noise_scale()
    assert used1 == pytest.approx(8 * used8)
    assert used1 >= paper1
    f = m1.release_function()
    assert np.isfinite(f(np.array([[0.5, 0.5]]))).all()


def test_ledger_composes_nuisances_and_releases_in_parallel_then_sequentially(data, tmp_path):
    ledger = PrivacyLedger(tmp_path / "l.db", epsilon=10.0, delta=1e-3)
    m = DPCATE("r", "functional", epsilon=1.0, feature_bounds=data.feature_bounds,
               outcome_bounds=data.outcome_bounds, random_state=0, ledger=ledger).fit(data.Y, data.T, X=data.X)
    assert ledger.spent()[0] == pytest.approx(1.0)
    m.release_function()
    assert ledger.spent()[0] == pytest.approx(1.0)
    m.release_function()
    assert ledger.spent()[0] == pytest.approx(2.0)


def test_non_private_nuisances_with_a_ledger_are_refused_before_any_charge(tmp_path):
    """Issue 11 item 6: sklearn nuisances are not DP, so charging eps would label a non-private release."""
    small = paper004_dataset(1, 100, seed=0)
    ledger = PrivacyLedger(tmp_path / "l.db", epsilon=10.0, delta=1e-3)
    with pytest.raises(PolicyError, match="non-private nuisance"):
        DPCATE("r", "functional", epsilon=1.0, feature_bounds=small.feature_bounds,
               outcome_bounds=small.outcome_bounds, random_state=0, ledger=ledger,
               model_propensity=GradientBoostingClassifier(n_estimators=5, random_state=0)).fit(
            small.Y, small.T, X=small.X)
    assert ledger.spent()[0] == 0.0


def test_finite_query_release_is_labelled_asymptotic_and_never_charged(data, tmp_path):
    """Issue 11 item 4: gamma-hat is data-dependent (paper 004 Lemma 5 is asymptotic), so the finite-query
    release is not (eps, delta)-DP: it is refused with a ledger (before any charge) and labelled without one."""
    ledger = PrivacyLedger(tmp_path / "l.db", epsilon=10.0, delta=1e-3)
    with pytest.raises(PolicyError, match="data-dependent"):
        DPCATE("r", "linear", epsilon=1.0, feature_bounds=data.feature_bounds, outcome_bounds=data.outcome_bounds,
               random_state=0, ledger=ledger).fit(data.Y, data.T, X=data.X)
    assert ledger.spent()[0] == 0.0
    rel = fitted(data, "linear").release(np.array([[0.5, 0.5]]), allow_noise_above_range=True)
    assert "not (eps, delta)-DP" in rel.guarantee


def test_bad_input_is_refused(data):
    m = fitted(data, "krr")
    with pytest.raises(InputError, match="outside the declared domain"):
        m.release(np.array([[1.5, 0.5]]))
    with pytest.raises(InputError, match="release_function"):
        m.release_function()
    with pytest.raises(InputError, match="epsilon"):
        fitted(data, "krr", epsilon=-1.0)
    with pytest.raises(InputError, match="outcome_bounds were not declared"):
        DPCATE("r", epsilon=1.0, feature_bounds=data.feature_bounds).fit(data.Y, data.T, X=data.X)
    with pytest.raises(InputError, match="fewer than"):
        fitted(data, "krr", nuisance_split=0.99)


def test_dr_learner_needs_more_noise_than_the_r_learner(data):
    """Supplement B: the DR-learner's IF carries 1/(pi (1 - pi)), so its sensitivity is larger."""
    Xq = np.array([[0.5, 0.5]])
    common = {"epsilon": 2.0, "feature_bounds": data.feature_bounds, "outcome_bounds": data.outcome_bounds,
              "random_state": 0, "model_propensity": GradientBoostingClassifier(n_estimators=20, random_state=0),
              "model_outcome": GradientBoostingRegressor(n_estimators=20, random_state=0)}
    gamma = {lr: DPCATE(lr, "linear", **common).fit(data.Y, data.T, X=data.X).sensitivity(Xq) for lr in ("r", "dr")}
    assert gamma["dr"] > gamma["r"]


def test_reproducible_noise_with_a_ledger_is_refused_before_any_charge(tmp_path):
    """Red team: a seeded noise generator makes the released noise predictable from the seed, so the
    release is not DP; charging (eps, delta) for it would label it DP in the ledger and the report."""
    small = paper004_dataset(1, 100, seed=0)
    ledger = PrivacyLedger(tmp_path / "l.db", epsilon=10.0, delta=1e-3)
    with pytest.raises(PolicyError, match="reproducible noise"):
        DPCATE("r", "functional", epsilon=1.0, feature_bounds=small.feature_bounds,
               outcome_bounds=small.outcome_bounds, random_state=0, ledger=ledger,
               noise_rng=np.random.default_rng(0)).fit(small.Y, small.T, X=small.X)
    assert ledger.spent()[0] == 0.0


def test_dp_cate_refuses_a_one_arm_nuisance_split_before_charging(tmp_path):
    """The only treated subject lands in the second-stage split: the nuisances would see one arm."""
    from collabcausal.estimators.metalearners import disjoint_plan
    from collabcausal.randomness import as_generator

    rng = np.random.default_rng(0)
    X, Y, T = rng.uniform(0, 1, (40, 2)), rng.uniform(0, 1, 40), np.zeros(40)
    (rnd,) = disjoint_plan(40, ("propensity_outcome",), (0.5, 0.5), as_generator(3))
    T[rnd.evaluate[0]] = 1
    ledger = PrivacyLedger(tmp_path / "l.db", epsilon=10.0, delta=1e-4)
    model = DPCATE("r", "functional", epsilon=1.0, feature_bounds=[(0, 1)] * 2, outcome_bounds=(0, 1),
                   ledger=ledger, random_state=3)
    with pytest.raises(InputError, match="propensity_outcome split: 0 treated, 20 control; final stage: 1 treated"):
        model.fit(Y, T, X=X)
    assert ledger.history() == []
