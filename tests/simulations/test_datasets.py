"""Bundled and generated data sets."""

from __future__ import annotations

import numpy as np
import pytest

from collabcausal.analyst.effects import estimate_effects
from collabcausal.errors import InputError
from collabcausal.simulations.datasets import (
    CausalDataset,
    lalonde_experimental_benchmark,
    load_csv_dataset,
    load_lalonde,
    make_dcqe_synthetic,
)


def test_lalonde_matches_its_source_facts() -> None:
    data = load_lalonde()
    assert data.n_subjects == 2675 and int(data.frame["treat"].sum()) == 185
    assert abs(lalonde_experimental_benchmark() - 1.79434) < 1e-4  # SOURCE.md: 1794.34 dollars
    assert data.estimand == "att" and len(data.column_groups) == 2


def test_synthetic_generator_is_seeded_and_has_true_ate_one() -> None:
    a, b = make_dcqe_synthetic(500, 3), make_dcqe_synthetic(500, 3)
    np.testing.assert_array_equal(a.frame.to_numpy(), b.frame.to_numpy())
    assert a.benchmark == 1.0 and a.true_propensity.shape == (500,)
    x = a.frame[list(a.covariates)].to_numpy()
    assert (np.corrcoef(np.column_stack([x, a.frame["treat"], a.frame["y"]]).T)[:6, 6:] > 0).all()


def test_synthetic_calibration_single_party_biased_centralized_accurate() -> None:
    """docs/dcqe-synthetic.md: over 30 data sets, IA PSM is biased by >= 0.4, CA PSM within 0.1."""
    ia, ca = [], []
    for seed in range(30):
        d = make_dcqe_synthetic(1000, seed)
        X, t, y = d.frame[list(d.covariates)].to_numpy(), d.frame["treat"].to_numpy(), d.frame["y"].to_numpy()
        ia.append(estimate_effects(X[:500, :3], t[:500], y[:500], estimators=["psm"]).estimates["psm"].estimate)
        ca.append(estimate_effects(X, t, y, estimators=["psm"]).estimates["psm"].estimate)
    assert np.mean(ia) - 1.0 >= 0.4
    assert abs(np.mean(ca) - 1.0) <= 0.1


def test_csv_dataset_is_validated_like_a_party_table(tmp_path) -> None:
    d = make_dcqe_synthetic(100, 0)
    d.frame.assign(treat=d.frame["treat"] * 2).to_csv(tmp_path / "bad.csv", index=False)
    with pytest.raises(InputError, match="must be coded 0/1"):
        load_csv_dataset(str(tmp_path / "bad.csv"), ["x1", "x2"], "treat", "y")


def test_column_groups_must_partition_the_covariates() -> None:
    d = make_dcqe_synthetic(50, 0)
    with pytest.raises(InputError, match="do not partition"):
        CausalDataset("d", d.frame, d.covariates, "treat", "y", column_groups=(("x1",), ("x2",)))
