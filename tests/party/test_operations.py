"""The operation registry: every operation declares the request parameters it applies, and a party refuses any other
before its policy, its ledger or its table is read (docs/protocol.md, "Parameters a party does not apply")."""

from __future__ import annotations

import re

import pytest

from collabcausal.errors import InputError
from collabcausal.ledger import PrivacyLedger
from collabcausal.messages import Message
from collabcausal.party import Party
from collabcausal.party.audit import JsonlAuditLog
from collabcausal.party.operations import ALWAYS_ACCEPTED, IDEMPOTENCY_KEY, lookup, operation, registered

OPERATIONS = registered("collabcausal")


class UnreadTable:
    """A table whose every read fails the test: the refusal must come before any row (or its count) is read."""

    def __getattr__(self, name: str):
        raise AssertionError(f"the party read its table's {name} before refusing")


class SpyPolicy:
    """A policy that allows everything and records what it was asked."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def authorize(self, party, op, request) -> None:
        self.asked.append(op.name)


def test_the_registry_has_no_operation_without_a_declared_set():
    assert OPERATIONS
    for name in OPERATIONS:
        op = lookup(name)
        assert isinstance(op.parameters, frozenset) and all(isinstance(k, str) for k in op.parameters), name
        assert ALWAYS_ACCEPTED <= op.parameters, name
        assert (IDEMPOTENCY_KEY in op.parameters) == op.differentially_private, name


def test_an_operation_cannot_be_registered_without_declaring_its_parameters():
    with pytest.raises(TypeError, match="parameters"):
        operation("test_undeclared")  # type: ignore[call-arg]
    with pytest.raises(RuntimeError, match="one string"):
        operation("test_undeclared", parameters="epsilon")
    assert "test_undeclared" not in registered()


@pytest.mark.parametrize("extra", [{"epsilom": 1.0}, {"sensitivity": 1e-9}, {"noise_multiplier": 0.0, "clip": 1}])
@pytest.mark.parametrize("name", OPERATIONS)
def test_a_parameter_the_operation_does_not_apply_is_refused_first(tmp_path, name, extra):
    """A misspelling, a claimed sensitivity, a newer coordinator's options: refused in one line naming them and the
    accepted ones, with the operation's own parameters beside them, before the policy sees the request, before any
    charge and before the table is read; the audit log records the refusal."""
    op = lookup(name)
    policy = SpyPolicy()
    party = Party("p", UnreadTable(), policy=policy, audit=JsonlAuditLog(tmp_path / "audit.jsonl"),
                  ledger=PrivacyLedger(tmp_path / "ledger.sqlite", epsilon=10.0, dataset="d"))
    declared = dict.fromkeys(sorted(op.parameters - {IDEMPOTENCY_KEY}), 1.0) | {"study": "s"}
    accepted = ", ".join(sorted(op.parameters))
    with pytest.raises(InputError, match=f"^{name} request carries parameters this party does not apply: "
                                         f"{', '.join(sorted(extra))}; fix: send only {re.escape(accepted)} "):
        party.handle(Message(name, declared | extra))
    assert policy.asked == [] and party.ledger.history() == []
    refused = party.audit.entries()[-1]
    assert refused["event"] == "refused" and refused["error"]["kind"] == "InputError"
