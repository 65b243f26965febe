"""Closed forms for the chance that noise keeps the decision (paper 002, Theorems 2 and 4)."""

import numpy as np
import pytest

from collabcausal.estimators.discovery.agreement import iqr_agreement, laplace_agreement, pass_probability


def test_theorem_2_at_zero_margin_is_a_coin_flip_and_tends_to_one():
    assert laplace_agreement(0.0, 1.0) == pytest.approx(0.5)
    assert laplace_agreement(50.0, 1.0) == pytest.approx(1.0)
    assert laplace_agreement(-1.0, 0.5) == laplace_agreement(1.0, 0.5)


def test_theorem_4_at_zero_margin_is_a_coin_flip_and_tends_to_one():
    assert iqr_agreement(0.0, 2.0) == pytest.approx(0.5)
    assert iqr_agreement(200.0, 2.0) == pytest.approx(1.0)


@pytest.mark.parametrize("margin", [0.3, 1.0, 2.5])
def test_closed_forms_match_simulated_laplace_sums(margin):
    rng = np.random.default_rng(11)
    draws = 400_000
    two = rng.laplace(size=(draws, 2)) @ np.array([1.0, -1.0])
    four = rng.laplace(size=(draws, 4)) @ np.array([1.0, 1.0, -1.0, -1.0])
    se = 0.5 / np.sqrt(draws)
    assert np.mean(margin + two > 0) == pytest.approx(laplace_agreement(margin, 1.0), abs=4 * se)
    assert np.mean(margin + four > 0) == pytest.approx(iqr_agreement(margin, 1.0), abs=4 * se)


def test_pass_probability_is_the_laplace_tail():
    assert pass_probability(5.0, 5.0, 1.0) == pytest.approx(0.5)
    assert pass_probability(3.0, 5.0, 2.0) == pytest.approx(0.5 * np.exp(-4.0))
    assert pass_probability(7.0, 5.0, 2.0) == pytest.approx(1 - 0.5 * np.exp(-4.0))
