"""`collabcausal party audit`: verify the audit log and summarise it against the ledger."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

import collabcausal.party  # noqa: F401  (registers the operations)
from collabcausal.cli import main
from collabcausal.errors import PolicyError
from collabcausal.messages import Message
from collabcausal.party import Party, PartyTable
from collabcausal.party.audit import JsonlAuditLog
from collabcausal.party.ledger import PrivacyLedger
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
        '[privacy]\nepsilon = 5.0\nledger = "ledger.sqlite"\n[audit]\npath = "audit.jsonl"\n'
    )
    return tmp_path


def test_audit_summarises_operations_refusals_and_epsilon_against_the_ledger(folder, capsys):
    assert main(["party", "audit", "--config", str(folder / "party.toml")]) == 0
    out = capsys.readouterr().out
    assert "6 records, hash chain verified" in out
    assert "refusals: PolicyError 1" in out
    assert "epsilon charged in study s1: log 0.5, ledger 0.5" in out


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
