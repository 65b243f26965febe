"""Placing scale-free sources on public columns: order, sign and scale from public facts only."""

from __future__ import annotations

import numpy as np
import pytest

from collabcausal.attacks.calibration import PublicInfo, place_sources, quantile_map
from collabcausal.errors import InputError
from collabcausal.randomness import child_rng


def _columns(n=4000):
    rng = child_rng(0, "test", "calibration")
    skewed = rng.exponential(10.0, n).clip(0, 100)  # earnings-like, range [0, 100]
    binary = (rng.random(n) < 0.2).astype(float)  # minority 1s, range [0, 1]
    return np.column_stack([skewed, binary])


def test_sources_in_any_order_sign_and_scale_come_back_in_place():
    truth = _columns()
    public = PublicInfo.from_sample(truth, [(0.0, 100.0), (0.0, 1.0)])
    sources = np.column_stack([-3.0 * truth[:, 1] + 7.0, -0.01 * truth[:, 0]])  # swapped, flipped, rescaled
    placed = place_sources(sources, public)
    assert np.array_equal(placed[:, 1], truth[:, 1])  # the binary column at its public rate
    # rank order exact; values as exact as 101 public quantiles allow (the exponential tail is coarse)
    assert np.array_equal(np.argsort(placed[:, 0], kind="stable"), np.argsort(truth[:, 0], kind="stable"))
    assert np.mean(np.abs(placed[:, 0] - truth[:, 0]) < 1.0) > 0.95


def test_ranges_only_uses_the_uniform_law_and_unreached_columns_get_the_mean():
    public = PublicInfo.from_ranges({"a": (0.0, 12.0), "b": (-1.0, 1.0)})
    assert not public.binary().any()
    np.testing.assert_allclose(public.means(), [6.0, 0.0], atol=1e-12)
    np.testing.assert_allclose(public.stds(), [12.0 / np.sqrt(12.0), 2.0 / np.sqrt(12.0)], rtol=1e-3)
    placed = place_sources(np.linspace(-1.0, 1.0, 11)[:, None], public)
    unreached = [c for c in range(2) if np.all(placed[:, c] == public.means()[c])]
    assert len(unreached) == 1 and np.all((placed >= public.ranges[:, 0]) & (placed <= public.ranges[:, 1]))


def test_quantile_map_is_monotone_onto_the_marginal():
    marginal = np.linspace(10.0, 20.0, 101)  # uniform on [10, 20]
    out = quantile_map(np.array([5.0, -1.0, 2.0, 9.0]), marginal)
    np.testing.assert_allclose(out, [16.25, 11.25, 13.75, 18.75])  # mid-ranks 5/8, 1/8, 3/8, 7/8


def test_bad_public_info_is_refused():
    with pytest.raises(InputError, match="low < high"):
        PublicInfo.from_ranges([(1.0, 1.0)])
    with pytest.raises(InputError, match="quantiles must have shape"):
        PublicInfo(np.array([[0.0, 1.0]]), np.zeros((1, 5)))
