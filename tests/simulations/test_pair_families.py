"""Synthetic cause-effect pair families: seeded, standardised, labelled, refused when unknown."""

import numpy as np
import pytest

from collabcausal.errors import InputError
from collabcausal.randomness import child_rng
from collabcausal.simulations.pair_families import FAMILIES, family_pair, family_pairs, gp_path


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


def test_unknown_family_is_refused_with_the_list():
    with pytest.raises(InputError, match="unknown pair family 'SIM-x'"):
        family_pair("SIM-x", 10, np.random.default_rng(0))
