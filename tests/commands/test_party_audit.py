"""`collabcausal party audit`: verify the audit log and summarise it against the ledger."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

import collabcausal.party  # noqa: F401  (registers the operations)
from collabcausal.cli import main
from collabcausal.errors import PolicyError
from collabcausal.ledger import PrivacyLedger
from collabcausal.messages import Message
from collabcausal.party import Party, PartyTable
from collabcausal.party.audit import JsonlAuditLog
from collabcausal.party.policy import PartyPolicy


@pytest.fixture()
def folder(tmp_path):
    frame = pd.DataFrame({"a": np.arange(40.0), "t": np.arange(40) % 2, "y": np.ones(40)})
    ledger = PrivacyLedger(tmp_path / "ledger.sqlite", epsilon=5.0, dataset="default")
    party = Party(
        "h",
        PartyTable.from_frame(frame, ["a"], treatment="t", outcome="y"),
        policy=PartyPolicy(["describe", "dp_count"], ["a"]),
        ledger=ledger,
        audit=JsonlAuditLog(tmp_path / "audit.jsonl"),
    )
    party.handle(Message("describe"))
    party.handle(Message("dp_count", {"study": "s1", "epsilon": 0.5}))
    with pytest.raises(PolicyError):
        party.handle(Message("weighted_moments", {"study": "s1"}))
    (tmp_path / "party.toml").write_text(
        '[policy]\ncolumns = ["a"]\noperations = ["describe", "dp_count"]\n'
        '[privacy]\nepsilon = 5.0\nledger = "ledger.sqlite"\n[audit]\npath = "audit.jsonl"\n'
    )
    return tmp_path


def test_audit_summarises_operations_refusals_and_epsilon_against_the_ledger(folder, capsys):
    assert main(["party", "audit", "--config", str(folder / "party.toml")]) == 0
    out = capsys.readouterr().out
    assert "6 records, hash chain verified" in out
    assert "refusals: PolicyError 1" in out
    assert "epsilon charged in study s1: log 0.5, ledger 0.5" in out
    assert "effective guarantee: (5, 0)-DP under substitution of one record" in out


def test_audit_json_and_file(folder, capsys):
    assert main(["party", "audit", "--file", str(folder / "audit.jsonl"), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["operations"]["dp_count"] == {"received": 1, "released": 1, "refused": 0}
    assert summary["ledger"] is None


def test_a_broken_chain_exits_2_with_one_line(folder, capsys):
    path = folder / "audit.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(lines[:1] + lines[2:]))
    assert main(["party", "audit", "--file", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert "fails verification: line 2: the hash chain breaks" in err and "\n" not in err


def test_a_torn_tail_is_reported_not_fatal(folder, capsys):
    with (folder / "audit.jsonl").open("ab") as handle:
        handle.write(b'{"seq": 7, "ev')
    assert main(["party", "audit", "--file", str(folder / "audit.jsonl")]) == 0
    assert "torn lines (a write cut off by a crash, never merged with a record): 7" in capsys.readouterr().out


def _configured_party(tmp_path, privacy: bool):
    """A party built from party.toml as `party join` builds it: its log keeps its chain head."""
    from collabcausal.party.config import load_party_config

    rng = np.random.default_rng(0)
    pd.DataFrame({"a": rng.normal(size=40), "b": rng.normal(size=40)}).to_csv(tmp_path / "d.csv", index=False)
    text = (
        '[party]\nname = "p11"\n[analyst]\naddress = "127.0.0.1:1"\ninsecure = true\n'
        '[data]\npath = "d.csv"\n[policy]\ncolumns = ["a", "b"]\noperations = ["describe"]\nmin_subjects = 10\n'
    )
    if privacy:
        text += '[privacy]\nepsilon = 1.0\nledger = "ledger.sqlite"\n'
    (tmp_path / "party.toml").write_text(text)
    return load_party_config(tmp_path / "party.toml").build_party()


@pytest.mark.parametrize("privacy", [True, False], ids=["head in the ledger", "head beside the log"])
def test_a_cut_tail_is_reported_as_truncation(tmp_path, capsys, privacy):
    """`party audit` said "hash chain verified" for a log cut from 104 to 30 records."""
    party = _configured_party(tmp_path, privacy)
    for _ in range(52):
        party.handle(Message("describe", {"study": "s"}))
    assert main(["party", "audit", "--config", str(tmp_path / "party.toml")]) == 0
    assert "chain head: matches" in capsys.readouterr().out
    log = tmp_path / "audit.jsonl"
    records = log.read_text().splitlines(keepends=True)
    assert len(records) == 1 + 2 * 52  # data_loaded, then request and reply per describe
    log.write_text("".join(records[:30]))
    assert main(["party", "audit", "--config", str(tmp_path / "party.toml")]) == 2
    captured = capsys.readouterr()
    where = "the ledger" if privacy else f"the head file {tmp_path / 'audit.jsonl.head.sqlite'}"
    assert f"audit log has 30 records, {where}'s head says 105: the log was truncated or replaced" in captured.err
    assert "hash chain verified" not in captured.out
    assert (tmp_path / "ledger.sqlite").exists() == privacy


def test_a_crash_between_the_append_and_the_head_update_is_one_record_ahead_not_tampering(
    tmp_path, capsys, monkeypatch
):
    from collabcausal.party.audit_head import AuditHead

    party = _configured_party(tmp_path, privacy=True)
    party.handle(Message("describe", {"study": "s"}))
    head = AuditHead.of(tmp_path / "audit.jsonl", tmp_path / "ledger.sqlite")
    before = head.heads()["p11"]

    def crash(*args, **kwargs):
        raise KeyboardInterrupt  # the process dies after the log's fsync, before the head's commit

    with monkeypatch.context() as patch:
        patch.setattr(AuditHead, "record", crash)
        with pytest.raises(KeyboardInterrupt):
            party.handle(Message("describe", {"study": "s"}))
    assert head.heads()["p11"] == before
    assert main(["party", "audit", "--config", str(tmp_path / "party.toml")]) == 0
    assert "the log is 1 record ahead of the ledger's head: a crash between its append" in capsys.readouterr().out


def test_a_replaced_log_and_a_deleted_head_store_are_problems(tmp_path, capsys):
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        party = _configured_party(tmp_path / folder, privacy=False)
        for _ in range(3):
            party.handle(Message("describe", {"study": "s"}))
    config = str(tmp_path / "a" / "party.toml")
    (tmp_path / "a" / "audit.jsonl").write_bytes((tmp_path / "b" / "audit.jsonl").read_bytes())  # valid, not its own
    assert main(["party", "audit", "--config", config]) == 2
    assert "record 7 is not the one the head file" in capsys.readouterr().err
    (tmp_path / "a" / "audit.jsonl.head.sqlite").unlink()
    assert main(["party", "audit", "--config", config]) == 2
    assert "holds none for this party: the head store was deleted or replaced" in capsys.readouterr().err


def test_a_log_of_a_party_with_a_ledger_checked_by_file_alone_points_to_the_ledger(tmp_path, capsys):
    party = _configured_party(tmp_path, privacy=True)
    party.handle(Message("describe", {"study": "s"}))
    assert main(["party", "audit", "--file", str(tmp_path / "audit.jsonl")]) == 0
    assert "kept in the party's ledger: give --ledger" in capsys.readouterr().out
    argv = ["party", "audit", "--file", str(tmp_path / "audit.jsonl"), "--ledger", str(tmp_path / "ledger.sqlite")]
    assert main(argv) == 0
    assert "chain head: matches the ledger (3 records)" in capsys.readouterr().out
