"""Attack (e): an analyst colluding with p11 (it gets the anchor key) recovers p12, its row partner."""

from __future__ import annotations

import numpy as np
import pytest

from collabcausal.attacks.collusion import colluding_reconstruction


def test_full_rank_partner_comes_back_exactly(lalonde):
    x_tilde, a_tilde = lalonde.release("p12", 4)
    truth = lalonde.truth("p12")
    public = lalonde.public("p12", marginals=False)
    result = colluding_reconstruction(lalonde.anchor("p12"), a_tilde, x_tilde, public, truth=truth)
    assert np.max(np.abs(result.reconstruction - truth) / lalonde.public("p12").width) < 1e-8


@pytest.mark.parametrize(("name", "n_components"), [("p12", 2), ("p12", 3), ("p11", 3)])
def test_below_full_rank_binary_columns_close_the_gap(lalonde, name, n_components):
    # m~ < m_j, but two binary columns (public marginals) are enumerated: every row exact.
    x_tilde, a_tilde = lalonde.release(name, n_components)
    truth = lalonde.truth(name)
    result = colluding_reconstruction(lalonde.anchor(name), a_tilde, x_tilde, lalonde.public(name), truth=truth)
    assert np.all(result.error.within_one_percent == 1.0)
    assert np.max(np.abs(result.reconstruction - truth) / lalonde.public(name).width) < 1e-6


def test_works_on_noisy_releases_and_is_deterministic(lalonde):
    x_tilde, a_tilde = lalonde.release("p12", 3)
    noisy = x_tilde + np.random.default_rng(0).normal(0.0, 0.3, x_tilde.shape)
    public = lalonde.public("p12")
    first = colluding_reconstruction(lalonde.anchor("p12"), a_tilde, noisy, public).reconstruction
    lo, hi = public.ranges[:, 0], public.ranges[:, 1]
    assert np.all((first >= lo) & (first <= hi))
    assert np.array_equal(first, colluding_reconstruction(lalonde.anchor("p12"), a_tilde, noisy, public).reconstruction)
