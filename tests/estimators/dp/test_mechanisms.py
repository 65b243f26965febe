"""Noise mechanisms: calibration (KS / chi-square), clipping, bad input, empirical privacy audit.

False-failure rates. The OpenDP draws are unseeded: a goodness-of-fit test of a correct sampler has a
uniform p-value, so ``pvalue > LEVEL`` fails with probability LEVEL = 1e-5 per test (4 such tests; a
scale 2x off gives p < 1e-40 at N = 4000). The audits' two Clopper-Pearson bounds at 1e-4 would both
have to miss: the exact binomial sums put ``audited > eps`` at 1e-7 (Laplace), 3e-7 (discrete Laplace),
4e-8 (Gaussian), and the Laplace power check ``audited > 0.8 eps`` below 2e-13.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from collabcausal.errors import InputError
from collabcausal.estimators.dp import mechanisms as M

N = 4000
LEVEL = 1e-5
"""Goodness-of-fit level: a correct sampler fails a calibration test with this probability."""


def _rngs():
    return [None, np.random.default_rng(7)]


@pytest.mark.parametrize("rng", _rngs(), ids=["opendp", "numpy"])
def test_laplace_noise_matches_its_calibrated_scale(rng):
    noise = M.laplace(np.zeros(N), 2.0, 0.5, rng=rng)  # scale 4
    assert stats.kstest(noise, stats.laplace(scale=4.0).cdf).pvalue > LEVEL


@pytest.mark.parametrize("rng", _rngs(), ids=["opendp", "numpy"])
def test_gaussian_noise_matches_the_analytic_sigma(rng):
    sigma = M.analytic_gaussian_sigma(1.5, 1.0, 1e-5)
    noise = M.gaussian(np.full(N, 3.0), 1.5, 1.0, 1e-5, rng=rng) - 3.0
    assert stats.kstest(noise, stats.norm(scale=sigma).cdf).pvalue > LEVEL


def _chi2_pvalue(samples: np.ndarray, pmf) -> float:
    ks = np.arange(samples.min(), samples.max() + 1)
    expected = pmf(ks) * samples.size
    observed = np.array([(samples == k).sum() for k in ks], dtype=float)
    keep = expected >= 5
    obs = np.append(observed[keep], observed[~keep].sum() + (samples.size - observed.sum()))
    exp = np.append(expected[keep], samples.size - expected[keep].sum())
    return float(stats.chisquare(obs, exp).pvalue)


@pytest.mark.parametrize("rng", _rngs(), ids=["opendp", "numpy"])
def test_discrete_laplace_matches_two_sided_geometric_pmf(rng):
    noise = M.discrete_laplace(np.zeros(N, dtype=int), 1, 0.7, rng=rng)
    assert noise.dtype == np.int64
    a = math.exp(-0.7)
    assert _chi2_pvalue(noise, lambda k: (1 - a) / (1 + a) * a ** np.abs(k)) > LEVEL


@pytest.mark.parametrize("rng", _rngs(), ids=["opendp", "numpy"])
def test_discrete_gaussian_matches_its_pmf(rng):
    sigma = M.discrete_gaussian_sigma(1, 1.0, 1e-5)
    noise = M.discrete_gaussian(np.zeros(N, dtype=int), 1, 1.0, 1e-5, rng=rng)
    support = np.arange(-200, 201)
    norm = np.exp(-(support**2) / (2 * sigma**2)).sum()
    assert _chi2_pvalue(noise, lambda k: np.exp(-(k**2) / (2 * sigma**2)) / norm) > LEVEL


def test_analytic_gaussian_sigma_known_answer_and_exact_delta():
    sigma = M.analytic_gaussian_sigma(1.0, 1.0, 1e-5)
    assert sigma == pytest.approx(3.7306, abs=1e-3)  # Balle & Wang (2018) calibration
    assert M.gaussian_delta(sigma, 1.0, 1.0) == pytest.approx(1e-5, rel=1e-4)
    classic = math.sqrt(2 * math.log(1.25 / 1e-5)) / 0.5
    assert M.analytic_gaussian_sigma(1.0, 0.5, 1e-5) < classic
    assert M.analytic_gaussian_sigma(3.0, 1.0, 1e-5) == pytest.approx(3 * sigma, rel=1e-6)


def test_discrete_gaussian_sigma_is_close_to_and_above_the_continuous_one():
    cont = M.analytic_gaussian_sigma(1.0, 1.0, 1e-6)
    disc = M.discrete_gaussian_sigma(1, 1.0, 1e-6)
    assert cont <= disc < 1.2 * cont


def test_seeded_numpy_mode_reproduces_and_opendp_mode_does_not():
    a = M.laplace(np.zeros(50), 1.0, 1.0, rng=np.random.default_rng(3))
    b = M.laplace(np.zeros(50), 1.0, 1.0, rng=np.random.default_rng(3))
    assert np.array_equal(a, b)
    assert not np.array_equal(M.laplace(np.zeros(50), 1.0, 1.0), M.laplace(np.zeros(50), 1.0, 1.0))


def test_mechanisms_keep_shape_and_add_noise_to_the_values():
    out = M.laplace(np.full((3, 4), 1000.0), 1.0, 100.0)
    assert out.shape == (3, 4)
    assert np.all(np.abs(out - 1000.0) < 1.0)
    assert M.discrete_laplace(np.array([[5, 6]]), 1, 1.0).shape == (1, 2)


def test_clip_enforces_bounds_and_counts_moved_entries():
    out, n = M.clip([-5.0, 0.0, 0.5, 9.0, 1.0], -1.0, 1.0)
    assert out.tolist() == [-1.0, 0.0, 0.5, 1.0, 1.0]
    assert n == 2


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: M.laplace([1.0], 1.0, 0.0), "epsilon"),
        (lambda: M.laplace([1.0], 1.0, -1.0), "epsilon"),
        (lambda: M.laplace([1.0], 1.0, float("inf")), "epsilon"),
        (lambda: M.laplace([np.nan], 1.0, 1.0), "NaN"),
        (lambda: M.laplace([1.0], 0.0, 1.0), "sensitivity"),
        (lambda: M.gaussian([1.0], 1.0, 1.0, 1.0), "delta"),
        (lambda: M.gaussian([1.0], 1.0, 1.0, -0.1), "delta"),
        (lambda: M.gaussian([1.0], 1.0, 1.0, 0.0), "delta > 0"),
        (lambda: M.discrete_laplace([1], 0.5, 1.0), "integer sensitivity"),
        (lambda: M.discrete_laplace([1.5], 1, 1.0), "integers"),
        (lambda: M.clip([1.0], 2.0, 1.0), "low < high"),
        (lambda: M.dp_quantiles([1.0, 2.0], [1.5], (0, 3), 1.0), "quantiles"),
    ],
)
def test_bad_input_is_a_one_line_input_error(call, match):
    with pytest.raises(InputError, match=match):
        call()


def test_dp_quantiles_find_the_range_of_the_data():
    # unseeded exponential mechanism: P(c) <= exp(-(s_c - s_min) / scale), scale 3.8; every candidate
    # outside the asserted intervals is >= 150 ranks off: false-failure rate < 4e-15 (summed over them)
    x = np.random.default_rng(0).uniform(2.0, 8.0, size=3000)
    lo, hi = M.dp_quantiles(x, (0.05, 0.95), (0.0, 10.0), 2.0)
    assert 2.0 < lo < 3.0
    assert 7.0 < hi < 8.0


def _clopper_pearson(k: int, n: int, alpha: float) -> tuple[float, float]:
    lo = stats.beta.ppf(alpha / 2, k, n - k + 1) if k > 0 else 0.0
    hi = stats.beta.ppf(1 - alpha / 2, k + 1, n - k) if k < n else 1.0
    return float(lo), float(hi)


def _audit_epsilon(out_d: np.ndarray, out_d_prime: np.ndarray, threshold: float, delta: float = 0.0) -> float:
    """Lower confidence bound on the privacy loss from the event {output >= threshold}."""
    k_prime, k = int((out_d_prime >= threshold).sum()), int((out_d >= threshold).sum())
    p_prime_lo, _ = _clopper_pearson(k_prime, out_d_prime.size, 1e-4)
    _, p_hi = _clopper_pearson(k, out_d.size, 1e-4)
    return math.log(max(p_prime_lo - delta, 1e-300) / p_hi)


@pytest.mark.parametrize("mechanism", ["laplace", "discrete_laplace"])
def test_privacy_audit_on_neighbouring_counts_stays_within_epsilon(mechanism):
    # D has 100 subjects, D' one more: a COUNT with sensitivity 1, released 30000 times each.
    eps, runs = 1.0, 20000
    release = getattr(M, mechanism)
    out_d = release(np.full(runs, 100), 1, eps)
    out_d_prime = release(np.full(runs, 101), 1, eps)
    audited = _audit_epsilon(out_d, out_d_prime, 101.0)
    assert audited <= eps
    assert audited > 0.8 * eps  # the audit is powerful enough to see most of the loss


def test_privacy_audit_of_the_gaussian_mechanism_stays_within_epsilon_delta():
    eps, delta, runs = 1.0, 1e-3, 10000
    out_d = M.gaussian(np.zeros(runs), 1.0, eps, delta)
    out_d_prime = M.gaussian(np.ones(runs), 1.0, eps, delta)
    sigma = M.analytic_gaussian_sigma(1.0, eps, delta)
    audited = _audit_epsilon(out_d, out_d_prime, 0.5 + eps * sigma**2, delta)
    assert audited <= eps


def test_an_epsilon_beyond_the_calibration_is_a_one_line_input_error():
    # Red team 9: a hostile analyst's epsilon = 1e300 overflowed inside the calibration
    # (OverflowError, outside the error hierarchy) before any ledger could refuse it.
    with pytest.raises(InputError, match="epsilon"):
        M.analytic_gaussian_sigma(4.47, 1e300, 1e-6)


def test_a_subnormal_sensitivity_is_a_one_line_input_error():
    # Red team: weights of 5e-324 in dp_weighted_moments gave a sensitivity of 1.5e-323, on which the
    # calibration divided by an underflowed sigma (ZeroDivisionError, outside the error hierarchy).
    with pytest.raises(InputError, match="sensitivity"):
        M.analytic_gaussian_sigma(1.5e-323, 1.0, 1e-5)
