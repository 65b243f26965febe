"""The projection's budget split and modifier clips (collabcausal/estimators/dp/effects/projection_budget.py).

Deterministic: fixed Gram matrices and seeded searches, no DP noise.
"""

from __future__ import annotations

import numpy as np
import pytest

from collabcausal.estimators.dp.effects.projection import MIN_CLIP
from collabcausal.estimators.dp.effects.projection_budget import modifier_clips, noise_trace_weights

# intercept, a Gaussian modifier on [-3.5, 3.5] (mean square 1/12.25), a binary one coded +-1 (mean 0.1)
N = 100_000
GRAM = N * np.array([[1.0, 0.01, 0.1], [0.01, 1 / 12.25, 0.0], [0.1, 0.0, 1.0]])


def _trace(gram: np.ndarray, widths: np.ndarray, weights: np.ndarray, first: int) -> float:
    """The projection's summed DP-noise variance per unit sigma^2 (module docstring), fixed intercept row left out."""
    inverse = np.linalg.inv(gram)
    c = (inverse**2).sum(axis=0)[first:]
    return float(np.sum(c * widths**2 / weights**2))


@pytest.mark.parametrize("first", [0, 1])
def test_the_weights_keep_the_budget_and_no_other_split_of_it_has_less_noise(first):
    widths = np.array([10.0, 6.0, 10.0])[first:]
    weights = np.array(noise_trace_weights(GRAM, widths, first))
    assert weights.size == 3 - first
    assert np.sum(weights**2) == pytest.approx(weights.size)  # the share J unit weights take: sensitivity unchanged
    best = _trace(GRAM, widths, weights, first)
    c = (np.linalg.inv(GRAM) ** 2).sum(axis=0)[first:]
    assert best == pytest.approx(np.sum(np.sqrt(c) * widths) ** 2 / weights.size)  # the Cauchy-Schwarz minimum
    assert best < 0.7 * _trace(GRAM, widths, np.ones_like(widths), first)  # the slope's 12x amplification, shared out
    rng = np.random.default_rng(7)
    for _ in range(2000):  # any other split of the same budget has more noise
        other = weights * np.exp(rng.normal(0.0, 0.3, weights.size))
        other *= np.sqrt(weights.size / np.sum(other**2))
        assert _trace(GRAM, widths, other, first) >= best * (1 - 1e-12)


def test_a_singular_or_starving_gram_matrix_gives_no_weights():
    assert noise_trace_weights(np.ones((3, 3)), [1.0, 1.0, 1.0], 0) is None
    lopsided = np.diag([1.0, 1e-13, 1.0])  # c ratio 1e26: a weight below MIN_WEIGHT
    assert noise_trace_weights(lopsided, [1.0, 1.0, 1.0], 0) is None


def test_a_modifier_clip_is_k_root_mean_squares_capped_at_one():
    clips = modifier_clips(GRAM, N, 2.0)
    assert clips == pytest.approx((2.0 / 3.5, 1.0))  # the binary modifier spans its range: unclipped
    noisy = GRAM.copy()
    noisy[1, 1] = -5.0  # a released diagonal that noise made negative: no clip
    assert modifier_clips(noisy, N, 2.0) == pytest.approx((1.0, 1.0))
    assert modifier_clips(GRAM, N, 1e-9) == pytest.approx((MIN_CLIP, MIN_CLIP))
