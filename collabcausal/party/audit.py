"""A party's audit log: every release appended to a JSONL file before it leaves.

One line per release (operations marked ``private_data``), written by
:meth:`collabcausal.party.node.Party.handle` through :meth:`JsonlAuditLog.record`: UTC time,
study, party, operation, the request's parameters, the reply's array shapes and dtypes, and a
SHA-256 of the reply payload (:func:`payload_digest`) plus one per array (the same digest the wire
protocol checks, so a capture can be matched to the log). The file is opened in append mode for
each record and flushed to disk (``fsync``) before the reply is released; nothing rewrites it.
"""

from __future__ import annotations

import hashlib
import json
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from collabcausal.errors import ConfigError
from collabcausal.messages import Message
from collabcausal.party.operations import Operation

if TYPE_CHECKING:
    from collabcausal.party.node import Party


def array_digest(array: np.ndarray) -> str:
    """Hex SHA-256 of an array's bytes in C order."""
    return hashlib.sha256(np.require(array, requirements="C").reshape(-1).view(np.uint8)).hexdigest()


def payload_digest(message: Message) -> str:
    """Hex SHA-256 of a message's payload: its params as canonical JSON, then each array.

    Each array contributes its name, dtype, shape and bytes, in name order.
    """
    digest = hashlib.sha256(json.dumps(dict(message.params), sort_keys=True, default=str).encode())
    for name in sorted(message.arrays):
        array = np.asarray(message.arrays[name])
        digest.update(f"\n{name}:{array.dtype.str}:{array.shape}\n".encode())
        digest.update(bytes.fromhex(array_digest(array)))
    return digest.hexdigest()


class JsonlAuditLog:
    """Append-only JSONL audit log.

    Parameters
    ----------
    path : path
        The log file (created with its folder if absent).
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.path.touch(exist_ok=True)
        except OSError as exc:
            raise ConfigError(f"cannot write the audit log {self.path} ({exc.strerror})", "fix [audit] path") from None

    def record(self, party: Party, op: Operation, request: Message, reply: Message) -> None:
        """Append one release (called before the reply leaves the party)."""
        entry = {
            "time": datetime.now(timezone.utc).isoformat(timespec="milliseconds"),
            "study": str(request.params.get("study", "")),
            "party": party.name,
            "operation": op.name,
            "params": dict(request.params),
            "shapes": {name: list(np.shape(a)) for name, a in reply.arrays.items()},
            "dtypes": {name: np.asarray(a).dtype.str for name, a in reply.arrays.items()},
            "array_sha256": {name: array_digest(np.asarray(a)) for name, a in reply.arrays.items()},
            "sha256": payload_digest(reply),
            "differentially_private": op.differentially_private,
        }
        line = json.dumps(entry, sort_keys=True, default=str) + "\n"
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, line.encode())
            os.fsync(fd)
        finally:
            os.close(fd)

    def entries(self) -> list[dict]:
        """Every record, oldest first."""
        with self.path.open() as handle:
            return [json.loads(line) for line in handle if line.strip()]
