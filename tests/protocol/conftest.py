"""Fixtures for the transport tests: LaLonde on a 2x2 grid and a study CA."""

from __future__ import annotations

import pytest

from collabcausal import certs
from collabcausal.analyst.dcqe import DCQEPlan
from collabcausal.anchor_key import simulation_anchor_key
from collabcausal.party import Party
from collabcausal.simulations.datasets import load_lalonde
from collabcausal.simulations.partition import build_parties, partition_grid


@pytest.fixture(scope="session")
def lalonde_2x2() -> tuple[list[Party], DCQEPlan]:
    """The four LaLonde parties of a 2x2 grid and the W-clb (all four parties) DC-QE plan."""
    dataset = load_lalonde()
    partition = partition_grid(dataset, 2, seed=0)
    plan = DCQEPlan(
        row_groups=partition.names(),
        anchor_ranges=dataset.covariate_ranges(),
        n_anchors=dataset.n_subjects,
        party_components=3,
        seed=0,
        estimand=dataset.estimand,
        estimators=("psm", "ipw"),
        study="lalonde-2x2",
    )
    return build_parties(dataset, partition, anchor_key=simulation_anchor_key(0)), plan


@pytest.fixture(scope="session")
def study_ca(tmp_path_factory: pytest.TempPathFactory):
    """A study CA with an analyst certificate and party certificates for "a", "b", "mallory"."""
    folder = tmp_path_factory.mktemp("certs")
    certs.init_ca(folder)
    certs.issue(folder, "analyst", server=True)
    for name in ("a", "b", "mallory"):
        certs.issue(folder, name)
    return folder
