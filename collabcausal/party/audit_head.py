"""The audit log's chain head, kept where the log cannot be cut with it.

The hash chain of :mod:`collabcausal.party.audit` shows a record removed, edited or reordered,
but not a cut tail: a prefix of a valid chain is a valid chain. So after each append the party
stores the *head*, the last record's ``seq`` and SHA-256, in an SQLite file apart from the log:
its privacy ledger when it has one (``[privacy]``; table ``audit_head``), else
``<audit log>.head.sqlite`` beside the log, a file the party owns. ``collabcausal party audit``
compares the log with the head (:func:`collabcausal.party.audit_verify.check_head`).

Order, and what a crash leaves: the record is appended to the log and fsynced first, then the
head is updated in one SQLite transaction committed with ``synchronous=FULL``, both under the
log's lock. A crash between the two leaves the log exactly one record ahead of the head, which
verification reports as that (not as tampering). The other order would let a crash leave the head
ahead of the log, which looks exactly like a truncation.

Each record names where its head is kept (``head``: ``"ledger"`` or ``"beside"``), so a head
store deleted or replaced by an empty one is a problem, not a silently skipped check. What an
attacker who can write both files can still do: docs/threat-model.md.
"""

from __future__ import annotations

import os
import sqlite3
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from collabcausal.sqlite_transaction import connect, transaction

_TABLE = (
    "CREATE TABLE IF NOT EXISTS audit_head ("
    "party TEXT PRIMARY KEY, seq INTEGER NOT NULL, sha256 TEXT NOT NULL, time TEXT NOT NULL)"
)
LEDGER, BESIDE = "ledger", "beside"


@dataclass(frozen=True)
class AuditHead:
    """Where one party's audit-log head is kept.

    Attributes
    ----------
    path : Path
        The SQLite file (the party's ledger, or ``<audit log>.head.sqlite``).
    kind : str
        :data:`LEDGER` or :data:`BESIDE`, recorded in every log record.
    """

    path: Path
    kind: str

    @classmethod
    def of(cls, audit_log: str | Path, ledger: str | Path | None) -> AuditHead:
        """The head store of a party: its ledger if it has one, else a file beside the audit log."""
        if ledger is not None:
            return cls(Path(ledger), LEDGER)
        log = Path(audit_log)
        return cls(log.with_name(log.name + ".head.sqlite"), BESIDE)

    def record(self, party: str, seq: int, sha256: str) -> None:
        """Store ``(seq, sha256)`` as ``party``'s head, committed to disk before returning."""
        if not self.path.exists():  # a new head file is the party's alone, like the log (0600)
            os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o600))
        with self._transaction(write=True) as db:
            db.execute(_TABLE)
            db.execute(
                "INSERT INTO audit_head VALUES (?, ?, ?, ?) ON CONFLICT(party) DO UPDATE SET "
                "seq=excluded.seq, sha256=excluded.sha256, time=excluded.time",
                (party, int(seq), sha256, datetime.now(timezone.utc).isoformat(timespec="milliseconds")),
            )

    def heads(self) -> dict[str, tuple[int, str]]:
        """Every party's ``(seq, sha256)``; empty when the file or the table does not exist."""
        if not self.path.is_file():
            return {}
        with self._transaction(write=False) as db:
            if db.execute("SELECT 1 FROM sqlite_master WHERE name = 'audit_head'").fetchone() is None:
                return {}
            return {p: (int(s), h) for p, s, h in db.execute("SELECT party, seq, sha256 FROM audit_head")}

    def _transaction(self, *, write: bool) -> AbstractContextManager[sqlite3.Connection]:
        return transaction(
            lambda: connect(self.path),
            f"audit head store {self.path}",
            open_fix="check its permissions",
            corrupt_fix="restore it from a backup",
            write=write,
        )
