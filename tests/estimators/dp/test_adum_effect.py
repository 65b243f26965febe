"""eps-ADUM's average effect and its delta-method interval (issue 38, item 6)."""

from __future__ import annotations

import numpy as np
import pytest

from collabcausal.estimators.dp.adum_effect import adum_effect, release_noise_variances, unadjusted_difference
from collabcausal.estimators.dp.aggregates import noisy_aggregates

# four cells: the share treated and the effect both vary by cell (confounding by the cell only)
PROPENSITY = np.array([0.2, 0.4, 0.6, 0.8])
CONTROL_MEAN = np.array([0.40, 0.45, 0.50, 0.55])
EFFECT = np.array([0.02, 0.05, 0.08, 0.10])
BOUNDS = (0.0, 1.0)


def _release(rng: np.random.Generator, *, parties: int, n: int, epsilon: float):
    """Every party's by-arm release of its own rows, added up, and the true cell counts."""
    total, true_counts = None, np.zeros((4, 2))
    for _ in range(parties):
        cell = rng.integers(0, 4, n)
        t = (rng.random(n) < PROPENSITY[cell]).astype(int)
        y = (rng.random(n) < CONTROL_MEAN[cell] + EFFECT[cell] * t).astype(float)  # 0/1: variance near (1-0)^2/4
        answer = noisy_aggregates(cell, 4, epsilon, arms=t, values=y[:, None], bounds=[BOUNDS], rng=rng)
        total = answer if total is None else total + answer
        true_counts += np.bincount(cell * 2 + t, minlength=8).reshape(4, 2)
    return total.counts, total.sums[:, :, 0], true_counts


@pytest.mark.parametrize("estimand", ["att", "ate"])
def test_the_interval_covers_the_cell_adjusted_effect_at_its_nominal_rate(estimand):
    """DP noise larger than the sampling error (eps 0.2, 3 parties), the outcome's variance near its range
    bound (so the conservative sampling part is nearly exact): 95% nominal."""
    rng = np.random.default_rng(38)
    covered, reps = 0, 1000
    for _ in range(reps):
        counts, sums, true_counts = _release(rng, parties=3, n=20000, epsilon=0.2)
        effect = adum_effect(counts, sums, BOUNDS, epsilon=0.2, n_releases=3, estimand=estimand, min_count=1.0)
        weights = true_counts[:, 1] if estimand == "att" else true_counts.sum(axis=1)
        target = weights @ EFFECT / weights.sum()
        covered += effect.ci_low <= target <= effect.ci_high
    assert 0.92 <= covered / reps <= 0.98  # Monte Carlo SE 0.007 at 0.95


def test_the_unadjusted_difference_is_confounded_by_the_cells_and_the_adjusted_att_is_not():
    rng = np.random.default_rng(1)
    counts, sums, true_counts = _release(rng, parties=2, n=20000, epsilon=4.0)
    kwargs = {"epsilon": 4.0, "n_releases": 2, "min_count": 1.0}
    adjusted = adum_effect(counts, sums, BOUNDS, estimand="att", **kwargs)
    naive = unadjusted_difference(counts, sums, BOUNDS, **kwargs)
    target = true_counts[:, 1] @ EFFECT / true_counts[:, 1].sum()
    assert adjusted.ci_low <= target <= adjusted.ci_high
    assert naive.ci_low > target  # treated sit in the cells of higher control means
    assert naive.se < adjusted.se  # adjusting costs precision


def test_the_noise_variances_are_those_of_the_release():
    """Drawn with the release's own mechanism: the sample variances match the stated ones within 5%."""
    rng = np.random.default_rng(7)
    zero = np.zeros(200000, dtype=int)
    answer = noisy_aggregates(zero % 4, 4, 1.0, arms=zero % 2, values=np.zeros((zero.size, 1)), bounds=[BOUNDS],
                              rng=rng)
    count_var, sum_var = release_noise_variances(4, 1.0, BOUNDS)
    draws = [noisy_aggregates(np.zeros(0, dtype=int), 4, 1.0, arms=np.zeros(0, dtype=int),
                              values=np.zeros((0, 1)), bounds=[BOUNDS], rng=rng) for _ in range(20000)]
    counts = np.stack([d.counts for d in draws]).ravel()
    sums = np.stack([d.sums for d in draws]).ravel()
    assert abs(counts.var() / count_var - 1) < 0.05 and abs(sums.var() / sum_var - 1) < 0.05
    assert answer.counts[0, 0] > 0


def test_no_interval_when_a_weighted_cells_mean_is_noise():
    counts = np.array([[50.0, 40.0], [2.0, 30.0]])
    sums = np.array([[20.0, 25.0], [9.0, 15.0]])  # 9 / 2 > 1: the count is noise
    effect = adum_effect(counts, sums, BOUNDS, epsilon=1.0, n_releases=2, estimand="att", min_count=1.0)
    assert effect.se is None and effect.ci_low is None
    assert "1 weighted cell(s) have an arm mean outside the outcome range" in effect.no_interval
    assert np.isfinite(effect.estimate)
