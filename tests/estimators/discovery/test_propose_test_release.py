"""Propose-test-release: Dwork & Lei's IQR distance and the distance-to-instability release."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collabcausal.estimators.discovery.propose_test_release import (
    iqr_bin,
    iqr_distance,
    iqr_distances,
    private_log_iqr,
    stability_release,
)
from collabcausal.estimators.discovery.scores import iqr


def brute_force_distance(values, low, high, candidates):
    """Least k such that replacing k points by candidate values moves log IQR out of [low, high)."""
    from itertools import combinations, product

    m = values.size
    for k in range(m + 1):
        for idx in combinations(range(m), k):
            for new in product(candidates, repeat=k):
                changed = values.copy()
                changed[list(idx)] = new
                spread = iqr(changed)
                if spread <= 0 or not low <= math.log(spread) < high:
                    return k
    return m


def test_iqr_distance_matches_brute_force_on_a_small_sample():
    values = np.array([0.0, 1.0, 1.5, 2.0, 2.2, 3.0, 4.0, 6.0])
    log_iqr = math.log(iqr(values))
    candidates = (-100.0, 100.0, *values.tolist())
    for offset in (0.0, 0.5):
        low, high = iqr_bin(log_iqr, offset)
        assert iqr_distance(values, low, high) == brute_force_distance(values, low, high, candidates)


def test_iqr_bins_have_width_one_and_contain_the_value():
    assert iqr_bin(0.3, 0.0) == (0.0, 1.0)
    assert iqr_bin(0.3, 0.5) == (-0.5, 0.5)
    assert iqr_bin(-1.2, 0.5) == (-1.5, -0.5)


@st.composite
def neighbouring_samples(draw):
    m = draw(st.integers(8, 60))
    element = st.floats(-10.0, 10.0, allow_nan=False, allow_subnormal=False)
    values = np.array(draw(st.lists(element, min_size=m, max_size=m)))
    changed = values.copy()
    changed[draw(st.integers(0, m - 1))] = draw(element)
    return values, changed, draw(st.sampled_from([0.0, 0.5]))


@settings(max_examples=200, deadline=None, derandomize=True)
@given(neighbouring_samples())
def test_iqr_distance_moves_by_at_most_one_between_neighbours(case):
    values, changed, offset = case
    spread = iqr(values)
    if spread <= 0:
        return
    low, high = iqr_bin(math.log(spread), offset)
    assert abs(iqr_distance(values, low, high) - iqr_distance(changed, low, high)) <= 1


def test_zero_iqr_gives_no_answer():
    values = np.array([1.0] * 20 + [2.0, 3.0])
    assert iqr_distances(values)[1] == (0, 0)
    assert private_log_iqr(values, 1.0, 1e-6, rng=np.random.default_rng(0)) is None


def test_stable_large_sample_releases_a_noisy_log_iqr_near_the_truth():
    values = np.random.default_rng(0).normal(size=4000)
    released = [private_log_iqr(values, 2.0, 1e-6, rng=np.random.default_rng(s)) for s in range(60)]
    assert all(r is not None for r in released)
    assert np.median(released) == pytest.approx(math.log(iqr(values)), abs=0.15)


def test_stability_release_answers_exactly_or_not_at_all():
    threshold_distance = math.log(1e6) / 1.0
    rng = np.random.default_rng(0)
    far = [stability_release(0.7, int(threshold_distance + 40), 1.0, 1e-6, rng=rng) for _ in range(200)]
    near = [stability_release(0.7, 0, 1.0, 1e-6, rng=rng) for _ in range(200)]
    assert far == [0.7] * 200
    assert near == [None] * 200
