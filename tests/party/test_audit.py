"""The party's audit log: every request, release and refusal, with digests, atomic lines and a hash chain."""

from __future__ import annotations

import hashlib
import os
import stat

import numpy as np
import pandas as pd
import pytest
from fault_injection import kill_loop

import collabcausal.party  # noqa: F401  (registers the operations)
from collabcausal.errors import ConfigError, InputError, PolicyError
from collabcausal.ledger import PrivacyLedger
from collabcausal.messages import Message
from collabcausal.party import Party, PartyTable
from collabcausal.party.audit import JsonlAuditLog, array_digest, payload_digest
from collabcausal.party.audit_head import AuditHead
from collabcausal.party.audit_verify import check_head, read_audit_log, summarise
from collabcausal.party.policy import PartyPolicy


def _party(log: JsonlAuditLog, **kwargs) -> Party:
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"a": rng.normal(size=30), "b": rng.normal(size=30), "t": np.arange(30) % 2})
    frame["y"] = rng.normal(size=30)
    return Party("h", PartyTable.from_frame(frame, ["a", "b"], treatment="t", outcome="y"), audit=log, **kwargs)


def _moments(study: str = "s1") -> Message:
    return Message("weighted_moments", {"study": study}, {"arms": np.arange(30) % 2, "weights": np.ones(30)})


def test_every_request_is_logged_on_arrival_and_on_release_with_digests_both_ways(tmp_path):
    log = JsonlAuditLog(tmp_path / "logs" / "audit.jsonl")
    party = _party(log)
    request = _moments()
    reply = party.handle(request)
    party.handle(Message("describe"))
    events = [(e["event"], e["operation"]) for e in log.entries()]
    assert events == [
        ("received", "weighted_moments"),
        ("released", "weighted_moments"),
        ("received", "describe"),
        ("released", "describe"),
    ]
    received, released = log.entries()[:2]
    assert received["study"] == released["study"] == "s1" and received["party"] == "h"
    assert received["request_sha256"] == released["request_sha256"] == payload_digest(request)
    weights = np.ascontiguousarray(request.arrays["weights"])
    assert received["arrays"]["weights"] == {
        "shape": [30],
        "dtype": "<f8",
        "sha256": hashlib.sha256(weights.tobytes()).hexdigest(),
    }
    assert released["sha256"] == payload_digest(reply)
    name, array = next(iter(reply.arrays.items()))
    assert released["arrays"][name]["sha256"] == hashlib.sha256(np.ascontiguousarray(array).tobytes()).hexdigest()
    assert released["time"].endswith("+00:00")
    assert [e["seq"] for e in log.entries()] == [1, 2, 3, 4]


def test_each_array_is_hashed_once_for_its_record_and_the_payload_digest(tmp_path, monkeypatch):
    hashed: list[int] = []

    def counted(array: np.ndarray) -> str:
        hashed.append(array.size)
        return array_digest(array)

    monkeypatch.setattr("collabcausal.party.audit.array_digest", counted)
    log = JsonlAuditLog(tmp_path / "audit.jsonl")
    reply = _party(log).handle(_moments())
    # received: arms and weights once; released: the request's payload digest (arms, weights), the reply's arrays once
    assert len(hashed) == 2 + 2 + len(reply.arrays)
    received, released = log.entries()
    assert received["request_sha256"] == released["request_sha256"] == payload_digest(_moments())
    assert released["sha256"] == payload_digest(reply)


def test_refusals_and_unknown_operations_are_logged(tmp_path):
    log = JsonlAuditLog(tmp_path / "audit.jsonl")
    party = _party(log, policy=PartyPolicy(["describe"], ["a", "b"]))
    with pytest.raises(PolicyError):
        party.handle(_moments())
    with pytest.raises(Exception, match="unknown party operation"):
        party.handle(Message("no_such_op"))
    refused = [e for e in log.entries() if e["event"] == "refused"]
    assert [(e["operation"], e["error"]["kind"]) for e in refused] == [
        ("weighted_moments", "PolicyError"),
        ("no_such_op", "ProtocolError"),
    ]
    assert "does not allow the operation" in refused[0]["error"]["problem"]
    summary = summarise(read_audit_log(log.path))
    assert summary["refusals"] == {"PolicyError": 1, "ProtocolError": 1}
    assert summary["operations"]["weighted_moments"] == {"received": 1, "released": 0, "refused": 1}


