"""IHDP's private projection cells (collabcausal/simulations/ihdp_projection.py; scripts/ihdp_projection.py)."""

from __future__ import annotations

import numpy as np
import pytest

from collabcausal.errors import InputError
from collabcausal.simulations.ihdp import load_ihdp
from collabcausal.simulations.ihdp_projection import (
    ihdp_sites,
    modifier_matrix,
    oracle_sqrt_pehe,
    private_projection,
)

DATA = load_ihdp(1)
BOUNDS = (-5.0, 25.0)


def test_subjects_go_to_parties_by_position_each_once():
    sites = ihdp_sites(DATA, 3)
    assert sum(len(s.T) for s in sites) == len(DATA.T)
    np.testing.assert_array_equal(sites[1].X, DATA.X[1::3])
    np.testing.assert_array_equal(sites[2].Y, DATA.Y[2::3])


def test_modifiers_are_scaled_to_their_declared_ranges_and_the_oracle_beats_the_constant():
    Z = modifier_matrix(DATA, ["x1", "x7"], continuous_bound=6.0)
    np.testing.assert_allclose(Z[:, 1], np.clip(DATA.X[:, 0], -6, 6) / 6)
    np.testing.assert_allclose(Z[:, 2], 2 * DATA.X[:, 6] - 1)
    assert oracle_sqrt_pehe(DATA, ["x1", "x7"], 6.0) <= np.sqrt(np.mean((DATA.tau - DATA.tau.mean()) ** 2))


def test_a_small_study_refusal_is_a_cell_and_an_answer_has_one_coefficient_per_modifier():
    refused = private_projection(DATA, 1.0, ["x1", "x2"], BOUNDS)
    assert "too small a study" in refused.refused and np.isnan(refused.sqrt_pehe)
    cell = private_projection(DATA, 1e4, ["x1", "x2"], BOUNDS)
    assert cell.refused == "" and cell.coef.shape == (3,) and np.isfinite(cell.sqrt_pehe)
    with pytest.raises(InputError, match="not covariates"):
        private_projection(DATA, 4.0, ["age"], BOUNDS)
