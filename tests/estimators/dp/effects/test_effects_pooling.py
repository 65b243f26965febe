"""dp_effects estimates from sums: with no noise they are the textbook estimators; noise widens the interval."""

from __future__ import annotations

import math

import numpy as np
import pytest

from collabcausal.errors import InputError
from collabcausal.estimators.dp.effects.pooling import estimate_effect, inverse_variance_pool
from collabcausal.estimators.dp.effects.scores import components, subject_scores

R, TRIM = 1.0, 0.1


def _data(n: int = 400, seed: int = 4):
    rng = np.random.default_rng(seed)
    e = rng.uniform(0.2, 0.8, n)
    T = (rng.random(n) < e).astype(np.int8)
    y = rng.uniform(-0.5, 0.5, n) + 0.1 * T
    mu0, mu1 = np.full(n, 0.0), np.full(n, 0.1)
    return T, np.clip(y, -0.5, 0.5), e, mu0, mu1


def _sums(parts, T, y, e, mu0, mu1):
    return dict(zip([c.name for c in parts], subject_scores(parts, T, y, e, mu0, mu1).sum(axis=0), strict=True))


def test_aipw_ate_without_noise_is_the_mean_score_with_the_sandwich_se():
    T, y, e, mu0, mu1 = _data()
    parts = components(("aipw",), ("ate",), R, TRIM)
    sums = _sums(parts, T, y, e, mu0, mu1)
    got = estimate_effect(sums, dict.fromkeys(sums, 0.0), len(T), "aipw", "ate")
    phi = mu1 - mu0 + T * (y - mu1) / e - (1 - T) * (y - mu0) / (1 - e)
    assert got.estimate == pytest.approx(phi.mean())
    assert got.se == pytest.approx(phi.std() / math.sqrt(len(T)))
    assert got.noise_var == 0.0 and got.noise_share == 0.0


def test_ipw_and_att_without_noise_match_direct_formulas():
    T, y, e, mu0, mu1 = _data()
    parts = components(("aipw", "ipw"), ("ate", "att"), R, TRIM)
    sums = _sums(parts, T, y, e, mu0, mu1)
    zero = dict.fromkeys(sums, 0.0)
    w1, w0 = T / e, (1 - T) / (1 - e)
    hajek = (w1 * y).sum() / w1.sum() - (w0 * y).sum() / w0.sum()
    assert estimate_effect(sums, zero, len(T), "ipw", "ate").estimate == pytest.approx(hajek)
    odds = (1 - T) * e / (1 - e)
    att = y[T == 1].mean() - (odds * y).sum() / odds.sum()
    assert estimate_effect(sums, zero, len(T), "ipw", "att").estimate == pytest.approx(att)
    psi = T * (y - mu0) - odds * (y - mu0)
    assert estimate_effect(sums, zero, len(T), "aipw", "att").estimate == pytest.approx(psi.sum() / T.sum())


def test_noise_adds_its_known_variance_and_its_share_is_reported():
    T, y, e, mu0, mu1 = _data()
    parts = components(("aipw",), ("ate",), R, TRIM)
    sums = _sums(parts, T, y, e, mu0, mu1)
    exact = estimate_effect(sums, dict.fromkeys(sums, 0.0), len(T), "aipw", "ate")
    noisy = estimate_effect(sums, {"aipw_ate": 20.0, "aipw_ate_sq": 50.0}, len(T), "aipw", "ate")
    assert noisy.noise_var == pytest.approx(20.0**2 / len(T) ** 2)
    mu = noisy.estimate
    assert noisy.variance_uncertainty == pytest.approx(math.sqrt(50.0**2 + 4 * mu**2 * 20.0**2) / len(T) ** 2)
    assert noisy.se**2 == pytest.approx(exact.se**2 + noisy.noise_var + noisy.variance_uncertainty)
    assert 0 < noisy.noise_share < 1


def test_a_non_positive_denominator_gives_no_estimate_and_a_reason():
    sums = {"n_treated": -3.0, "aipw_att": 1.0, "aipw_att_sq": 1.0, "aipw_att_treated": 1.0}
    got = estimate_effect(sums, dict.fromkeys(sums, 1.0), 100, "aipw", "att")
    assert got.estimate is None and "n_treated" in got.reason
    with pytest.raises(InputError, match="no tmle"):
        estimate_effect(sums, sums, 100, "tmle", "ate")


def test_noise_replicates_add_the_spread_they_show_minus_their_own_noise():
    T, y, e, mu0, mu1 = _data()
    parts = components(("aipw", "ipw"), ("ate", "att"), R, TRIM)
    sums = _sums(parts, T, y, e, mu0, mu1)
    exact = dict.fromkeys(sums, 0.0)
    plain = estimate_effect(sums, exact, len(T), "aipw", "ate")
    moves = [3.0, -1.0, 2.0, 0.0]  # replicate sums of aipw_ate: the estimate moves by move / n
    reps = [{"aipw_ate": m} for m in moves]
    got = estimate_effect(sums, exact, len(T), "aipw", "ate", replicates=reps, replicate_sd={"aipw_ate": 0.0})
    expected = np.mean(np.square(moves)) / len(T) ** 2
    assert got.nuisance_var == pytest.approx(expected) and plain.nuisance_var == 0.0
    assert got.se**2 == pytest.approx(plain.se**2 + expected) and got.estimate == plain.estimate
    noisy = estimate_effect(sums, exact, len(T), "aipw", "ate", replicates=reps, replicate_sd={"aipw_ate": 1.5})
    assert noisy.nuisance_var == pytest.approx(expected - 1.5**2 / len(T) ** 2)  # their own noise removed
    floored = estimate_effect(sums, exact, len(T), "aipw", "ate", replicates=reps, replicate_sd={"aipw_ate": 9.0})
    assert floored.nuisance_var == 0.0
    # Hajek IPW, ATE: a / b moves by (Delta_a - mu Delta_b) / b; the treated ratio's move minus the control's
    rep = {"ipw_a1": 1.0, "ipw_w1": 2.0, "ipw_a0": -1.0, "ipw_w0": 0.5}
    ipw = estimate_effect(sums, exact, len(T), "ipw", "ate", replicates=[rep], replicate_sd={})
    mu1_, mu0_ = sums["ipw_a1"] / sums["ipw_w1"], sums["ipw_a0"] / sums["ipw_w0"]
    move = (1.0 - mu1_ * 2.0) / sums["ipw_w1"] - (-1.0 - mu0_ * 0.5) / sums["ipw_w0"]
    assert ipw.nuisance_var == pytest.approx(move**2)


def test_inverse_variance_pool_weights_precise_sites_more():
    T, y, e, mu0, mu1 = _data()
    parts = components(("aipw",), ("ate",), R, TRIM)
    a = estimate_effect(_sums(parts, T, y, e, mu0, mu1), {"aipw_ate": 0.0, "aipw_ate_sq": 0.0}, len(T), "aipw", "ate")
    T2, y2, e2, m0, m1 = _data(100, 5)
    b = estimate_effect(_sums(parts, T2, y2, e2, m0, m1), {"aipw_ate": 30.0, "aipw_ate_sq": 0.0}, 100, "aipw", "ate")
    pooled = inverse_variance_pool([a, b])
    assert abs(pooled.estimate - a.estimate) < abs(pooled.estimate - b.estimate)
    assert pooled.se < min(a.se, b.se)
