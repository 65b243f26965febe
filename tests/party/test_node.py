"""Party.handle: what leaves the party when a differentially private operation fails unexpectedly."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from collabcausal.errors import CollabCausalError, InputError
from collabcausal.ledger import PrivacyLedger
from collabcausal.messages import Message
from collabcausal.party import Party, PartyTable
from collabcausal.party.audit import JsonlAuditLog


def _party(tmp_path) -> Party:
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"a": rng.uniform(size=50), "b": rng.uniform(size=50)})
    return Party("p", PartyTable.from_frame(frame, ["a", "b"]), audit=JsonlAuditLog(tmp_path / "audit.jsonl"),
                 ledger=PrivacyLedger(tmp_path / "l.sqlite", epsilon=10.0, dataset="d"))


def test_an_unexpected_failure_of_a_dp_operation_sends_no_message_from_the_data(tmp_path, monkeypatch):
    """Red team: a bug after the charge (a LinAlgError of the KRR on close values was one) sent its message,
    computed from the private rows and never noised, to the analyst. The party now sends the operation and
    the error class only; its audit log keeps the message."""
    party = _party(tmp_path)

    def failing(*args, **kwargs):
        raise ValueError("the 17-th row holds a = 0.4417")

    monkeypatch.setattr("collabcausal.party.dp_queries.laplace", failing)
    request = Message("dp_sum", {"study": "s", "epsilon": 1.0, "columns": ["a"],
                                 "sums": [{"column": "a", "bounds": [0, 1]}]})
    with pytest.raises(CollabCausalError) as failed:
        party.handle(request)
    assert "0.4417" not in str(failed.value) and "dp_sum failed (ValueError" in str(failed.value)
    assert "0.4417" in (tmp_path / "audit.jsonl").read_text()
    assert len(party.ledger.history()) == 1


def test_an_expected_refusal_keeps_its_one_line_message(tmp_path):
    with pytest.raises(InputError, match="no epsilon"):
        _party(tmp_path).handle(Message("dp_count", {"study": "s", "columns": []}))


def test_an_audited_dp_request_does_not_reread_the_ledgers_history(tmp_path):
    """Red team: with an audit log, every DP request read the whole charge history twice (to find its own
    charges): 3.4 ms at 120 charges, 46 ms at 3020, linear, so a coordinator sending dp_count at eps 1e-12
    (1e5 requests cost 1e-7) slowed the party quadratically. The work must not grow with the history."""
    import sqlite3

    class Counting(PrivacyLedger):
        steps = 0

        def _connect(self):
            db = super()._connect()
            db.set_progress_handler(lambda: setattr(Counting, "steps", Counting.steps + 1) or 0, 1)
            return db

    party = _party(tmp_path)
    party.ledger = Counting(tmp_path / "c.sqlite", epsilon=10.0, dataset="d")
    request = Message("dp_count", {"study": "s", "epsilon": 1e-9, "columns": []})

    def steps() -> int:
        Counting.steps = 0
        party.handle(request)
        return Counting.steps

    party.handle(request)
    few = steps()
    with sqlite3.connect(party.ledger.path) as db:
        db.executemany(
            "INSERT INTO charges (dataset, time, operation, study, epsilon, delta, partition, subset, details, "
            "spent_epsilon, spent_delta, relation) VALUES ('d', 't', 'q', 's', 0, 0, NULL, NULL, '{}', 0, 0, ?)",
            [("substitute-one",)] * 3000,
        )
    assert steps() <= few + 50
    assert [c["epsilon"] for c in party.audit.entries()[-1]["charges"]] == [1e-9]
