"""DP CATE on a DC-QE collaborative representation: releases, ledger charges, refusals."""

from functools import partial

import numpy as np
import pytest

from collabcausal.analyst.dcqe import DCQEPlan, run_dcqe
from collabcausal.analyst.dp_cate import dp_cate_on_representation
from collabcausal.anchor_key import simulation_anchor_key
from collabcausal.errors import InputError
from collabcausal.estimators.dp import dp_cate as dp_cate_module
from collabcausal.estimators.dp.meta_algorithm import DPEBMClassifier, DPEBMRegressor
from collabcausal.ledger import PrivacyLedger
from collabcausal.protocol.inprocess import InProcessGrid
from collabcausal.simulations.datasets import make_dcqe_synthetic
from collabcausal.simulations.partition import build_parties, partition_grid

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


@pytest.fixture(scope="module")
def study():
    data = make_dcqe_synthetic(600, seed=0)
    part = partition_grid(data, 2, seed=0)
    ranges = {c: (-4.0, 4.0) for c in data.covariates}
    plan = DCQEPlan(part.names(), ranges, n_anchors=600, party_components=3, n_components=6)
    return run_dcqe(InProcessGrid(build_parties(data, part, anchor_key=simulation_anchor_key(0))), plan)


def bounds(result):
    return [(-0.2, 0.2)] * result.representation.X_hat.shape[1]  # X^ of this study spans about +-0.06


@pytest.fixture
def seeded_nuisances(monkeypatch):
    """interpret's DP-EBM noise in the nuisances, seeded: the fit g_D becomes reproducible, so its accuracy is
    checked at one seed (fresh noise moves g_D(0) by about 0.14 sd, with tails past the bound: measured over 60
    fits). Seeded noise is not DP; the charge path under test is unchanged."""
    monkeypatch.setattr(dp_cate_module, "DPEBMClassifier", partial(DPEBMClassifier, noise_seed=1))
    monkeypatch.setattr(dp_cate_module, "DPEBMRegressor", partial(DPEBMRegressor, noise_seed=2))


def test_functional_release_on_x_hat_estimates_the_constant_effect_and_charges_the_ledger(study, tmp_path,
                                                                                          seeded_nuisances):
    ledger = PrivacyLedger(tmp_path / "study.db", epsilon=30.0, delta=1e-3)
    f = dp_cate_on_representation(study, feature_bounds=bounds(study), outcome_bounds=(-8, 8), epsilon=20.0,
                                  ledger=ledger, seed=0)
    assert ledger.spent()[0] == pytest.approx(20.0)
    values = f(np.zeros((5, 6)))
    # g_D(0) + r U(0): the fit on seeded nuisances near the true effect 1, and the OpenDP noise of the released
    # path (unseeded, U(0) ~ N(0, 1)) within 4.5 sd (false-failure rate 7e-6); r is about 0.3 at eps = 20
    centre = values - f.noise_scale * f.path.values_[0]
    assert np.all(np.abs(centre - 1.0) < 0.5) and f.noise_scale < 0.5
    assert abs(f.path.values_[0]) < 4.5
    again = f(np.zeros((1, 6)))
    assert again[0] == pytest.approx(values[0], rel=1e-12)
    assert ledger.spent()[0] == pytest.approx(20.0)


def test_refusals_happen_before_any_charge(study, tmp_path):
    ledger = PrivacyLedger(tmp_path / "study.db", epsilon=20.0, delta=1e-3)
    common = {"feature_bounds": bounds(study), "outcome_bounds": (-8, 8), "epsilon": 1.0}
    with pytest.raises(InputError, match="no ledger"):
        dp_cate_on_representation(study, ledger=None, **common)
    with pytest.raises(InputError, match="feature bounds"):
        dp_cate_on_representation(study, ledger=ledger, **{**common, "feature_bounds": bounds(study)[:2]})
    with pytest.raises(TypeError):  # the finite-query release (not (eps, delta)-DP) is not offered
        dp_cate_on_representation(study, ledger=ledger, query_points=np.zeros((1, 6)), **common)
    assert ledger.history() == []


def test_release_over_grpc_uses_the_same_representation_as_in_process(study, tmp_path):
    from collabcausal.protocol.launcher import local_grpc_grid

    data = make_dcqe_synthetic(600, seed=0)
    part = partition_grid(data, 2, seed=0)
    plan = DCQEPlan(part.names(), {c: (-4.0, 4.0) for c in data.covariates}, n_anchors=600, party_components=3,
                    n_components=6)
    parties = build_parties(data, part, anchor_key=simulation_anchor_key(0))
    with local_grpc_grid(parties, workdir=tmp_path, tls=False, study=plan.study) as grid:
        over_grpc = run_dcqe(grid, plan)
    assert np.array_equal(over_grpc.representation.X_hat, study.representation.X_hat)
    ledger = PrivacyLedger(tmp_path / "study.db", epsilon=20.0, delta=1e-3)
    f = dp_cate_on_representation(over_grpc, feature_bounds=bounds(over_grpc), outcome_bounds=(-8, 8),
                                  epsilon=20.0, ledger=ledger, seed=0)
    assert np.isfinite(f(np.zeros((2, 6)))).all()
    assert ledger.spent()[0] == pytest.approx(20.0)
