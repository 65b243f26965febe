"""The reproduction's runner (collabcausal/simulations/dcqe_experiment.py): replicates in parallel, warm-started."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import logit

from collabcausal.anchor_key import simulation_anchor_key
from collabcausal.protocol.inprocess import InProcessGrid
from collabcausal.simulations.datasets import make_dcqe_synthetic
from collabcausal.simulations.dcqe_experiment import ExperimentConfig, _replicate, run_experiment
from collabcausal.simulations.partition import build_parties, partition_grid
from collabcausal.simulations.settings import parse_settings

TOKENS = ("L-IA", "L", "W", "CA")


def config(n_jobs: int = 1, n_boot: int = 6) -> ExperimentConfig:
    data = make_dcqe_synthetic(400, 3)
    part = partition_grid(data, 2, seed=0)
    return ExperimentConfig(data, part, parse_settings(TOKENS, part), n_boot=n_boot, party_components=2, n_jobs=n_jobs)


def test_replicates_are_the_same_numbers_bit_for_bit_whatever_n_jobs():
    serial, forked = run_experiment(config(1)), run_experiment(config(2))
    assert serial.replicates.keys() == forked.replicates.keys()
    for key, metrics in serial.replicates.items():
        for metric, values in metrics.items():
            np.testing.assert_array_equal(values, forked.replicates[key][metric], err_msg=str((key, metric)))


def test_a_replicate_started_from_the_full_sample_propensities_fits_the_same_model():
    """Only Newton's starting point changes: the IPW estimates (smooth in the propensity) agree to 1e-7."""
    cfg = config()
    grid = InProcessGrid(build_parties(cfg.dataset, cfg.partition, anchor_key=simulation_anchor_key(cfg.seed)))
    diagnostics: dict = {}
    _replicate(cfg, grid, -1, diagnostics)
    full = {name: logit(d.propensity) for name, d in diagnostics.items()}
    assert set(full) == {s.name for s in cfg.settings}
    for b in range(3):
        cold, warm = _replicate(cfg, grid, b), _replicate(cfg, grid, b, full_logits=full)
        for setting in full:
            key = (setting, "ipw")
            assert warm[key]["estimate"] == pytest.approx(cold[key]["estimate"], rel=1e-7, abs=1e-9), key
            assert warm[key]["inconsistency_ca"] == pytest.approx(cold[key]["inconsistency_ca"], rel=1e-6, abs=1e-10)


def test_local_smds_of_every_weighted_sample_in_one_pass_equal_smd_sample_by_sample():
    from collabcausal.analyst.effects import estimate_effects
    from collabcausal.estimators.balance import smd
    from collabcausal.simulations.dcqe_experiment import _local_smd

    X, t, y = make_dcqe_synthetic(400, 3).arrays
    bundle = estimate_effects(X, t, y, estimand="ate", analytic_se=False)
    local = _local_smd(bundle, X, t)
    assert local.keys() == bundle.estimates.keys()
    for name, values in local.items():
        weights = bundle.balance_weights(name)
        if weights is None:
            assert values is None
        else:
            np.testing.assert_allclose(values, smd(X, t, weights), rtol=1e-12, atol=1e-15, err_msg=name)
    assert sum(v is not None for v in local.values()) >= 2  # PSM's and IPW's samples at least
