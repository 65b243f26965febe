"""A party's request state: bound to the study it joined, persisted per (dataset, study), surviving a restart."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from collabcausal.errors import PolicyError
from collabcausal.messages import Message
from collabcausal.party.config import load_party_config

PARTY_TOML = """
[party]
name = "p11"
study = "lalonde"

[analyst]
address = "127.0.0.1:50051"
insecure = true

[data]
path = "table.csv"
treatment = "t"
outcome = "y"

[policy]
columns = ["a", "b"]
operations = ["describe", "dc_representation", "weighted_moments"]
min_subjects = 5
max_representation_requests = 2

[anchor]
key_file = "anchor.key"
"""
PRIVACY = '\n[privacy]\nepsilon = 1.0\ndelta = 1e-6\nledger = "ledger.sqlite"\n'


def party_folder(folder, *, privacy: bool = False, study: str = "lalonde"):
    """A party.toml (and its table and anchor key) in ``folder``; returns the file."""
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"a": rng.normal(size=40), "b": rng.normal(size=40), "t": np.arange(40) % 2,
                          "y": rng.normal(size=40)})
    frame.to_csv(folder / "table.csv", index=False)
    (folder / "anchor.key").write_text("11" * 32 + "\n")
    path = folder / "party.toml"
    path.write_text(PARTY_TOML.replace('study = "lalonde"', f'study = "{study}"') + (PRIVACY if privacy else ""))
    return path


def representation(study: str = "lalonde") -> Message:
    return Message("dc_representation", {"study": study, "n_anchors": 50, "n_components": 1,
                                         "anchor_ranges": {"a": [-4, 4], "b": [-4, 4]}})


def moments(weights, study: str = "lalonde") -> Message:
    return Message("weighted_moments", {"study": study}, {"arms": np.arange(40) % 2, "weights": np.asarray(weights)})


def test_a_request_naming_another_study_is_refused_in_one_line_and_audited(tmp_path):
    config = load_party_config(party_folder(tmp_path))
    party = config.build_party()
    assert party.study == "lalonde"
    with pytest.raises(PolicyError) as caught:
        party.handle(representation("other"))
    message = str(caught.value)
    assert message.startswith("request names study 'other' but party p11 joined study 'lalonde'; fix: ")
    assert "\n" not in message
    entries = [json.loads(line) for line in config.audit_path.read_text().splitlines()]
    assert entries[-1]["event"] == "refused" and "names study 'other'" in json.dumps(entries[-1])
    assert party.handle(representation()).arrays["x_tilde"].shape == (40, 1)


@pytest.mark.parametrize("privacy", [False, True], ids=["state-beside-audit", "state-in-ledger"])
def test_the_representation_limit_survives_a_restart_and_a_renamed_study(tmp_path, privacy):
    path = party_folder(tmp_path, privacy=privacy)
    for _ in range(2):
        load_party_config(path).build_party().handle(representation())  # a restart before each request
    party = load_party_config(path).build_party()
    with pytest.raises(PolicyError, match="answered 2 representation requests in study 'lalonde', its limit"):
        party.handle(representation())
    with pytest.raises(PolicyError, match="names study 'other'"):
        party.handle(representation("other"))
    state = tmp_path / ("ledger.sqlite" if privacy else "audit.jsonl.state.sqlite")
    assert state.exists()


def test_the_differencing_history_survives_a_restart(tmp_path):
    path = party_folder(tmp_path)
    load_party_config(path).build_party().handle(moments(np.ones(40)))
    without_one = np.ones(40)
    without_one[0] = 0.0
    with pytest.raises(PolicyError, match="differs from request 1 scaled on only 1 subjects"):
        load_party_config(path).build_party().handle(moments(without_one))


def test_a_party_that_joined_another_study_starts_its_own_count(tmp_path):
    path = party_folder(tmp_path)
    for _ in range(2):
        load_party_config(path).build_party().handle(representation())
    path.write_text(path.read_text().replace('study = "lalonde"', 'study = "lalonde-2"'))
    assert load_party_config(path).build_party().handle(representation("lalonde-2")).operation == "dc_representation"



def _launched_party(tmp_path):
    """One party as a `party join` process on loopback (as in tests/protocol), study "lalonde", limit 2."""
    from collabcausal.anchor_key import simulation_anchor_key
    from collabcausal.party.node import Party
    from collabcausal.party.policy import PartyPolicy
    from collabcausal.party.table import PartyTable
    from collabcausal.protocol.launcher import LocalStudy

    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"a": rng.normal(size=40), "b": rng.normal(size=40)})
    policy = PartyPolicy(["dc_representation"], ["a", "b"], 5, max_representation_requests=2)
    party = Party("p11", PartyTable.from_frame(frame, ["a", "b"]), policy=policy, anchor_key=simulation_anchor_key(0))
    local = LocalStudy([party], workdir=tmp_path, tls=False, study="lalonde", task_timeout=60)
    local.start_party("p11")
    local.wait_joined(60)
    return local


def test_over_grpc_a_request_naming_another_study_is_refused(tmp_path):
    local = _launched_party(tmp_path)
    try:
        with pytest.raises(PolicyError, match="request names study 'other' but party p11 joined study 'lalonde'"):
            local.grid.request("p11", representation("other"), timeout=60)
        assert local.grid.request("p11", representation(), timeout=60).operation == "dc_representation"
    finally:
        local.close()
    refused = [json.loads(line) for line in (tmp_path / "p11" / "audit.jsonl").read_text().splitlines()]
    assert [e["error"]["kind"] for e in refused if e["event"] == "refused"] == ["PolicyError"]


@pytest.mark.slow
def test_over_grpc_the_limit_survives_a_restarted_party_process(tmp_path):
    """Two party process starts (about 15 s on a shared machine): slow."""
    local = _launched_party(tmp_path)
    try:
        local.grid.request("p11", representation(), timeout=60)
        local.processes["p11"].kill()  # the party restarts: a new process, the same state file
        local.processes["p11"].wait(10)
        local.start_party("p11")
        local.grid.request("p11", representation(), timeout=60)
        with pytest.raises(PolicyError, match="answered 2 representation requests in study 'lalonde', its limit"):
            local.grid.request("p11", representation(), timeout=60)
    finally:
        local.close()
    assert (tmp_path / "p11" / "audit.jsonl.state.sqlite").is_file()


def test_a_party_with_its_state_in_memory_pickles_with_its_counts():
    """Simulations send parties to bootstrap worker processes (joblib): the state travels with them."""
    import pickle

    from collabcausal.party.request_state import RequestState

    state = RequestState(dataset="d")
    state.count_representation("party 'h'", "s", 2, label="in study 's'")
    with state.weighted_history("s", 4) as history:
        history.admit("party 'h'", "weighted_moments", (np.ones(20), np.ones(20)), min_subjects=5,
                      min_weight_ratio=0.01)
    copy = pickle.loads(pickle.dumps(state))
    assert copy.weighted_count("s") == 1 and copy.dataset == "d"
    copy.count_representation("party 'h'", "s", 2, label="in study 's'")
    with pytest.raises(PolicyError, match="answered 2 representation requests in study 's', its limit"):
        copy.count_representation("party 'h'", "s", 2, label="in study 's'")
