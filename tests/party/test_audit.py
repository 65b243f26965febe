"""Every release is appended to the party's JSONL audit log with shapes and payload digests."""

from __future__ import annotations

import hashlib

import numpy as np
import pandas as pd
import pytest

import collabcausal.party  # noqa: F401  (registers the operations)
from collabcausal.errors import ConfigError
from collabcausal.messages import Message
from collabcausal.party import Party, PartyTable
from collabcausal.party.audit import JsonlAuditLog, payload_digest


def _party(log: JsonlAuditLog) -> Party:
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"a": rng.normal(size=30), "b": rng.normal(size=30)})
    return Party("h", PartyTable.from_frame(frame, ["a", "b"]), audit=log)


def test_each_private_release_appends_one_line_with_shapes_and_digests(tmp_path):
    log = JsonlAuditLog(tmp_path / "logs" / "audit.jsonl")
    party = _party(log)
    request = Message("weighted_moments", {"study": "s1"}, {"arms": np.arange(30) % 2, "weights": np.ones(30)})
    reply = party.handle(request)
    party.handle(Message("describe"))  # public metadata: not a release of private data
    party.handle(request)
    entries = log.entries()
    assert len(entries) == 2
    entry = entries[0]
    assert entry["study"] == "s1" and entry["party"] == "h" and entry["operation"] == "weighted_moments"
    assert entry["shapes"] == {k: list(v.shape) for k, v in reply.arrays.items()}
    assert entry["sha256"] == payload_digest(reply)
    name, array = next(iter(reply.arrays.items()))
    assert entry["array_sha256"][name] == hashlib.sha256(np.ascontiguousarray(array).tobytes()).hexdigest()
    assert entry["time"].endswith("+00:00")


def test_log_is_append_only_across_instances(tmp_path):
    path = tmp_path / "audit.jsonl"
    path.write_text('{"earlier": true}\n')
    party = _party(JsonlAuditLog(path))
    party.handle(Message("weighted_moments", {}, {"arms": np.arange(30) % 2, "weights": np.ones(30)}))
    lines = path.read_text().splitlines()
    assert lines[0] == '{"earlier": true}' and len(lines) == 2


def test_payload_digest_changes_with_any_byte_and_ignores_nothing():
    base = Message("x", {"k": 1}, {"v": np.arange(3.0)})
    assert payload_digest(base) == payload_digest(Message("x", {"k": 1}, {"v": np.arange(3.0)}))
    assert payload_digest(base) != payload_digest(Message("x", {"k": 2}, {"v": np.arange(3.0)}))
    assert payload_digest(base) != payload_digest(Message("x", {"k": 1}, {"v": np.arange(3.0) + 1e-16 + 1}))
    assert payload_digest(base) != payload_digest(Message("x", {"k": 1}, {"v": np.arange(3.0).reshape(3, 1)}))


def test_unwritable_log_location_is_a_config_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(ConfigError, match="cannot write the audit log"):
        JsonlAuditLog(blocker / "audit.jsonl")
