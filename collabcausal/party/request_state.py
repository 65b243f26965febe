"""What a party remembers of the requests it answered, per (dataset, study), across restarts.

Two of a party's rules count past requests (:mod:`collabcausal.party.policy`): at most
``max_representation_requests`` representations per study, and the differencing history of
exact weighted requests (:mod:`collabcausal.party.differencing`). Kept in memory, both reset when
the party restarts, and keyed by the study a request *names*, both reset when the analyst renames
the study. So both are kept here, in SQLite:

* a party with ``[privacy]`` keeps them in its ledger file, beside the ledger's tables;
* a party without it keeps them in ``<audit log>.state.sqlite`` beside its audit log
  (``audit.jsonl`` -> ``audit.jsonl.state.sqlite``, like the audit head's ``.head.sqlite``);
* a :class:`~collabcausal.party.node.Party` built in code (simulations, tests) keeps them in
  memory, for the life of the object.

The key is (dataset, study): the dataset is the ledger's (without one, the data source: file path or URL), the study the
one the party joined (``[party] study``; :meth:`collabcausal.party.node.Party.handle` refuses a
request naming another). A party that joined no study by name keys every request under the one
study ``""``: renaming the study then cannot reset its count either.

Each update is one ``BEGIN IMMEDIATE`` transaction: two processes sharing the file cannot both
take the last request of a limit.
"""

from __future__ import annotations

import io
import os
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from collabcausal.errors import PolicyError
from collabcausal.party.differencing import WeightedRequestHistory
from collabcausal.sqlite_transaction import connect, transaction

_TABLES = ("representation_requests", "weighted_requests")
_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS representation_requests ("
    " dataset TEXT NOT NULL, study TEXT NOT NULL, answered INTEGER NOT NULL, PRIMARY KEY (dataset, study))",
    "CREATE TABLE IF NOT EXISTS weighted_requests ("
    " dataset TEXT NOT NULL, study TEXT NOT NULL, number INTEGER NOT NULL, weights BLOB NOT NULL,"
    " PRIMARY KEY (dataset, study, number))",
)


class RequestState:
    """A party's persisted request counts and weighted-request history (see the module docstring).

    Parameters
    ----------
    path : str or Path, optional
        The SQLite file (the party's ledger, or its state file); ``None`` keeps the state in memory.
    dataset : str
        The dataset the requests are about (the ledger's dataset name).
    """

    def __init__(self, path: str | Path | None = None, dataset: str = "default") -> None:
        self.path = None if path is None else Path(path)
        self.dataset = dataset
        self._lock = threading.Lock()
        self._memory = None
        if self.path is None:
            self._memory = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
        elif not self.path.exists():  # a new state file is the party's alone, like its audit log (0600)
            with suppress(OSError):
                os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o600))
        with self._transaction() as db:
            for statement in _SCHEMA:
                db.execute(statement)

    @classmethod
    def of(cls, audit_log: str | Path, ledger: str | Path | None, dataset: str) -> RequestState:
        """The state of a configured party: in its ledger if it has one, else beside its audit log."""
        if ledger is not None:
            return cls(ledger, dataset)
        log = Path(audit_log)
        return cls(log.with_name(log.name + ".state.sqlite"), dataset)

    def count_representation(self, who: str, study: str, limit: int, *, label: str) -> None:
        """Count one representation request of ``study``; refuse it (nothing counted) at ``limit``.

        ``label`` names the study in the refusal (e.g. ``"in study 'lalonde'"``).
        """
        with self._transaction() as db:
            row = db.execute(
                "SELECT answered FROM representation_requests WHERE dataset = ? AND study = ?", (self.dataset, study)
            ).fetchone()
            answered = 0 if row is None else int(row[0])
            if answered >= limit:
                raise PolicyError(
                    f"{who} has answered {answered} representation requests {label}, its limit",
                    "use fewer bootstrap replicates, or ask the party to raise max_representation_requests",
                )
            db.execute(
                "INSERT OR REPLACE INTO representation_requests VALUES (?, ?, ?)", (self.dataset, study, answered + 1)
            )

    def weighted_count(self, study: str) -> int:
        """Weighted requests answered in ``study``."""
        with self._transaction() as db:
            row = db.execute(
                "SELECT count(*) FROM weighted_requests WHERE dataset = ? AND study = ?", (self.dataset, study)
            ).fetchone()
        return int(row[0])

    @contextmanager
    def weighted_history(self, study: str, max_requests: int) -> Iterator[WeightedRequestHistory]:
        """The differencing history of ``study``; what the block admits is stored when it returns.

        Read, checked and extended in one transaction; a refusal inside the block stores nothing.
        """
        with self._transaction() as db:
            rows = db.execute(
                "SELECT weights FROM weighted_requests WHERE dataset = ? AND study = ? ORDER BY number",
                (self.dataset, study),
            ).fetchall()
            answered = [_decode(blob) for (blob,) in rows]
            history = WeightedRequestHistory(max_requests, answered)
            yield history
            for number, totals in enumerate(history.answered[len(answered) :], start=len(answered)):
                db.execute(
                    "INSERT INTO weighted_requests VALUES (?, ?, ?, ?)", (self.dataset, study, number, _encode(totals))
                )

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        memory = self._memory
        with self._lock, transaction(
            (lambda: memory) if memory is not None else (lambda: connect(self.path)),
            f"party state {self.path}",
            open_fix="check its path",
            corrupt_fix="restore it from a backup; never delete it to reset the party's request limits",
            durable=False,
            close=memory is None,
        ) as db:
            yield db

    def __getstate__(self) -> dict:
        """For pickling (a simulation's parties go to bootstrap worker processes): the file, or the rows.

        A state in memory travels as its rows; the copy is the worker's own, as the party is.
        """
        rows = None
        if self.path is None:
            with self._transaction() as db:
                rows = tuple(db.execute(f"SELECT * FROM {table}").fetchall() for table in _TABLES)
        return {"path": self.path, "dataset": self.dataset, "rows": rows}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["path"], state["dataset"])  # type: ignore[misc]
        if state["rows"] is not None:
            with self._transaction() as db:
                for table, rows in zip(_TABLES, state["rows"], strict=True):
                    for row in rows:
                        db.execute(f"INSERT INTO {table} VALUES ({', '.join('?' * len(row))})", row)

    def __repr__(self) -> str:
        return f"RequestState({'memory' if self.path is None else str(self.path)!r}, dataset={self.dataset!r})"


def _encode(totals: tuple[NDArray[np.float64], NDArray[np.float64]]) -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, arm0=np.asarray(totals[0], dtype=np.float64), arm1=np.asarray(totals[1], dtype=np.float64))
    return buffer.getvalue()


def _decode(blob: bytes) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    with np.load(io.BytesIO(blob), allow_pickle=False) as arrays:
        return arrays["arm0"], arrays["arm1"]
