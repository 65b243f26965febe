"""Over gRPC: a party holding another anchor key stops the study at ``describe``, before any representation."""

from __future__ import annotations

import pytest
from protocol_helpers import PartyThread

from collabcausal.analyst.dcqe import run_dcqe
from collabcausal.anchor_key import simulation_anchor_key
from collabcausal.errors import StudyFailedError
from collabcausal.protocol.server import GrpcGrid
from collabcausal.simulations.datasets import load_lalonde
from collabcausal.simulations.partition import build_parties, partition_grid


def test_a_party_with_another_anchor_key_fails_the_study_over_grpc_before_any_representation(lalonde_2x2):
    _, plan = lalonde_2x2
    dataset = load_lalonde()
    parties = build_parties(dataset, partition_grid(dataset, 2, seed=0), anchor_key=simulation_anchor_key(0))
    parties[-1].anchor_key = bytes(32)  # p22: the key of another study
    handled: list[str] = []
    for party in parties:
        handle = party.handle
        party.handle = lambda message, handle=handle: handled.append(message.operation) or handle(message)
    grid = GrpcGrid([p.name for p in parties], tls=None, study=plan.study, task_timeout=30)
    threads = [PartyThread(p, grid.address, None) for p in parties]
    with grid:
        grid.wait_for_parties(20)
        with pytest.raises(StudyFailedError, match=r"^p22 holds a different anchor key from p11, p12, p21; fix"):
            run_dcqe(grid, plan)
        grid.finish(failed="anchor keys differ", linger=3)
    for thread in threads:
        thread.join()
    assert handled == ["describe"] * 4
