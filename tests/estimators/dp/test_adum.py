"""eps-ADUM estimator (paper 001, Algorithm 1)."""

from __future__ import annotations

import numpy as np
import pytest

from collabcausal.errors import InputError
from collabcausal.estimators.dp.adum import EpsADUM, arm_means
from collabcausal.estimators.dp.aggregates import NoisyAggregates
from collabcausal.estimators.dp.partitions import regular_cut


def test_huge_epsilon_gives_the_exact_cell_uplifts():
    x = np.array([-0.9, -0.8, -0.7, -0.6, 0.6, 0.7, 0.8, 0.9])
    t = np.array([0, 1, 0, 1, 0, 1, 0, 1])
    y = np.array([1.0, 2.0, 1.0, 2.0, 0.0, 3.0, 0.0, 3.0])
    model = EpsADUM(regular_cut("x", (-1, 1), 2), 1e7, (0, 5)).fit(x, t, y)
    assert model.uplift_ == pytest.approx([1.0, 3.0], abs=1e-4)
    assert model.predict(np.array([-0.5, 0.1, 0.99])) == pytest.approx([1.0, 3.0, 3.0], abs=1e-4)


def test_uplift_is_piecewise_constant_and_close_to_sin_for_moderate_epsilon():
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, 20000)
    t = rng.binomial(1, 0.5, 20000)
    y = t * np.sin(x) + rng.normal(0, 0.1, 20000)
    model = EpsADUM(regular_cut("x", (-1, 1), 20), 1.0, (-1.3, 1.3), rng=rng).fit(x, t, y)
    grid = np.linspace(-1, 1, 401)
    assert np.sqrt(np.mean((model.predict(grid) - np.sin(grid)) ** 2)) < 0.06
    assert np.unique(model.predict(grid)).size <= 20


def test_tiny_or_negative_noisy_counts_fall_back_to_the_pooled_arm_mean():
    counts = np.array([[100.0, 100.0], [-3.0, 0.4], [50.0, 50.0]])
    sums = np.array([[10.0, 30.0], [7.0, -9.0], [5.0, 15.0]])
    means = arm_means(counts, sums, (-1, 1), 1.0)
    pooled = [np.clip(22.0 / 147.0, -1, 1), np.clip(36.0 / 150.4, -1, 1)]
    assert means[1] == pytest.approx(pooled)
    assert means[0] == pytest.approx([0.1, 0.3])


def test_noisy_means_are_clipped_to_the_outcome_bounds():
    means = arm_means(np.array([[1.0, 2.0]]), np.array([[50.0, -50.0]]), (-1, 1), 1.0)
    assert means.tolist() == [[1.0, -1.0]]


def test_fit_aggregates_refuses_a_mismatched_partition():
    model = EpsADUM(regular_cut("x", (-1, 1), 3), 1.0, (0, 1))
    with pytest.raises(InputError, match="3-cell"):
        model.fit_aggregates(NoisyAggregates(np.zeros((2, 2)), np.zeros((2, 2, 1))))


def test_predict_before_fit_and_bad_epsilon_are_errors():
    model = EpsADUM(regular_cut("x", (-1, 1), 3), 0.0, (0, 1))
    with pytest.raises(InputError, match="not fitted"):
        model.predict([0.0])
    with pytest.raises(InputError, match="epsilon"):
        model.fit(np.zeros(4), [0, 1, 0, 1], np.zeros(4))
