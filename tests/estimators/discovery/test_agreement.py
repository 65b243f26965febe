"""Closed forms for the chance that noise keeps the decision (paper 002, Theorems 2 and 4)."""

import numpy as np
import pytest
from scipy.stats import laplace

from collabcausal.estimators.discovery.agreement import (
    agreement_lower_bound,
    iqr_agreement,
    laplace_agreement,
    margin_agreement,
    pass_probability,
)


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


def test_the_margin_release_keeps_the_sign_with_one_laplace_variable_and_beats_two():
    # one Lap(s) on the margin: P(margin + L > 0) = 1 - exp(-margin/s)/2, the Laplace CDF at the margin; the same
    # scale on each of two scores (Theorem 2) keeps the sign less often at every margin > 0
    margins = np.array([0.0, 0.3, 1.0, 2.5])
    assert margin_agreement(margins, 1.0) == pytest.approx(laplace.cdf(margins))
    assert margin_agreement(-1.0, 2.0) == margin_agreement(1.0, 2.0)
    assert np.all(margin_agreement(margins[1:], 1.0) > laplace_agreement(margins[1:], 1.0))


def test_pass_probability_is_the_laplace_tail():
    assert pass_probability(5.0, 5.0, 1.0) == pytest.approx(0.5)
    assert pass_probability(3.0, 5.0, 2.0) == pytest.approx(0.5 * np.exp(-4.0))
    assert pass_probability(7.0, 5.0, 2.0) == pytest.approx(1 - 0.5 * np.exp(-4.0))


@pytest.mark.parametrize("agreement", [laplace_agreement, iqr_agreement, margin_agreement])
@pytest.mark.parametrize("margin", [0.0, 0.5, 2.0, 6.0])
def test_lower_bound_from_the_released_margin_covers_the_true_agreement(agreement, margin):
    # Seeded: the coverage is a fixed number for this seed, not a chance event.
    rng = np.random.default_rng(5)
    n_terms = {laplace_agreement: 2, iqr_agreement: 4, margin_agreement: 1}[agreement]
    signs = np.array([1.0, -1.0, 1.0, -1.0][:n_terms])
    released = margin + rng.laplace(size=(2000, n_terms)) @ signs
    truth = float(agreement(margin, 1.0))
    bounds = np.array([agreement_lower_bound(g, 1.0, agreement) for g in released])
    assert np.all(bounds >= 0.5 - 1e-12)
    # exact coverage is >= 95%: allow 4 binomial standard errors of 2000 draws
    assert np.mean(bounds > truth + 1e-12) <= 0.05 + 4 * np.sqrt(0.05 * 0.95 / 2000)


def test_plug_in_at_the_released_margin_is_biased_where_the_lower_bound_is_not():
    rng = np.random.default_rng(6)
    released = rng.laplace(size=(2000, 2)) @ np.array([1.0, -1.0])  # exact margin 0: truth 1/2
    plug_in = laplace_agreement(released, 1.0)
    assert np.mean(plug_in) == pytest.approx(0.75, abs=0.02)
    bounds = [agreement_lower_bound(g, 1.0) for g in released]
    assert np.mean(bounds) < 0.52
