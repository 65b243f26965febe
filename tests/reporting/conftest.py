"""A small simulation shared by the reporting tests."""

from __future__ import annotations

import pytest

from collabcausal.simulations.datasets import make_dcqe_synthetic
from collabcausal.simulations.dcqe_experiment import ExperimentConfig, run_experiment
from collabcausal.simulations.partition import partition_grid
from collabcausal.simulations.settings import parse_settings


@pytest.fixture(scope="package")
def small_result():
    data = make_dcqe_synthetic(seed=0)
    grid = partition_grid(data, 2, seed=0)
    config = ExperimentConfig(data, grid, parse_settings(["L-IA", "W", "CA"], grid), n_boot=6, party_components=2)
    return run_experiment(config)
