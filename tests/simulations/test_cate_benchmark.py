"""The effect-modification benchmark's design and its quick run (benchmarks/bench_dp_cate_projection.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from collabcausal.simulations.cate_benchmark import (
    cate,
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
