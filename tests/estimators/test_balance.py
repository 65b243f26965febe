import numpy as np
import pytest

from collabcausal.errors import InputError, NumericalError
from collabcausal.estimators.balance import (
    ArmMoments,
    arm_weights,
    block_arm_moments,
    masmd,
    propensity_inconsistency,
    smd,
    smd_from_moments,
    weighted_moments,
)
from collabcausal.estimators.blocks import ROW_BLOCK
from collabcausal.estimators.matching import psm
from collabcausal.estimators.weighting import ipw_weights

X = np.array([[1.0, 0.0], [2.0, 1.0], [3.0, 1.0], [5.0, 1.0]])
T = np.array([1, 1, 0, 0])


def test_unweighted_smd_known_answer():
    # treated mean 1.5 var 0.5, control mean 4 var 2 -> (1.5 - 4) / sqrt(1.25)
    out = smd(X, T)
    assert out[0] == pytest.approx(-2.5 / np.sqrt(1.25))
    assert out[1] == pytest.approx(-0.5 / np.sqrt(0.25))  # treated mean .5 var .5, control mean 1 var 0


def test_weighted_smd_uses_the_reliability_weights_unbiased_variance():
    # treated w (1, 3): mean 1.75, sum w(x-m)^2 = 0.75, var = 4 / (16 - 10) * 0.75 = 0.5
    # control w (2, 2): mean 4, sum w(x-m)^2 = 4, var = 4 / (16 - 8) * 4 = 2
    out = smd(X, T, weights=[1.0, 3.0, 2.0, 2.0])
    assert out[0] == pytest.approx((1.75 - 4.0) / np.sqrt(1.25))


def test_smd_is_invariant_to_rescaling_the_weights():
    w = np.array([0.5, 2.0, 1.0, 3.0])
    np.testing.assert_allclose(smd(X, T, w), smd(X, T, 7.5 * w), rtol=1e-12)


def test_moments_of_row_groups_add_up_to_the_pooled_moments():
    rng = np.random.default_rng(0)
    Xr = rng.normal(size=(60, 3))
    t = rng.integers(0, 2, 60)
    t[:10] = 1  # first group holds treated subjects only
    w = rng.random(60)
    parts = weighted_moments(Xr[:10], t[:10], w[:10]) + weighted_moments(Xr[10:], t[10:], w[10:])
    np.testing.assert_allclose(smd_from_moments(parts), smd(Xr, t, w), rtol=1e-12)


def test_smd_from_moments_with_a_leading_axis_of_samples_gives_each_samples_smd():
    rng = np.random.default_rng(2)
    Xr, t, w = rng.normal(size=(50, 3)), rng.integers(0, 2, 50), rng.random((4, 50))
    each = [weighted_moments(Xr, t, w[s]) for s in range(4)]
    stacked = ArmMoments(*(np.stack([vars(m)[f] for m in each]) for f in ("sum_w", "sum_w2", "sum_wx", "sum_wx2")))
    np.testing.assert_array_equal(smd_from_moments(stacked), np.stack([smd_from_moments(m) for m in each]))
    # the first sample with an arm of fewer than two weighed subjects names that arm
    w[2, t == 1] = 0.0
    w[2, np.flatnonzero(t == 1)[0]] = 1.0
    w[3, t == 0] = 0.0
    parts = [weighted_moments(Xr, t, w[s]) for s in range(4)]
    stacked = ArmMoments(*(np.stack([vars(m)[f] for m in parts]) for f in ("sum_w", "sum_w2", "sum_wx", "sum_wx2")))
    with pytest.raises(NumericalError, match="the treated arm has fewer than two subjects"):
        smd_from_moments(stacked)


def test_block_arm_moments_of_rows_gathered_equal_those_of_the_rows_copied_with_repeats():
    rng = np.random.default_rng(3)
    n = ROW_BLOCK + 40
    Xr, rows = rng.normal(size=(300, 2)), rng.integers(0, 300, n)
    t, w = rng.integers(0, 2, n), rng.random((2, n))
    gathered = block_arm_moments(Xr, lambda r: arm_weights(w[:, r], t[r]), 2, rows)
    copied = block_arm_moments(Xr[rows], lambda r: arm_weights(w[:, r], t[r]), 2)
    for field in ("sum_w", "sum_w2", "sum_wx", "sum_wx2"):
        np.testing.assert_array_equal(getattr(gathered, field), getattr(copied, field))
    empty = block_arm_moments(Xr, lambda r: arm_weights(w[:, r], t[r]), 2, rows[:0])
    assert empty.sum_wx.shape == (4, 2) and not empty.sum_wx.any() and not empty.sum_w.any()


def test_moments_summed_block_by_block_equal_the_sums_over_all_rows_to_rounding():
    rng = np.random.default_rng(1)
    n = 3 * ROW_BLOCK + 17
    Xr, t, w = rng.normal(2.0, 1.0, size=(n, 3)), rng.integers(0, 2, n), rng.random(n)
    m = weighted_moments(Xr, t, w)
    arms = np.stack([w * (t == 0), w * (t == 1)])
    np.testing.assert_allclose(m.sum_w, arms.sum(axis=1), rtol=1e-13)
    np.testing.assert_allclose(m.sum_w2, (arms**2).sum(axis=1), rtol=1e-13)
    np.testing.assert_allclose(m.sum_wx, arms @ Xr, rtol=1e-13)
    np.testing.assert_allclose(m.sum_wx2, arms @ Xr**2, rtol=1e-13)


def test_masmd_is_the_largest_absolute_smd():
    assert masmd(X, T) == pytest.approx(np.abs(smd(X, T)).max())


