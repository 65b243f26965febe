"""A party's privacy ledger: its (epsilon, delta) budget per dataset, persisted and crash-safe.

Every differentially private release is charged here BEFORE it is computed. The ledger is an
SQLite file: each charge is one ``BEGIN IMMEDIATE`` transaction that re-reads the spent budget,
refuses an over-budget request without writing anything, and otherwise inserts the charge and
commits with ``synchronous=FULL`` before :meth:`PrivacyLedger.charge` returns. A process killed at
any point leaves either the whole charge or none of it (SQLite's rollback journal), and two
processes sharing the file cannot both spend the last of the budget.

Composition (see :func:`composed_cost`):

* basic composition: epsilons and deltas add across charges;
* parallel composition (McSherry 2010): charges sharing a ``(study, partition)`` key with
  different ``subset`` labels touch disjoint subjects (cells of a data-independent partition,
  disjoint sample splits), so together they cost the maximum over subsets; charges within one
  subset add. The caller declares disjointness; the key is scoped by study.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from types import MappingProxyType
from typing import Any

from collabcausal.errors import BudgetExceededError, ConfigError, InputError
from collabcausal.estimators.validation import check_delta, check_epsilon

FORMAT = "collabcausal-ledger-1"
_TOLERANCE = 1e-9

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS budgets (
    dataset TEXT PRIMARY KEY, epsilon REAL NOT NULL, delta REAL NOT NULL, updated TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS charges (
    id INTEGER PRIMARY KEY AUTOINCREMENT, dataset TEXT NOT NULL, time TEXT NOT NULL,
    operation TEXT NOT NULL, study TEXT NOT NULL, epsilon REAL NOT NULL, delta REAL NOT NULL,
    partition TEXT, subset TEXT, details TEXT NOT NULL,
    spent_epsilon REAL NOT NULL, spent_delta REAL NOT NULL);
"""


@dataclass(frozen=True)
class Charge:
    """One recorded charge.

    Attributes
    ----------
    id : int
        Sequence number in the ledger file.
    dataset, operation, study : str
    epsilon, delta : float
        The privacy cost requested by the release.
    partition, subset : str or None
        Parallel-composition labels (see module docstring).
    details : Mapping
        What the release was (columns, bounds, ...) plus local annotations (clip counts).
    time : str
        UTC ISO-8601 time of the charge.
    spent_epsilon, spent_delta : float
        The dataset's composed spending right after this charge.
    """

    id: int
    dataset: str
    operation: str
    study: str
    epsilon: float
    delta: float
    partition: str | None
    subset: str | None
    details: Mapping[str, Any] = field(default_factory=dict)
    time: str = ""
    spent_epsilon: float = 0.0
    spent_delta: float = 0.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "details", MappingProxyType(dict(self.details)))


def composed_cost(charges: Iterable[Charge]) -> tuple[float, float]:
    """Total (epsilon, delta) of ``charges``: basic composition, parallel within partitions.

    Charges with ``partition=None`` add. Charges sharing ``(study, partition)`` cost, per
    coordinate, the maximum over their subsets of the sum within each subset.
    """
    eps = delta = 0.0
    groups: dict[tuple[str, str], dict[str, list[float]]] = {}
    for c in charges:
        if c.partition is None:
            eps += c.epsilon
            delta += c.delta
        else:
            cell = groups.setdefault((c.study, c.partition), {}).setdefault(str(c.subset), [0.0, 0.0])
            cell[0] += c.epsilon
            cell[1] += c.delta
    for subsets in groups.values():
        eps += max(v[0] for v in subsets.values())
        delta += max(v[1] for v in subsets.values())
    return eps, delta


