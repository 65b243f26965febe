"""Vertical dp_effects on one machine: the encrypted rounds give the twin's study; the twin's estimate is sane."""

from __future__ import annotations

import numpy as np
import pytest

from collabcausal.analyst.dp_effects import DPEffectsSpec
from collabcausal.errors import InputError
from collabcausal.estimators.dp.effects.vertical import ColumnGroups
from collabcausal.simulations.vertical_design import OUTCOME_RANGE, covariate_bounds, simulate_subjects, true_ate
from collabcausal.simulations.vertical_simulation import RowGroup, vertical_study

GROUPS = ColumnGroups((tuple(range(10)), tuple(range(10, 20))))


def _spec(**changes) -> DPEffectsSpec:
    base = DPEffectsSpec(1.0, 1e-6, OUTCOME_RANGE["binary"], 0.1, tuple(f"x{i}" for i in range(20)),
                         tuple(covariate_bounds()), secure_aggregation=False, nuisance_replicates=2,
                         nuisance_share=0.65, ridge_scale=0.25)
    from dataclasses import replace

    return replace(base, **changes)


def _row_group(n: int, seed: int, groups: ColumnGroups = GROUPS) -> RowGroup:
    site = simulate_subjects(n, "binary", np.random.default_rng(seed))
    return RowGroup(tuple(site.X[:, list(g)] for g in groups.groups), site.T, site.Y)


def test_encrypted_study_equals_the_twin_on_the_same_noise() -> None:
    """Same data, same noise shares (seeded): the encrypted rounds give the twin's estimate to 1e-3 of its
    SE (measured: 1.5e-4 of the SE; TenSEAL's rescaling bias, up to 1e-3 per subject at depth 7, and the
    rounding to the error bound are far below the DP noise), and the log counts every step. A small design
    (5 covariates, 2,000 subjects) keeps the encrypted run to seconds."""
    rng = np.random.default_rng(1)
    n = 2000
    X = np.column_stack([rng.standard_normal((n, 4)), rng.integers(0, 2, n)])
    T = (rng.random(n) < 1 / (1 + np.exp(-(X @ np.array([0.5, -0.4, 0.3, 0.4, 0.5]))))).astype(np.int8)
    Y = (rng.random(n) < 1 / (1 + np.exp(-(X @ np.array([0.3, 0.2, -0.2, 0.3, 0.1]) + 0.5 * T)))).astype(float)
    groups = ColumnGroups(((0, 1, 2), (3, 4)))
    rg = RowGroup((X[:, :3], X[:, 3:]), T, Y)
    spec = _spec(columns=tuple(f"x{i}" for i in range(5)), bounds=((-4.0, 4.0),) * 4 + ((0.0, 1.0),), epsilon=50.0)
    twin = vertical_study([rg], groups, spec, rng=np.random.default_rng(5))
    encrypted = vertical_study([rg], groups, spec, rng=np.random.default_rng(5), encrypted=True)
    assert abs(encrypted.effect.estimate - twin.effect.estimate) <= 1e-3 * twin.effect.se
    assert encrypted.effect.se == pytest.approx(twin.effect.se, rel=1e-3)
    assert set(encrypted.wire.seconds) == {
        "statistics: label holder encrypts", "statistics: parties total their cross entries",
        "statistics: label holder opens",
        "scores: party encrypts its parts", "scores: label holder evaluates and totals", "scores: party opens"}
    assert all(b > 0 for step, b in encrypted.wire.bytes.items() if "opens" not in step)


def test_encrypted_three_party_study_equals_the_twin_on_the_same_noise() -> None:
    """Three column groups: the encrypted rounds (the second party's products of the arm passed to the third, the
    third's score parts under the second's key) give the twin's estimate on the same noise shares to 1e-3 of its
    SE, as two do."""
    rng = np.random.default_rng(2)
    n = 1500
    X = np.column_stack([rng.standard_normal((n, 4)), rng.integers(0, 2, n)])
    T = (rng.random(n) < 1 / (1 + np.exp(-(X @ np.array([0.5, -0.4, 0.3, 0.4, 0.5]))))).astype(np.int8)
    Y = (rng.random(n) < 1 / (1 + np.exp(-(X @ np.array([0.3, 0.2, -0.2, 0.3, 0.1]) + 0.5 * T)))).astype(float)
    groups = ColumnGroups(((0, 1), (2, 3), (4,)))
    rg = RowGroup((X[:, :2], X[:, 2:4], X[:, 4:]), T, Y)
    spec = _spec(columns=tuple(f"x{i}" for i in range(5)), bounds=((-4.0, 4.0),) * 4 + ((0.0, 1.0),), epsilon=50.0)
    twin = vertical_study([rg], groups, spec, rng=np.random.default_rng(6))
    encrypted = vertical_study([rg], groups, spec, rng=np.random.default_rng(6), encrypted=True)
    assert abs(encrypted.effect.estimate - twin.effect.estimate) <= 1e-3 * twin.effect.se
    assert encrypted.effect.se == pytest.approx(twin.effect.se, rel=1e-3)
    assert encrypted.wire.bytes["scores: further parties encrypt their parts"] > 0


def test_twin_estimates_the_effect_at_realistic_n() -> None:
    """At n = 100,000 and eps 1 the interval covers the truth (seeded noise and data; SE about 0.005, so a
    miss would be a 4-SE error)."""
    result = vertical_study([_row_group(100_000, 2)], GROUPS, _spec(), rng=np.random.default_rng(6))
    e = result.effect
    assert e.ci_low <= true_ate("binary") <= e.ci_high
    assert 0.002 < e.se < 0.02 and result.weight.error < 0.05  # the sharper soft clip (vertical.WEIGHT_SHARPNESS)


def test_grid_and_three_column_groups_run_in_the_twin() -> None:
    three = ColumnGroups((tuple(range(7)), tuple(range(7, 14)), tuple(range(14, 20))))
    result = vertical_study([_row_group(20_000, 3, three)], three, _spec(), rng=np.random.default_rng(7))
    assert np.isfinite(result.effect.estimate)
    grid = vertical_study([_row_group(10_000, 4), _row_group(10_000, 5)], GROUPS, _spec(), rng=np.random.default_rng(8))
    assert np.isfinite(grid.effect.estimate)


def test_vertical_study_refuses_cross_fitting_and_site_nuisances() -> None:
    with pytest.raises(InputError, match="pooled full-sample"):
        vertical_study([_row_group(500, 1)], GROUPS, _spec(n_folds=2))
