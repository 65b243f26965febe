"""Synthetic cause-effect pair families: seeded, standardised, labelled, as published, refused when unknown."""

import numpy as np
import pytest
from scipy.stats import kurtosis, skew

from collabcausal.errors import InputError
from collabcausal.randomness import child_rng
from collabcausal.simulations.pair_families import (
    FAMILIES,
    family_pair,
    family_pairs,
    gp_path,
    quantile_family_columns,
    sim_family_columns,
)


@pytest.mark.parametrize("family", FAMILIES)
def test_each_family_is_seeded_standardised_and_labelled(family):
    first, again = (family_pairs(family, 3, 200, seed=4) for _ in range(2))
    for a, b in zip(first, again, strict=True):
        assert np.array_equal(a.x, b.x) and np.array_equal(a.y, b.y) and a.direction == b.direction
        for column in (a.x, a.y):
            assert column.shape == (200,) and np.all(np.isfinite(column))
            assert abs(column.mean()) < 1e-9 and column.std() == pytest.approx(1.0)
        assert a.direction in ("x->y", "y->x")


def test_directions_are_swapped_about_half_the_time():
    directions = [p.direction for p in family_pairs("AN", 200, 50, seed=0)]
    assert 0.4 < np.mean([d == "x->y" for d in directions]) < 0.6


def test_gp_path_has_unit_variance_and_the_requested_smoothness():
    u = np.linspace(-3, 3, 400)[:, None]
    paths = np.array([gp_path(u, [1.0], child_rng(0, "gp", k)) for k in range(300)])
    assert paths.var() == pytest.approx(1.0, abs=0.15)
    # squared-exponential kernel: correlation at lag 1 length scale is exp(-1/2)
    lag = np.argmin(np.abs(u[:, 0] - (u[0, 0] + 1.0)))
    assert np.corrcoef(paths[:, 0], paths[:, lag])[0, 1] == pytest.approx(np.exp(-0.5), abs=0.12)


def test_sim_g_has_an_approximately_gaussian_cause_and_sim_a_non_gaussian_one():
    # Mooij et al. (2016), Appendix C: w_EX, s_EX ~ Gamma(1e6, 1e-3) in SIM-G, a nearly linear map of a Gaussian
    def shape(family, k):
        cause, _ = sim_family_columns(family, 1000, child_rng(3, "shape", family, k))
        return abs(skew(cause)), abs(kurtosis(cause))

    sim_g = np.array([shape("SIM-G", k) for k in range(20)])
    assert sim_g[:, 0].max() < 0.5 and sim_g[:, 1].max() < 1.0  # sampling sd at n = 1000: 0.08 and 0.15
    sim = np.array([shape("SIM", k) for k in range(20)])
    assert (sim[:, 0] > 0.5).sum() >= 5  # random densities through a random GP: often skewed


def test_an_cause_is_tagasovskas_scale_mixture():
    # Tagasovska et al. (2020), section 5: X = sqrt(U(1, 2)) N, so var X = 1.5, not a standardised density
    cause, _ = quantile_family_columns("AN", 20_000, child_rng(3, "an"))
    assert cause.var() == pytest.approx(1.5, abs=0.1)  # sampling sd 0.015


def test_unknown_family_is_refused_with_the_list():
    with pytest.raises(InputError, match="unknown pair family 'SIM-x'"):
        family_pair("SIM-x", 10, np.random.default_rng(0))
