"""dp_effects sufficient statistics: packing, and the L2 sensitivity at its worst case (docs/dp-effects.md).

Deterministic: seeded searches over neighbouring records; no tolerance is random.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from collabcausal.errors import InputError
from collabcausal.estimators.dp.effects.design import FeatureMap
from collabcausal.estimators.dp.effects.statistics import (
    ArmStatistics,
    fold_statistics,
    statistics_length,
    statistics_sensitivity,
)

FM = FeatureMap(((-1.0, 1.0),) * 3, (0.0, 1.0), n_sites=2)


def _record(z: np.ndarray, site: int, t: int, u: float) -> np.ndarray:
    """The contribution of one record to a fold's vector."""
    d = np.r_[np.eye(FM.n_sites)[site], z]
    return fold_statistics(d[None, :], np.array([t]), np.array([u * FM.outcome_width]), FM.outcome_width)


def test_unpack_inverts_the_packing_and_sums_add():
    rng = np.random.default_rng(0)
    D = FM.design(rng.uniform(-1, 1, (50, 3)), 1)
    t, y = rng.integers(0, 2, 50), rng.uniform(-0.5, 0.5, 50)
    stats = ArmStatistics.unpack(fold_statistics(D, t, y, 1.0), FM.dim)
    for arm in (0, 1):
        rows = D[t == arm]
        np.testing.assert_allclose(stats.gram[arm], rows.T @ rows)
        np.testing.assert_allclose(stats.cross[arm], rows.T @ y[t == arm])
    doubled = stats + stats
    np.testing.assert_allclose(doubled.gram[1], 2 * stats.gram[1])
    with pytest.raises(InputError, match="shape"):
        ArmStatistics.unpack(np.zeros(statistics_length(FM.dim) + 1), FM.dim)


def test_no_substitution_moves_the_vector_beyond_the_sensitivity_and_corners_come_close():
    delta = statistics_sensitivity(FM)
    corners = [np.array(c, dtype=float) for c in itertools.product((-1.0, 0.0, 1.0), repeat=3)]
    records = [(z, s, t, u) for z in corners for s in (0, 1) for t in (0, 1) for u in (-0.5, 0.5)]
    rng = np.random.default_rng(1)
    records += [(rng.uniform(-1, 1, 3), int(rng.integers(2)), int(rng.integers(2)), float(rng.uniform(-0.5, 0.5)))
                for _ in range(200)]
    vectors = np.stack([_record(*r) for r in records])
    worst = 0.0
    for v in vectors:
        worst = max(worst, float(np.max(np.linalg.norm(vectors - v, axis=1))))
    assert worst <= delta + 1e-12
    assert worst >= 0.95 * delta  # the bound is nearly attained (arm flip at an all-ones corner)


def test_clipping_keeps_a_hostile_record_within_the_bound():
    far = FM.design(np.array([[1e9, -1e9, 1e9]]), 0)
    assert np.abs(far).max() == 1.0
    v = fold_statistics(far, np.array([1]), np.array([1e12]), FM.outcome_width)
    assert np.linalg.norm(v) <= statistics_sensitivity(FM)
