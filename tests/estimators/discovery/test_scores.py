"""Dependence scores: known answers and the test-set sensitivities of paper 002 (Theorems 1, 3)."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import kendalltau, spearmanr

from collabcausal.errors import InputError
from collabcausal.estimators.discovery.scores import (
    hsic_log_pvalue,
    hsic_norm,
    hsic_pvalue,
    hsic_score,
    iqr,
    iqr_score,
    kendall_score,
    likelihood_rows,
    likelihood_score,
    marginal_nll,
    marginal_nll_rows,
    ordinal_ranks,
    spearman_score,
    variance_score,
    vuong_statistic,
)
from collabcausal.estimators.discovery.sensitivity import score_sensitivity

WIDTHS = {"width_a": 0.3, "width_b": 0.1}


def dense_hsic(a, b, wa, wb):
    m = a.size
    K = np.exp(-((a[:, None] - a[None, :]) ** 2) / (2 * wa**2))
    L = np.exp(-((b[:, None] - b[None, :]) ** 2) / (2 * wb**2))
    H = np.eye(m) - 1.0 / m
    return np.trace(K @ H @ L @ H) / (m - 1) ** 2


def test_spearman_matches_scipy_without_ties():
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=200), rng.normal(size=200)
    b = b + 0.5 * a
    assert spearman_score(a, b) == pytest.approx(abs(spearmanr(a, b).statistic), abs=1e-12)


def test_kendall_is_tau_a_including_ties():
    a = np.array([1.0, 2.0, 2.0, 3.0, 4.0, 4.0, 5.0])
    b = np.array([2.0, 1.0, 3.0, 3.0, 5.0, 4.0, 4.0])
    m = a.size
    s = sum(np.sign(a[i] - a[j]) * np.sign(b[i] - b[j]) for i in range(m) for j in range(i + 1, m))
    assert kendall_score(a, b) == pytest.approx(abs(s) / (m * (m - 1) / 2), abs=1e-12)
    c = np.random.default_rng(1).normal(size=50)
    d = c + np.random.default_rng(2).normal(size=50)
    assert kendall_score(c, d) == pytest.approx(abs(kendalltau(c, d).statistic), abs=1e-12)


def test_kendall_of_a_constant_vector_is_zero():
    assert kendall_score(np.ones(5), np.arange(5.0)) == 0.0


def test_ordinal_ranks_break_ties_by_position():
    assert ordinal_ranks(np.array([3.0, 1.0, 3.0, 2.0])).tolist() == [3.0, 1.0, 4.0, 2.0]


@pytest.mark.parametrize("block", [1, 7, 64, 1024])
def test_blocked_hsic_equals_dense_trace_formula(block):
    rng = np.random.default_rng(3)
    a = rng.uniform(-1, 1, 60)
    b = a**2 + 0.1 * rng.normal(size=60)
    assert hsic_score(a, b, block=block, **WIDTHS) == pytest.approx(dense_hsic(a, b, 0.3, 0.1), rel=1e-10)


def test_hsic_is_larger_for_dependent_than_independent_samples():
    rng = np.random.default_rng(4)
    a = rng.uniform(-1, 1, 300)
    assert hsic_score(a, np.sin(3 * a), **WIDTHS) > 10 * hsic_score(a, rng.uniform(-1, 1, 300), **WIDTHS)


def test_iqr_uses_order_statistics_ceil_quarters():
    values = np.arange(1.0, 9.0)  # m = 8: x_(2) and x_(6)
    assert iqr(values) == 4.0
    assert iqr_score(values, 2 * values) == pytest.approx(math.log(4.0) + math.log(8.0))


def test_variance_score_is_sum_of_log_variances():
    a, b = np.array([0.0, 2.0]), np.array([0.0, 4.0])
    assert variance_score(a, b) == pytest.approx(math.log(1.0) + math.log(4.0))


finite = st.floats(-1.0, 1.0, allow_nan=False, allow_subnormal=False)


@st.composite
def neighbouring_pairs(draw, min_m=10, max_m=40):
    """Two test sets (a, b) and (a~, b~) that differ in one row k (both coordinates may change)."""
    m = draw(st.integers(min_m, max_m))
    a = np.array(draw(st.lists(finite, min_size=m, max_size=m)))
    b = np.array(draw(st.lists(finite, min_size=m, max_size=m)))
    k = draw(st.integers(0, m - 1))
    a2, b2 = a.copy(), b.copy()
    a2[k], b2[k] = draw(finite), draw(finite)
    return a, b, a2, b2


@settings(max_examples=150, deadline=None, derandomize=True)
@given(neighbouring_pairs())
def test_spearman_change_never_exceeds_30_over_m(pairs):
    a, b, a2, b2 = pairs
    assert abs(spearman_score(a, b) - spearman_score(a2, b2)) <= score_sensitivity("spearman", a.size) + 1e-12


@settings(max_examples=150, deadline=None, derandomize=True)
@given(neighbouring_pairs())
def test_kendall_change_never_exceeds_4_over_m(pairs):
    a, b, a2, b2 = pairs
    assert abs(kendall_score(a, b) - kendall_score(a2, b2)) <= score_sensitivity("kendall", a.size) + 1e-12


@settings(max_examples=150, deadline=None, derandomize=True)
@given(neighbouring_pairs(), st.sampled_from([0.05, 0.3, 2.0]))
def test_released_hsic_norm_change_never_exceeds_4_m_minus_1_over_m_squared(pairs, width):
    a, b, a2, b2 = pairs
    m = a.size
    before, after = (hsic_norm(hsic_score(u, v, width_a=width, width_b=width), m) for u, v in ((a, b), (a2, b2)))
    assert abs(before - after) <= score_sensitivity("hsic", m) + 1e-12


def test_hsic_norm_is_the_cross_covariance_norm_and_keeps_the_order():
    rng = np.random.default_rng(4)
    a, b = rng.normal(size=30), rng.normal(size=30)
    m = a.size
    trace = dense_hsic(a, b, 0.3, 0.1) * (m - 1) ** 2
    assert hsic_norm(hsic_score(a, b, **WIDTHS), m) == pytest.approx(math.sqrt(trace) / m)
    assert hsic_norm(-1e-18, m) == 0.0  # rounding below zero
    assert hsic_norm(0.01, m) < hsic_norm(0.02, m)


def test_an_extreme_discordant_outlier_moves_rank_scores_within_their_bounds():
    """Kendall's 4/m is nearly attained; Spearman's 30/m is conservative (about 6/m is reached)."""
    m = 50
    a = np.arange(m, dtype=float)
    a2, b2 = a.copy(), a.copy()
    a2[0], b2[0] = m + 1.0, -1.0  # the smallest row becomes an extreme, discordant outlier
    spearman_change = spearman_score(a, a) - spearman_score(a2, b2)
    kendall_change = kendall_score(a, a) - kendall_score(a2, b2)
    assert 5.0 / m < spearman_change <= 30 / m
    assert 0.9 * 4 / m < kendall_change <= 4 / m


def test_hsic_log_pvalue_is_the_log_of_the_pvalue_and_stays_finite_when_the_pvalue_underflows():
    rng = np.random.default_rng(2)
    a = rng.normal(size=200)
    weak = rng.normal(size=200) + 0.3 * a
    assert hsic_pvalue(a, weak, **WIDTHS) == pytest.approx(math.exp(hsic_log_pvalue(a, weak, **WIDTHS)))
    strong = hsic_log_pvalue(a, np.sin(3 * a), width_a=0.3, width_b=0.3)
    stronger = hsic_log_pvalue(a, a, width_a=0.3, width_b=0.3)
    assert math.isfinite(strong) and strong < -50 and math.isfinite(stronger)


def test_marginal_nll_estimates_the_entropy_of_a_normal_sample():
    values = np.random.default_rng(0).normal(size=2000)
    entropy = 0.5 * math.log(2 * math.pi * math.e)
    assert marginal_nll(values, "gaussian") == pytest.approx(entropy, abs=0.03)
    assert marginal_nll(values, "kde") == pytest.approx(entropy, abs=0.05)
    assert marginal_nll(values, "kde-in") == pytest.approx(entropy, abs=0.05)
    assert marginal_nll(np.ones(50), "kde") == -math.inf
    with pytest.raises(InputError, match="unknown cause density 'flow'"):
        marginal_nll(values, "flow")


def test_likelihood_score_adds_the_cause_and_the_location_scale_conditional():
    rng = np.random.default_rng(1)
    a, z, log_scale = rng.normal(size=100), rng.normal(size=100), rng.normal(size=100)
    expected = marginal_nll(a, "gaussian") + 0.5 * np.mean(z**2) + np.mean(log_scale) + 0.5 * math.log(2 * math.pi)
    assert likelihood_score(a, z, log_scale, density="gaussian") == pytest.approx(expected)


@pytest.mark.parametrize("density", ["gaussian", "kde", "kde-in"])
def test_per_row_likelihood_terms_average_to_the_scores(density):
    rng = np.random.default_rng(3)
    a, z, log_scale = rng.gamma(2.0, size=150), rng.normal(size=150), rng.normal(size=150)
    assert np.mean(marginal_nll_rows(a, density)) == pytest.approx(marginal_nll(a, density), rel=1e-12)
    rows = likelihood_rows(a, z, log_scale, density=density)
    assert rows.shape == (150,) and np.mean(rows) == pytest.approx(likelihood_score(a, z, log_scale, density=density))
    assert (marginal_nll_rows(np.ones(20), density) == -np.inf).all()


def test_vuong_statistic_is_the_studentised_mean_difference_and_handles_degenerate_rows():
    d = np.array([1.0, 2.0, 3.0, 4.0])
    assert vuong_statistic(d) == pytest.approx(2.0 * 2.5 / np.std(d))
    assert vuong_statistic(-d) == pytest.approx(-vuong_statistic(d))
    assert vuong_statistic(np.zeros(5)) == 0.0
    assert vuong_statistic(np.full(5, 0.5)) == math.inf
    assert vuong_statistic(np.full(5, -math.inf)) == -math.inf  # a constant cause: unbounded likelihood
    assert vuong_statistic(np.array([math.inf, -math.inf])) == 0.0  # both directions unbounded: no preference


def test_in_sample_kde_bounds_the_term_of_an_isolated_value_where_leave_one_out_does_not():
    values = np.append(np.random.default_rng(4).normal(size=199), 40.0)
    width = 1.06 * np.std(values) * 200**-0.2
    assert marginal_nll_rows(values, "kde")[-1] > 700  # no other kernel reaches it: the float floor
    assert marginal_nll_rows(values, "kde-in")[-1] <= math.log(200 * width * math.sqrt(2 * math.pi)) + 1e-9
