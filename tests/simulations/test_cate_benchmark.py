"""The effect-modification benchmark's design and its quick run (benchmarks/bench_dp_cate_projection.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from collabcausal.simulations.cate_benchmark import (
    cate,
    clipped_gaussian_mean,
    clipped_outcome_projection,
    modifier_matrix,
    simulate_cate_sites,
    true_projection,
)

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("outcome", ["binary", "continuous"])
def test_the_stated_projection_is_least_squares_of_the_cate_on_the_scaled_modifiers(outcome):
    sites = simulate_cate_sites(2000, outcome, np.random.default_rng(0))
    X = np.vstack([s.X for s in sites])
    ols = np.linalg.lstsq(modifier_matrix(X), cate(X, outcome), rcond=None)[0]
    np.testing.assert_allclose(ols, true_projection(outcome), atol=1e-9)
    gain = np.concatenate([s.mean_treated - s.mean_control for s in sites])
    np.testing.assert_allclose(gain, cate(X, outcome), atol=1e-12)
    means = np.concatenate([s.mean_control for s in sites] + [s.mean_treated for s in sites])
    assert outcome == "continuous" or (means.min() > 0 and means.max() < 1)


def test_the_clipped_outcomes_projection_is_the_truth_for_the_binary_outcome_and_below_it_for_the_continuous():
    # the binary outcome never leaves [0, 1]; the continuous one's declared [-5, 7] clips its largest outcomes,
    # where the effect is largest: the intercept and the z0 slope fall (exact truncated-normal means, fixed sample)
    np.testing.assert_allclose(clipped_outcome_projection("binary", 40_000), true_projection("binary"), atol=1e-9)
    shift = clipped_outcome_projection("continuous", 40_000) - true_projection("continuous")
    assert -0.03 < shift[1] < -0.005 and -0.01 < shift[0] < 0.0 and abs(shift[2]) < 0.01
    # the truncated normal's mean against clipping seeded Gaussian draws: 200,000 draws at each of four means,
    # Monte Carlo sd below 2.3e-3, so a 0.012 gap (5 sd) fails by chance with probability < 1e-6
    mu = np.array([-6.0, 0.0, 6.5, 8.0])
    draws = np.clip(mu[None, :] + np.random.default_rng(1).standard_normal((200_000, 4)), -5.0, 7.0).mean(axis=0)
    np.testing.assert_allclose(clipped_gaussian_mean(mu, -5.0, 7.0), draws, atol=0.012)
