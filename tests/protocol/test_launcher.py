"""Parties as OS processes on loopback with mutual TLS: same numbers as in process, nothing raw on the wire."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import threading
from functools import partial

import numpy as np
import pytest

from collabcausal.analyst.dcqe import run_dcqe
from collabcausal.errors import InputError, StudyFailedError
from collabcausal.messages import Message
from collabcausal.party import Party
from collabcausal.party.policy import PartyPolicy
from collabcausal.protocol.arrays import read_message
from collabcausal.protocol.inprocess import InProcessGrid
from collabcausal.protocol.launcher import LocalStudy, local_grpc_grid
from collabcausal.protocol.server import GrpcGrid


@pytest.mark.parametrize(
    "setting",
    [
        "T",  # the first row group's two parties: fast
        "T in anchor blocks",  # the same, the anchor images asked for in blocks of 500 rows
        pytest.param("W", marks=pytest.mark.slow),  # all four parties (W-clb), each its own process
    ],
)
def test_lalonde_2x2_over_mutual_tls_equals_in_process_and_sends_no_raw_covariate(
    lalonde_2x2, setting, tmp_path, monkeypatch
):
    parties, plan = lalonde_2x2
    if setting.startswith("T"):
        plan = dataclasses.replace(plan, row_groups=plan.row_groups[:1], label_holders=None, balance_parties=None)
        parties = [p for p in parties if p.name in plan.row_groups[0]]
    if setting == "T in anchor blocks":
        width = sum(len(p.table.covariate_names) for p in parties)
        plan = dataclasses.replace(plan, anchor_block_values=500 * width)
    captured: list[tuple[str, list]] = []
    upload = GrpcGrid._upload

    def spy(self, frames, context):
        frames = list(frames)
        captured.append((self._identify(context), frames))
        return upload(self, iter(frames), context)

    monkeypatch.setattr(GrpcGrid, "_upload", spy)
    expected = run_dcqe(InProcessGrid(parties), plan)
    with local_grpc_grid(parties, workdir=tmp_path, tls=True, study=plan.study) as grid:
        assert grid.party_names() == sorted(p.name for p in parties)
        got = run_dcqe(grid, plan)
    for name, estimate in expected.effects.estimates.items():
        assert got.effects.estimates[name].estimate == estimate.estimate
    assert np.array_equal(got.effects.propensity, expected.effects.propensity)
    assert all(np.array_equal(got.smd[k], expected.smd[k]) for k in expected.smd)
    assert np.array_equal(got.representation.X_hat, expected.representation.X_hat)

    # Wire test: every upload each party made (describe, dc_representation, weighted_moments).
    by_party = {p.name: p for p in parties}
    operations = set()
    for name, frames in captured:
        message = read_message(frames).message
        operations.add(message.operation)
        payload = frames[0].header.SerializeToString() + b"".join(f.chunk.data for f in frames[1:])
        for column in by_party[name].table.covariates.T:
            assert column.tobytes() not in payload, f"{name} sent a raw covariate column"
            for array in message.arrays.values():
                vectors = array.T if array.ndim == 2 else [array]
                assert not any(np.array_equal(v, column) for v in vectors if v.shape == column.shape)
    assert operations == {"describe", "dc_representation", "weighted_moments"}
    assert {name for name, _ in captured} == set(by_party)


def test_processes_are_stopped_and_their_logs_kept(lalonde_2x2, tmp_path):
    parties, _ = lalonde_2x2
    with local_grpc_grid(parties[:1], workdir=tmp_path, tls=False) as grid:
        assert grid.request(parties[0].name, Message("describe"), timeout=30).params["n_subjects"] > 0
    log = (tmp_path / parties[0].name / "party.log").read_text()
    assert "study finished" in log and "WARNING: plaintext" in log
    assert (tmp_path / parties[0].name / "audit.jsonl").exists()


def test_custom_reducer_cannot_cross_a_process(lalonde_2x2, tmp_path):
    party = lalonde_2x2[0][0]
    with pytest.raises(InputError, match="cannot cross a process"):
        LocalStudy([Party(party.name, party.table, reducer_factory=lambda k: None)], workdir=tmp_path)


_DIE_DURING_UPLOAD = """
import os, sys
from pathlib import Path
from collabcausal.protocol.arrays import FrameStream
marker, original = Path(sys.argv[1]), FrameStream.encoded
def dying(self):
    for i, frame in enumerate(original(self)):
        if i == 3 and not marker.exists():
            marker.write_text("killed during upload")
            os._exit(9)
        yield frame
FrameStream.encoded = dying
from collabcausal.cli import main
sys.exit(main(sys.argv[2:]))
"""


def test_party_killed_during_upload_and_restarted_completes_the_round(lalonde_2x2, tmp_path):
    party = lalonde_2x2[0][0]
    request = Message(
        "dc_representation",
        {
            "n_anchors": 200_000,
            "n_components": 3,
            "labels": True,
            "anchor_ranges": {c: [0.0, 1.0] for c in party.table.covariate_names},
        },
    )
    expected = party.handle(request)
    local = LocalStudy([party], workdir=tmp_path, tls=True, task_timeout=60)
    marker = tmp_path / "killed"
    config = str(local.configs[party.name])
    first = subprocess.Popen(
        [sys.executable, "-c", _DIE_DURING_UPLOAD, str(marker), "party", "join", "--config", config]
    )
    local.processes["first"] = first

    def restart_after_death() -> None:
        first.wait(60)
        local.start_party(party.name)

    watcher = threading.Thread(target=restart_after_death, daemon=True)
    watcher.start()
    try:
        reply = local.grid.request(party.name, request, timeout=60)
    finally:
        local.close()
    assert first.returncode == 9 and marker.read_text() == "killed during upload"
    assert np.array_equal(reply.array("a_tilde"), expected.array("a_tilde"))
    assert np.array_equal(reply.array("x_tilde"), expected.array("x_tilde"))


def test_party_process_that_dies_before_joining_fails_with_its_log(lalonde_2x2, tmp_path):
    party = lalonde_2x2[0][0]
    strict = Party(party.name, party.table, policy=PartyPolicy(["describe"], party.table.covariate_names, 10**6))
    with pytest.raises(StudyFailedError, match=r"exited with code 2 before joining: .*fewer than the minimum 1000000"):
        with local_grpc_grid([strict], workdir=tmp_path, join_timeout=60):
            pass


@pytest.mark.slow
def test_experiment_runner_over_the_grid_factory_equals_in_process(tmp_path):
    from collabcausal.simulations.datasets import load_lalonde
    from collabcausal.simulations.dcqe_experiment import ExperimentConfig, run_experiment
    from collabcausal.simulations.partition import partition_grid
    from collabcausal.simulations.settings import parse_settings

    dataset = load_lalonde()
    partition = partition_grid(dataset, 2, seed=0)
    config = ExperimentConfig(
        dataset,
        partition,
        parse_settings(["T", "W"], partition),
        estimators=("psm", "ipw"),
        n_boot=2,
        party_components=3,
    )
    expected = run_experiment(config)
    got = run_experiment(config, grid_factory=partial(local_grpc_grid, workdir=tmp_path, study=config.study))
    assert got.point == expected.point
    for key, metrics in expected.replicates.items():
        for metric, values in metrics.items():
            np.testing.assert_array_equal(got.replicates[key][metric], values)
