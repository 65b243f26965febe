import numpy as np
import pytest

from collabcausal.errors import InputError
from collabcausal.estimators.weighting import ipw, ipw_weights

# Hand-computed example (dyadic numbers, exact in floating point).
Y = np.array([2.0, 4.0, 1.0, 3.0])
T = np.array([1, 1, 0, 0])
E = np.array([0.5, 0.25, 0.5, 0.75])


def test_raw_weights_ate_and_att():
    np.testing.assert_array_equal(ipw_weights(T, E, "ate", normalized=False), [2, 4, 2, 4])
    np.testing.assert_array_equal(ipw_weights(T, E, "att", normalized=False), [1, 1, 1, 3])


def test_normalized_weights_sum_to_each_arm_size():
    w = ipw_weights(T, E, "ate")
    np.testing.assert_allclose(w, [2 / 3, 4 / 3, 2 / 3, 4 / 3])
    w = ipw_weights(T, E, "att")
    np.testing.assert_allclose(w, [1, 1, 0.5, 1.5])


def test_horvitz_thompson_ate_known_answer_and_se():
    est = ipw(Y, T, E, "ate", normalized=False)
    assert est.estimate == pytest.approx((4 + 16) / 4 - (2 + 12) / 4)  # 5 - 3.5
    # psi = (2.5, 14.5, -3.5, -13.5) by hand
    assert est.se == pytest.approx(np.sqrt(411.0) / 4)
    assert est.method == "ipw-ht"
    assert est.ci_low < est.estimate < est.ci_high


def test_hajek_ate_known_answer():
    est = ipw(Y, T, E, "ate")
    assert est.estimate == pytest.approx(20 / 6 - 14 / 6)
    assert est.method == "ipw-hajek"
    np.testing.assert_allclose(est.diagnostics["weights"], ipw_weights(T, E, "ate"))


def test_att_known_answers_both_forms():
    assert ipw(Y, T, E, "att", normalized=False).estimate == pytest.approx(3 - 10 / 2)
    assert ipw(Y, T, E, "att", normalized=True).estimate == pytest.approx(3 - 10 / 4)


@pytest.mark.parametrize("estimand", ["ate", "att"])
@pytest.mark.parametrize("normalized", [True, False])
def test_influence_function_se_matches_the_monte_carlo_spread_with_known_propensity(estimand, normalized):
    rng = np.random.default_rng(0)
    n, reps = 400, 300
    estimates, ses = [], []
    for _ in range(reps):
        x = rng.normal(size=n)
        e = 1.0 / (1.0 + np.exp(-0.8 * x))
        t = (rng.random(n) < e).astype(int)
        y = 1.0 + x + t * (1.0 + 0.5 * x) + rng.normal(size=n)
        est = ipw(y, t, e, estimand, normalized)
        estimates.append(est.estimate)
        ses.append(est.se)
    assert np.mean(ses) == pytest.approx(np.std(estimates), rel=0.15)


def test_hajek_ate_is_unbiased_under_confounding_with_true_propensity():
    rng = np.random.default_rng(1)
    n = 20000
    x = rng.normal(size=n)
    e = 1.0 / (1.0 + np.exp(-x))
    t = (rng.random(n) < e).astype(int)
    y = 2.0 * x + 1.0 * t + rng.normal(size=n)
    est = ipw(y, t, e, "ate")
    assert abs(est.estimate - 1.0) < 4 * est.se


def test_ipw_validates_its_inputs():
    with pytest.raises(InputError, match="0/1"):
        ipw(Y, [1, 2, 0, 0], E)
    with pytest.raises(InputError, match=r"\(0, 1\)"):
        ipw(Y, T, [0.5, 1.0, 0.5, 0.5])
    with pytest.raises(InputError, match="NaN"):
        ipw([1.0, np.nan, 1.0, 1.0], T, E)
    with pytest.raises(InputError, match="entries"):
        ipw(Y, T, E[:3])
    with pytest.raises(InputError, match="estimand"):
        ipw_weights(T, E, "cate")