def test_dp_releases_log_their_charges_and_the_summary_matches_the_ledger(tmp_path):
    ledger = PrivacyLedger(tmp_path / "l.sqlite", epsilon=10.0, dataset="d")
    log = JsonlAuditLog(tmp_path / "audit.jsonl")
    party = _party(log, ledger=ledger)
    for study, eps in (("s1", 0.5), ("s1", 0.25), ("s2", 1.0)):
        party.handle(Message("dp_count", {"study": study, "epsilon": eps, "by_arm": True}))
    ledger.charge("local", 0.125, study="s3")  # a charge made outside the node
    summary = summarise(read_audit_log(log.path), ledger.history())
    assert summary["epsilon_by_study"] == {"s1": 0.75, "s2": 1.0}
    assert summary["ledger"]["epsilon_by_study"] == {"s1": 0.75, "s2": 1.0, "s3": 0.125}
    assert summary["ledger"]["unlogged_charges"] == [4]
    assert summary["problems"] == []
    other = PrivacyLedger(tmp_path / "other.sqlite", epsilon=10.0, dataset="d")
    other.charge("x", 0.5, study="s1")
    assert "which the ledger does not hold" in " ".join(
        summarise(read_audit_log(log.path), other.history())["problems"]
    )


def test_log_file_is_private_even_if_it_existed_world_readable(tmp_path):
    path = tmp_path / "audit.jsonl"
    path.write_text("")
    path.chmod(0o644)
    JsonlAuditLog(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    fresh = JsonlAuditLog(tmp_path / "new" / "audit.jsonl")
    assert stat.S_IMODE(fresh.path.stat().st_mode) == 0o600


def test_a_torn_tail_is_reported_then_sealed_by_the_next_writer_without_merging(tmp_path):
    log = JsonlAuditLog(tmp_path / "audit.jsonl")
    party = _party(log)
    party.handle(Message("describe"))
    with log.path.open("ab") as handle:
        handle.write(b'{"seq": 3, "event": "rece')  # a write cut off by a crash
    reading = read_audit_log(log.path)
    assert reading.tail_torn and reading.torn == [3] and len(reading.entries) == 2 and not reading.problems
    party.handle(Message("describe"))
    reading = read_audit_log(log.path)
    assert not reading.tail_torn and reading.torn == [3] and not reading.problems
    assert [e["seq"] for e in reading.entries] == [1, 2, 3, 4]


def test_a_removed_or_edited_record_breaks_the_chain(tmp_path):
    log = JsonlAuditLog(tmp_path / "audit.jsonl")
    party = _party(log)
    for _ in range(3):
        party.handle(Message("describe"))
    lines = log.path.read_text().splitlines(keepends=True)
    log.path.write_text("".join(lines[:2] + lines[3:]))
    problems = read_audit_log(log.path).problems
    assert len(problems) == 1 and problems[0].startswith("line 3: the hash chain breaks")
    lines[1] = lines[1].replace('"describe"', '"dp_count"')
    log.path.write_text("".join(lines))
    assert read_audit_log(log.path).problems[0].startswith("line 3")


def test_legacy_lines_are_counted_and_chained_after(tmp_path):
    path = tmp_path / "audit.jsonl"
    path.write_text('{"earlier": true}\n')
    _party(JsonlAuditLog(path)).handle(Message("describe"))
    reading = read_audit_log(path)
    assert reading.legacy == 1 and len(reading.entries) == 3 and not reading.problems


def test_unwritable_log_location_is_a_config_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(ConfigError, match="cannot write the audit log"):
        JsonlAuditLog(blocker / "audit.jsonl")


def test_payload_digest_changes_with_any_byte_and_ignores_nothing():
    base = Message("x", {"k": 1}, {"v": np.arange(3.0)})
    assert payload_digest(base) == payload_digest(Message("x", {"k": 1}, {"v": np.arange(3.0)}))
    assert payload_digest(base) != payload_digest(Message("x", {"k": 2}, {"v": np.arange(3.0)}))
    assert payload_digest(base) != payload_digest(Message("x", {"k": 1}, {"v": np.arange(3.0) + 1e-16 + 1}))
    assert payload_digest(base) != payload_digest(Message("x", {"k": 1}, {"v": np.arange(3.0).reshape(3, 1)}))


def test_params_nested_100000_deep_are_logged_as_such(tmp_path):
    log = JsonlAuditLog(tmp_path / "audit.jsonl")
    nested: list = []
    for _ in range(100_000):
        nested = [nested]
    with pytest.raises(InputError, match="does not apply: x;"):  # refused, and logged first
        _party(log).handle(Message("describe", {"x": nested}))
    assert log.entries()[0]["params"] == "params nested deeper than 64 levels"


def _writer(path, fd: int, head: AuditHead | None = None) -> None:
    """Log large requests forever, writing each acknowledged seq to ``fd`` (runs in a forked child)."""
    log = JsonlAuditLog(path, head=head)
    party = _party(log)
    request = Message("describe", {"pad": "x" * 300_000})  # ~300 kB lines: a kill can land inside a write
    while True:
        os.write(fd, f"{log.received(party, request)}\n".encode())


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
@pytest.mark.parametrize("kills", [6, pytest.param(60, marks=pytest.mark.slow)])
def test_sigkill_of_the_writer_never_merges_lines_nor_loses_an_acknowledged_record(tmp_path, kills):
    path = tmp_path / "audit.jsonl"

    def check(acknowledged: set[int]) -> None:
        reading = read_audit_log(path)
        assert reading.problems == []  # every complete record chains to the one before: nothing merged
        assert len(reading.torn) <= kills
        seqs = [e["seq"] for e in reading.entries]
        assert seqs == list(range(1, len(seqs) + 1)) and acknowledged <= set(seqs)

    assert len(kill_loop(lambda fd: _writer(path, fd), kills, seed=kills, check=check)) > kills


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
@pytest.mark.parametrize("kills", [6, pytest.param(60, marks=pytest.mark.slow)])
def test_sigkill_between_the_append_and_the_head_update_is_never_taken_for_truncation(tmp_path, kills):
    """The head is committed after the log's fsync: a kill leaves the log level with it or one record ahead."""
    path = tmp_path / "audit.jsonl"
    head = AuditHead.of(path, None)
    states = set()

    def check(acknowledged: set[int]) -> None:
        status, problems = check_head(read_audit_log(path), head.heads().get("h"), "the head file")
        assert problems == [], status
        states.add(status.split(" (")[0].split(":")[0])

    assert len(kill_loop(lambda fd: _writer(path, fd, head), kills, seed=kills, check=check)) > kills
    assert states <= {"matches the head file", "the log is 1 record ahead of the head file's head"}


def test_alignment_requests_are_logged_with_the_digest_of_the_order_received(tmp_path):
    # Issue 10: describe, align and refusals were not logged. align re-orders the party's rows, so
    # the order it received must be on record.
    log = JsonlAuditLog(tmp_path / "audit.jsonl")
    frame = pd.DataFrame({"id": [f"s{i}" for i in range(12)], "x": np.arange(12.0)})
    table = PartyTable.from_frame(frame, ["x"], subject_id="id")
    policy = PartyPolicy(("aligned_ids", "align"), ["x"], min_subjects=2, alignment_key=bytes(range(32)))
    party = Party("h", table, policy=policy, audit=log)
    party.handle(Message("aligned_ids"))
    order = np.array([5, 0, 7], dtype=np.int64)
    party.handle(Message("align", {}, {"order": order}))
    events = [(e["event"], e["operation"]) for e in log.entries()]
    assert events == [("received", "aligned_ids"), ("released", "aligned_ids"), ("received", "align"),
                      ("released", "align")]
    assert log.entries()[2]["arrays"]["order"]["sha256"] == hashlib.sha256(order.tobytes()).hexdigest()