def test_a_covariate_constant_in_both_arms_has_smd_zero():
    Xc = np.column_stack([X[:, 0], np.ones(4)])
    assert smd(Xc, T)[1] == 0.0


def test_matching_and_weighting_improve_balance_on_confounded_data():
    rng = np.random.default_rng(1)
    n = 3000
    Xr = rng.normal(size=(n, 3))
    e = 1.0 / (1.0 + np.exp(-(Xr @ np.array([1.0, -0.5, 0.25]))))
    t = (rng.random(n) < e).astype(int)
    y = rng.normal(size=n)
    raw = masmd(Xr, t)
    assert masmd(Xr, t, ipw_weights(t, e, "ate")) < raw / 4
    assert masmd(Xr, t, psm(y, t, e, "att").diagnostics["match_weights"]) < raw / 4


def test_propensity_inconsistency_known_answer():
    assert propensity_inconsistency([0.2, 0.5, 0.9], [0.1, 0.5, 0.6]) == pytest.approx(0.4 / 3)


def test_balance_validates_its_inputs():
    with pytest.raises(InputError, match="negative"):
        smd(X, T, weights=[1.0, -1.0, 1.0, 1.0])
    with pytest.raises(InputError, match="entries"):
        smd(X, T[:3])
    with pytest.raises(InputError, match="entries"):
        smd(X, T, weights=[1.0, 1.0])
    with pytest.raises(InputError, match="only one arm"):
        smd(X, np.ones(4))
    with pytest.raises(NumericalError, match="treated arm"):
        smd(X, T, weights=[0.0, 2.0, 1.0, 1.0])
    with pytest.raises(InputError, match="entries"):
        propensity_inconsistency([0.2, 0.3], [0.2])
    with pytest.raises(InputError, match="covariates"):
        weighted_moments(X, T) + weighted_moments(X[:, :1], T)


def test_a_dataframe_gives_the_smd_of_each_covariate_by_name():
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(3)
    X = pd.DataFrame(rng.normal(size=(200, 3)), columns=["age", "bmi", "sbp"])
    t = rng.integers(0, 2, 200)
    named = smd(X, t)
    assert list(named.index) == ["age", "bmi", "sbp"]
    np.testing.assert_array_equal(named.to_numpy(), smd(X.to_numpy(), t))
    assert masmd(X, t) == np.abs(named).max()


def test_smd_noise_sd_matches_the_spread_of_smd_under_noisy_sums():
    # Seeded Monte Carlo (deterministic): N(0, sigma^2) on sum_wx and sum_wx2 of both arms.
    from collabcausal.estimators.balance import ArmMoments, smd_from_moments, smd_noise_sd, weighted_moments

    rng = np.random.default_rng(5)
    X = rng.normal([0.3, -0.2], [1.0, 0.5], (3000, 2))
    t = (rng.random(3000) < 0.4).astype(int)
    m = weighted_moments(X, t, rng.uniform(0.5, 2.0, 3000))
    sigma = np.array([20.0, 5.0])
    draws = np.array([
        smd_from_moments(ArmMoments(m.sum_w, m.sum_w2, m.sum_wx + rng.normal(0, sigma, (2, 2)),
                                    m.sum_wx2 + rng.normal(0, sigma, (2, 2))))
        for _ in range(4000)
    ])
    predicted = smd_noise_sd(m, sigma)
    np.testing.assert_allclose(draws.std(axis=0), predicted, rtol=0.05)
    assert (predicted > 0).all()


def test_a_noisy_spread_at_or_below_zero_makes_the_smd_undefined_not_infinite():
    # DP moments: sum_wx2 pushed below sum_wx^2 / sum_w by noise (the cause of "MASMD inf")
    from collabcausal.estimators.balance import ArmMoments, smd_noise_sd

    X = np.array([[0.1, 0.5], [0.2, -0.5], [0.1, 0.4], [0.3, -0.3]])
    m = weighted_moments(X, np.array([0, 0, 1, 1]))
    noisy = ArmMoments(m.sum_w, m.sum_w2, m.sum_wx, m.sum_wx2 - np.array([[1.0, 0.0], [1.0, 0.0]]))
    assert np.isinf(smd_from_moments(noisy)[0])  # the exact reading: a constant covariate, SMD inf
    value = smd_from_moments(noisy, noisy=True)
    assert np.isnan(value[0]) and np.isfinite(value[1])
    one_arm = ArmMoments(m.sum_w, m.sum_w2, m.sum_wx, m.sum_wx2 - np.array([[1.0, 0.0], [0.0, 0.0]]))
    assert np.isnan(smd_from_moments(one_arm, noisy=True)[0])  # one arm's variance undefined: so is the SMD
    assert value[1] == smd_from_moments(m)[1]
    sd = smd_noise_sd(noisy, 0.01)
    assert np.isnan(sd[0]) and np.isfinite(sd[1]) and sd[1] > 0


def test_by_sample_gives_stacked_moments_a_leading_axis_of_samples_with_each_samples_arms():
    from collabcausal.estimators.balance import arm_weights, block_arm_moments

    rng = np.random.default_rng(3)
    X, t, W = rng.normal(size=(50, 3)), rng.integers(0, 2, 50), rng.uniform(size=(4, 50))
    stacked = block_arm_moments(X, lambda r: arm_weights(W[:, r], t[r]), 4).by_sample()
    assert stacked.sum_w.shape == (4, 2) and stacked.sum_wx.shape == (4, 2, 3)
    for s in range(4):
        alone = block_arm_moments(X, lambda r, s=s: arm_weights(W[s, r], t[r]))
        for field, value in vars(alone).items():
            np.testing.assert_allclose(getattr(stacked, field)[s], value, rtol=1e-12)
