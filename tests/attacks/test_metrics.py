"""Scores of a reconstruction: order-free correlation, per-column errors in the column's units."""

from __future__ import annotations

import numpy as np
import pytest

from collabcausal.attacks.metrics import null_correlation, reconstruction_error
from collabcausal.errors import InputError
from collabcausal.randomness import child_rng


def test_binary_accuracy_beside_the_majority_rate_and_the_constant_baselines():
    truth = np.column_stack([[0.0, 0.0, 0.0, 1.0], [1.0, 2.0, 3.0, 4.0]])
    guess = np.column_stack([[0.2, 0.9, 0.1, 0.8], [1.0, 2.0, 3.0, 4.4]])
    score = reconstruction_error(truth, guess, [(0.0, 1.0), (0.0, 10.0)])
    assert score.binary_accuracy[0] == 0.75 and score.majority_rate[0] == 0.75
    assert np.isnan(score.binary_accuracy[1]) and np.isnan(score.majority_rate[1])
    np.testing.assert_allclose(score.within_one_percent, [0.0, 0.75])
    np.testing.assert_allclose(score.mean_baseline_rmse, truth.std(axis=0) / [1.0, 10.0])


def test_correlation_is_order_free_and_other_scores_are_not():
    truth = child_rng(0, "test", "metrics").normal(size=(50, 2))
    score = reconstruction_error(truth, truth[:, ::-1], [(-5.0, 5.0), (-5.0, 5.0)])
    np.testing.assert_allclose(score.correlation, [1.0, 1.0])
    assert np.all(score.relative_rmse > 0.05)


def test_mismatched_shapes_are_refused():
    with pytest.raises(InputError, match="do not match"):
        reconstruction_error(np.zeros((3, 2)), np.zeros((3, 1)), [(0.0, 1.0), (0.0, 1.0)])


def test_null_correlation_matches_simulated_random_guesses():
    # The threshold's tail: for n = 200 and 1 pair, rate 0.05 must be exceeded by about 5% of
    # independent Gaussian guesses; 20,000 draws give a binomial sd of 0.0015, bound 0.01 is > 6 sd.
    n, draws = 200, 20_000
    rng = child_rng(0, "test", "null")
    truth = rng.normal(size=n)
    guesses = rng.normal(size=(draws, n))
    tz = (truth - truth.mean()) / truth.std()
    gz = (guesses - guesses.mean(1, keepdims=True)) / guesses.std(1, keepdims=True)
    r = np.abs(gz @ tz / n)
    assert abs(np.mean(r > null_correlation(n, 1, 0.05)) - 0.05) < 0.01