class PrivacyLedger:
    """The (epsilon, delta) budget of one party's dataset, persisted in an SQLite file.

    Parameters
    ----------
    path : str or Path
        The ledger file (created if absent; its directory must exist). One file may hold several
        datasets.
    epsilon, delta : float
        The dataset's total budget (from the party's ``[privacy]`` configuration). Stored in the
        file for ``collabcausal party budget``; the value given here is authoritative.
    dataset : str
        Which dataset of the file this ledger charges.

    Raises
    ------
    InputError
        epsilon <= 0 or delta outside [0, 1).
    ConfigError
        The file is not a collabcausal ledger, is corrupt or cannot be opened.
    """

    def __init__(self, path: str | Path, *, epsilon: float, delta: float = 0.0, dataset: str = "default") -> None:
        self.path = Path(path)
        self.epsilon = check_epsilon(epsilon, "privacy budget epsilon")
        self.delta = check_delta(delta, "privacy budget delta")
        self.dataset = str(dataset)
        if not self.path.parent.is_dir():
            raise ConfigError(f"ledger {self.path}: directory {self.path.parent} does not exist", "create it first")
        with self._transaction() as db:
            if _is_empty(db):
                for statement in _SCHEMA.split(";"):
                    db.execute(statement)
            _check_format(db, self.path)
            db.execute("INSERT OR IGNORE INTO meta VALUES ('format', ?)", (FORMAT,))
            db.execute(
                "INSERT INTO budgets VALUES (?, ?, ?, ?) ON CONFLICT(dataset) DO UPDATE SET "
                "epsilon=excluded.epsilon, delta=excluded.delta, updated=excluded.updated "
                "WHERE epsilon != excluded.epsilon OR delta != excluded.delta",
                (self.dataset, self.epsilon, self.delta, _now()),
            )

    @classmethod
    def from_file(cls, path: str | Path, dataset: str = "default") -> PrivacyLedger:
        """Open an existing ledger with the budget stored for ``dataset`` (read-only use, e.g. the CLI)."""
        p = Path(path)
        if not p.is_file():
            raise ConfigError(f"ledger {p} does not exist", "check the [privacy] ledger path")
        budgets = ledger_budgets(p)
        if dataset not in budgets:
            raise ConfigError(f"ledger {p} has no dataset {dataset!r}", f"use one of {sorted(budgets)}")
        eps, delta = budgets[dataset]
        return cls(p, epsilon=eps, delta=delta, dataset=dataset)

    def charge(
        self,
        operation: str,
        epsilon: float,
        delta: float = 0.0,
        *,
        study: str = "",
        partition: str | None = None,
        subset: str | None = None,
        details: Mapping[str, Any] | None = None,
    ) -> Charge:
        """Record a release's cost, or refuse it; call BEFORE computing the release.

        Raises
        ------
        BudgetExceededError
            The charge would take the composed spending over the budget; nothing is recorded.
        InputError
            Bad epsilon / delta, ``partition`` without ``subset`` (or the reverse), details that
            are not JSON-serialisable.
        """
        eps = check_epsilon(epsilon, f"epsilon of {operation!r}")
        dlt = check_delta(delta, f"delta of {operation!r}")
        if (partition is None) != (subset is None):
            raise InputError(
                f"charge for {operation!r} gives partition={partition!r} but subset={subset!r}",
                "give both (a disjoint subset of a partition) or neither",
            )
        try:
            text = json.dumps(dict(details or {}), sort_keys=True, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise InputError(f"details of {operation!r} are not JSON ({exc})", "pass plain values") from exc
        part = None if partition is None else str(partition)
        sub = None if subset is None else str(subset)
        with self._transaction() as db:
            history = self._read(db)
            pending = Charge(0, self.dataset, str(operation), str(study), eps, dlt, part, sub)
            spent_eps, spent_delta = composed_cost([*history, pending])
            if spent_eps > self.epsilon * (1 + _TOLERANCE) or spent_delta > self.delta * (1 + _TOLERANCE) + 1e-15:
                have_eps, have_delta = self._remaining_after(composed_cost(history))
                raise BudgetExceededError(
                    f"{operation!r} asks epsilon={eps:g}, delta={dlt:g} but dataset {self.dataset!r} has "
                    f"epsilon={have_eps:g}, delta={have_delta:g} left of ({self.epsilon:g}, {self.delta:g})",
                    "ask for less, or raise the budget in the party's [privacy] configuration",
                )
            cur = db.execute(
                "INSERT INTO charges (dataset, time, operation, study, epsilon, delta, partition, subset, "
                "details, spent_epsilon, spent_delta) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (self.dataset, _now(), str(operation), str(study), eps, dlt, part, sub, text, spent_eps, spent_delta),
            )
            charge_id = int(cur.lastrowid or 0)
        return next(c for c in self.history() if c.id == charge_id)

    def annotate(self, charge_id: int, details: Mapping[str, Any]) -> None:
        """Merge local notes (e.g. clip counts) into a recorded charge's details; never released."""
        with self._transaction() as db:
            row = db.execute(
                "SELECT details FROM charges WHERE id = ? AND dataset = ?", (int(charge_id), self.dataset)
            ).fetchone()
            if row is None:
                raise InputError(f"ledger {self.path} has no charge {charge_id} for {self.dataset!r}", "check the id")
            merged = {**json.loads(row[0]), **dict(details)}
            db.execute("UPDATE charges SET details = ? WHERE id = ?", (json.dumps(merged, sort_keys=True), charge_id))

    def spent(self) -> tuple[float, float]:
        """Composed (epsilon, delta) spent on this dataset."""
        return composed_cost(self.history())

    def remaining(self) -> tuple[float, float]:
        """(epsilon, delta) still available (never negative)."""
        return self._remaining_after(self.spent())

    def history(self) -> list[Charge]:
        """Every charge on this dataset, oldest first: the audit trail."""
        with self._transaction() as db:
            return self._read(db)

    def _remaining_after(self, spent: tuple[float, float]) -> tuple[float, float]:
        return max(self.epsilon - spent[0], 0.0), max(self.delta - spent[1], 0.0)

    def _read(self, db: sqlite3.Connection) -> list[Charge]:
        rows = db.execute(
            "SELECT id, dataset, operation, study, epsilon, delta, partition, subset, details, time, "
            "spent_epsilon, spent_delta FROM charges WHERE dataset = ? ORDER BY id",
            (self.dataset,),
        ).fetchall()
        return [Charge(*row[:8], json.loads(row[8]), *row[9:]) for row in rows]

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        try:
            db = sqlite3.connect(self.path, timeout=60.0, isolation_level=None)
        except sqlite3.Error as exc:
            raise ConfigError(f"ledger {self.path} cannot be opened ({exc})", "check the path and permissions") from exc
        try:
            db.execute("PRAGMA synchronous=FULL")
            db.execute("BEGIN IMMEDIATE")
            yield db
            db.execute("COMMIT")
        except sqlite3.Error as exc:
            raise ConfigError(
                f"ledger {self.path} is unreadable or corrupt ({exc})",
                "restore it from a backup; never delete a ledger to reset a budget",
            ) from exc
        finally:
            if db.in_transaction:
                with suppress(sqlite3.Error):
                    db.execute("ROLLBACK")
            db.close()

    def __repr__(self) -> str:
        eps, delta = self.spent()
        budget = f"spent=({eps:g}, {delta:g}) of ({self.epsilon:g}, {self.delta:g})"
        return f"PrivacyLedger({str(self.path)!r}, dataset={self.dataset!r}, {budget})"


def ledger_budgets(path: str | Path) -> dict[str, tuple[float, float]]:
    """The (epsilon, delta) budget stored for each dataset of a ledger file."""
    p = Path(path)
    try:
        db = sqlite3.connect(f"{p.resolve().as_uri()}?mode=ro", uri=True)
        try:
            _check_format(db, p)
            return {r[0]: (r[1], r[2]) for r in db.execute("SELECT dataset, epsilon, delta FROM budgets")}
        finally:
            db.close()
    except sqlite3.Error as exc:
        raise ConfigError(f"ledger {p} is unreadable or corrupt ({exc})", "restore it from a backup") from exc


def _is_empty(db: sqlite3.Connection) -> bool:
    return db.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] == 0


def _check_format(db: sqlite3.Connection, path: Path) -> None:
    tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    fmt = db.execute("SELECT value FROM meta WHERE key='format'").fetchone() if "meta" in tables else None
    if not {"meta", "budgets", "charges"} <= tables or (fmt is not None and fmt[0] != FORMAT):
        raise ConfigError(f"{path} is an SQLite file but not a collabcausal privacy ledger", "point to the ledger file")


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="microseconds")
