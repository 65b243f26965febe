"""A privacy ledger: the (epsilon, delta) budget of a data holder per dataset, persisted and crash-safe.

Whoever computes a differentially private release from rows it holds keeps one: each party for its
table (``[privacy]`` of party.toml, charged by :meth:`~collabcausal.party.node.Party.handle`), the
analyst for the releases it computes from its own table of the collaborative representation
(``[cate] ledger`` of study.toml), ``collabcausal discover --data`` for a local data file. Each owns
its file; nobody reads another's. Every differentially private release is charged here BEFORE it is
computed. The ledger is an
SQLite file: each charge is one ``BEGIN IMMEDIATE`` transaction that reads the running totals,
refuses an over-budget request without writing anything, and otherwise records the charge and
updates the totals, committing with ``synchronous=FULL`` before :meth:`PrivacyLedger.charge`
returns. A process killed at any point leaves either the whole charge or none of it (SQLite's
rollback journal), and two processes sharing the file cannot both spend the last of the budget.

One neighbouring relation (docs/differential-privacy.md): every charge names the relation its
epsilon is proved for, and a ledger file holds exactly one, :data:`SUBSTITUTION` (bounded DP:
datasets of the same public size n differing in one record). A charge under any other relation is
refused, so epsilons proved under different relations are never added.

Composition (running totals, O(1) per charge; :func:`composed_cost` is the definition):

* basic composition: epsilons and deltas add across charges;
* zCDP charges (:meth:`PrivacyLedger.charge_zcdp`, Gaussian releases): a ``rho``-zCDP release
  with its share ``delta_k`` of delta. zCDP composes by adding rho (Bun & Steinke 2016, Lemma 2.3),
  so all zCDP charges of a dataset together cost ``(zcdp_epsilon(sum rho, sum delta_k),
  sum delta_k)`` (OpenDP's conversion), which basic composition then adds to the other charges.
  This holds for any interleaving of the two kinds (Bun & Steinke 2016, section 8, approximate
  zCDP: an (eps, delta)-DP release is delta-approximately (eps, 0)-zCDP, i.e. D_alpha <= eps on
  events of probability 1 - delta; approximate zCDP composes adaptively by adding xi, rho and
  delta; and D_alpha <= xi + rho alpha converts to (xi + zcdp_epsilon(rho, d), d + sum delta));
* parallel composition (McSherry 2010): charges sharing a ``(study, partition)`` key with
  different ``subset`` labels touch disjoint subjects, so together they cost the maximum over
  subsets; charges within one subset add. The caller declares disjointness; the key is scoped by
  study. Under substitution the subsets must be defined by position (sample splits drawn
  independently of the values, n public): a substituted record then stays in its subset. Cells
  defined by values are NOT such subsets (the record can move from one cell to another, changing
  two releases): release them as one histogram with its substitution sensitivity instead.

Idempotency: inside :meth:`PrivacyLedger.request`, charges carry the request's idempotency key;
:meth:`PrivacyLedger.record_outcome` stores the reply (or the error) of the charged request, and
:meth:`PrivacyLedger.recorded_outcome` returns it to a retry, which is then answered without a
new charge and with the very same numbers.
"""

from __future__ import annotations

import io
import json
import os
import sqlite3
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np

from collabcausal.errors import BudgetExceededError, ConfigError, InputError, ProtocolError
from collabcausal.estimators.dp.zcdp import check_rho, zcdp_epsilon
from collabcausal.estimators.validation import check_delta, check_epsilon
from collabcausal.sqlite_transaction import connect, transaction

FORMAT = "collabcausal-ledger-2"
OLD_FORMATS = ("collabcausal-ledger-1",)
SUBSTITUTION = "substitute-one"
"""Bounded DP: neighbouring datasets have the same public size n and differ in one record."""
ADD_REMOVE = "add-remove-one"
"""Unbounded DP: neighbouring datasets differ by adding or removing one record (not used)."""
RELATION = SUBSTITUTION
"""The project's one neighbouring relation; every ledger holds it."""
_TOLERANCE = 1e-9
_NO_KEY = ""  # partition / subset of a sequential charge in the totals tables

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS budgets (
    dataset TEXT PRIMARY KEY, epsilon REAL NOT NULL, delta REAL NOT NULL, updated TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS charges (
    id INTEGER PRIMARY KEY AUTOINCREMENT, dataset TEXT NOT NULL, time TEXT NOT NULL,
    operation TEXT NOT NULL, study TEXT NOT NULL, epsilon REAL NOT NULL, delta REAL NOT NULL,
    partition TEXT, subset TEXT, details TEXT NOT NULL,
    spent_epsilon REAL NOT NULL, spent_delta REAL NOT NULL, relation TEXT NOT NULL, request_id TEXT, rho REAL);
CREATE TABLE IF NOT EXISTS spent (
    dataset TEXT PRIMARY KEY, epsilon REAL NOT NULL, delta REAL NOT NULL);
CREATE TABLE IF NOT EXISTS subset_totals (
    dataset TEXT NOT NULL, study TEXT NOT NULL, partition TEXT NOT NULL, subset TEXT NOT NULL,
    epsilon REAL NOT NULL, delta REAL NOT NULL, PRIMARY KEY (dataset, study, partition, subset));
CREATE TABLE IF NOT EXISTS partition_totals (
    dataset TEXT NOT NULL, study TEXT NOT NULL, partition TEXT NOT NULL,
    epsilon REAL NOT NULL, delta REAL NOT NULL, PRIMARY KEY (dataset, study, partition));
CREATE TABLE IF NOT EXISTS requests (
    dataset TEXT NOT NULL, request_id TEXT NOT NULL, token TEXT NOT NULL, fingerprint TEXT NOT NULL,
    outcome BLOB, PRIMARY KEY (dataset, request_id));
"""

_REQUEST: ContextVar[tuple[str, str, str] | None] = ContextVar("collabcausal_ledger_request", default=None)


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
    relation : str
        The neighbouring relation the release's epsilon is proved for (:data:`RELATION`).
    request_id : str or None
        The idempotency key of the request that made the charge.
    rho : float or None
        For a zCDP charge (:meth:`PrivacyLedger.charge_zcdp`), the release's rho; ``epsilon`` is then
        what the release alone would cost at ``delta`` (it composes through rho, not epsilon).
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
    relation: str = RELATION
    request_id: str | None = None
    rho: float | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "details", MappingProxyType(dict(self.details)))


def composed_cost(charges: Iterable[Charge]) -> tuple[float, float]:
    """Total (epsilon, delta) of ``charges``: basic composition, parallel within partitions, zCDP.

    Charges with ``partition=None`` add. Charges sharing ``(study, partition)`` cost, per
    coordinate, the maximum over their subsets of the sum within each subset. zCDP charges add
    their rho and delta, and the sum is converted once (module docstring). This is the definition
    the ledger's running totals implement; it serves audits and migration.
    """
    charges = list(charges)
    eps = delta = 0.0
    groups: dict[tuple[str, str], dict[str, list[float]]] = {}
    for c in charges:
        if c.rho is not None:
            continue
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
    rho, zcdp_delta = _zcdp_sums(charges)
    if rho > 0.0:
        eps += zcdp_epsilon(rho, zcdp_delta)
        delta += zcdp_delta
    return eps, delta


def _zcdp_sums(charges: list[Charge]) -> tuple[float, float]:
    """Summed rho and delta of the zCDP charges among ``charges``."""
    zcdp = [c for c in charges if c.rho is not None]
    return sum(c.rho or 0.0 for c in zcdp), sum(c.delta for c in zcdp)


class PrivacyLedger:
    """The (epsilon, delta) budget of one dataset (a party's table, the analyst's rows of X^), in an SQLite file.

    Parameters
    ----------
    path : str or Path
        The ledger file (created if absent; its directory must exist). One file may hold several
        datasets.
    epsilon, delta : float
        The dataset's total budget (a party's ``[privacy]`` configuration, a study's ``[cate]``). Stored in the
        file for ``collabcausal party budget``; the value given here is authoritative.
    dataset : str
        Which dataset of the file this ledger charges.

    Raises
    ------
    InputError
        epsilon <= 0 or delta outside [0, 1).
    ConfigError
        The file is not a collabcausal ledger, is corrupt, cannot be opened, or is in an old
        format (:func:`migrate_ledger` converts it).
    """

    relation = RELATION

    def __init__(self, path: str | Path, *, epsilon: float, delta: float = 0.0, dataset: str = "default") -> None:
        self.path = Path(path)
        self.epsilon = check_epsilon(epsilon, "privacy budget epsilon")
        self.delta = check_delta(delta, "privacy budget delta")
        self.dataset = str(dataset)
        if not self.path.parent.is_dir():
            raise ConfigError(f"ledger {self.path}: directory {self.path.parent} does not exist", "create it first")
        with self._transaction() as db:
            if _is_empty(db):
                _create(db)
            _check_format(db, self.path)
            _add_zcdp_columns(db)
            db.execute(
                "INSERT INTO budgets VALUES (?, ?, ?, ?) ON CONFLICT(dataset) DO UPDATE SET "
                "epsilon=excluded.epsilon, delta=excluded.delta, updated=excluded.updated "
                "WHERE epsilon != excluded.epsilon OR delta != excluded.delta",
                (self.dataset, self.epsilon, self.delta, _now()),
            )
            db.execute("INSERT OR IGNORE INTO spent VALUES (?, 0.0, 0.0)", (self.dataset,))

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
        relation: str = RELATION,
    ) -> Charge:
        """Record a release's cost, or refuse it; call BEFORE computing the release.

        The work is a fixed number of keyed reads and writes (running totals), whatever the
        length of the history. Inside :meth:`request`, the charge carries its idempotency key.

        Raises
        ------
        BudgetExceededError
            The charge would take the composed spending over the budget; nothing is recorded.
        InputError
            Bad epsilon / delta, ``partition`` without ``subset`` (or the reverse), details that
            are not JSON-serialisable, or a ``relation`` other than the ledger's (the epsilon of
            a release proved under another neighbouring relation must not be added).
        ProtocolError
            The request's idempotency key was already charged by another execution of it.
        """
        eps = check_epsilon(epsilon, f"epsilon of {operation!r}")
        dlt = check_delta(delta, f"delta of {operation!r}")
        return self._record(operation, eps, dlt, None, study, partition, subset, details, relation)

    def charge_zcdp(
        self,
        operation: str,
        rho: float,
        delta: float,
        *,
        study: str = "",
        details: Mapping[str, Any] | None = None,
        relation: str = RELATION,
    ) -> Charge:
        """Record a ``rho``-zCDP release (a Gaussian one) with its share ``delta`` of delta, or refuse it.

        zCDP charges compose by adding rho; together they cost ``zcdp_epsilon(sum rho, sum delta)``
        (module docstring), so two Gaussian releases of one study cost less than as two
        (epsilon, delta) charges. The charge records ``epsilon = zcdp_epsilon(rho, delta)``, what the
        release would cost alone. Call BEFORE computing the release; errors as :meth:`charge`, and
        ``delta`` must be positive (the conversion needs it).
        """
        r = check_rho(rho, f"rho of {operation!r}")
        dlt = check_delta(delta, f"delta of {operation!r}")
        if dlt <= 0.0:
            raise InputError(f"zCDP charge for {operation!r} has delta 0", "give it its share of delta, e.g. 5e-7")
        return self._record(operation, zcdp_epsilon(r, dlt), dlt, r, study, None, None, details, relation)

    def _record(
        self, operation: str, eps: float, dlt: float, rho: float | None, study: str, partition: str | None,
        subset: str | None, details: Mapping[str, Any] | None, relation: str,
    ) -> Charge:
        if relation != self.relation:
            raise InputError(
                f"{operation!r} is charged under the neighbouring relation {relation!r} but ledger {self.path} "
                f"holds {self.relation!r} only",
                "calibrate the release for substitution of one record (docs/differential-privacy.md)",
            )
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
        request = _REQUEST.get()
        with self._transaction() as db:
            if request is not None:
                self._claim(db, *request)
            if rho is None:
                spent_eps, spent_delta = self._add(db, operation, str(study), part, sub, eps, dlt)
            else:
                spent_eps, spent_delta = self._add_zcdp(db, operation, rho, dlt)
            time = _now()
            cur = db.execute(
                "INSERT INTO charges (dataset, time, operation, study, epsilon, delta, partition, subset, "
                "details, spent_epsilon, spent_delta, relation, request_id, rho) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    self.dataset, time, str(operation), str(study), eps, dlt, part, sub, text,
                    spent_eps, spent_delta, self.relation, None if request is None else request[0], rho,
                ),
            )
        return Charge(
            int(cur.lastrowid or 0), self.dataset, str(operation), str(study), eps, dlt, part, sub,
            json.loads(text), time, spent_eps, spent_delta, self.relation, None if request is None else request[0],
            rho,
        )

    def _add(
        self, db: sqlite3.Connection, operation: str, study: str, part: str | None, sub: str | None, eps: float,
        dlt: float,
    ) -> tuple[float, float]:
        """Add one charge to the running totals (or refuse it); return the new composed spending."""
        row = db.execute("SELECT epsilon, delta FROM spent WHERE dataset = ?", (self.dataset,)).fetchone()
        spent_eps, spent_delta = row
        if part is None:
            new_eps, new_delta = spent_eps + eps, spent_delta + dlt
        else:
            keys = (self.dataset, study, part)
            old_sub = db.execute(
                "SELECT epsilon, delta FROM subset_totals WHERE dataset = ? AND study = ? AND partition = ? "
                "AND subset = ?", (*keys, sub)
            ).fetchone() or (0.0, 0.0)
            old_max = db.execute(
                "SELECT epsilon, delta FROM partition_totals WHERE dataset = ? AND study = ? AND partition = ?", keys
            ).fetchone() or (0.0, 0.0)
            new_sub = (old_sub[0] + eps, old_sub[1] + dlt)
            new_max = (max(old_max[0], new_sub[0]), max(old_max[1], new_sub[1]))
            new_eps = spent_eps + new_max[0] - old_max[0]
            new_delta = spent_delta + new_max[1] - old_max[1]
        self._check_budget(operation, "", (spent_eps, spent_delta), (new_eps, new_delta))
        if part is not None:
            db.execute(
                "INSERT OR REPLACE INTO subset_totals VALUES (?, ?, ?, ?, ?, ?)", (*keys, sub, *new_sub)
            )
            db.execute("INSERT OR REPLACE INTO partition_totals VALUES (?, ?, ?, ?, ?)", (*keys, *new_max))
        db.execute("UPDATE spent SET epsilon = ?, delta = ? WHERE dataset = ?", (new_eps, new_delta, self.dataset))
        return new_eps, new_delta

    def _add_zcdp(self, db: sqlite3.Connection, operation: str, rho: float, dlt: float) -> tuple[float, float]:
        """Add one zCDP charge: the converted epsilon of the summed rho replaces the old one in the totals."""
        spent = db.execute("SELECT epsilon, delta FROM spent WHERE dataset = ?", (self.dataset,)).fetchone()
        old_rho, old_delta, old_eps = db.execute(
            "SELECT rho, delta, epsilon FROM zcdp_totals WHERE dataset = ?", (self.dataset,)
        ).fetchone() or (0.0, 0.0, 0.0)
        new_rho, new_zdelta = old_rho + rho, old_delta + dlt
        new_zeps = zcdp_epsilon(new_rho, new_zdelta)
        new_eps, new_delta = spent[0] - old_eps + new_zeps, spent[1] + dlt
        zcdp = f" (zCDP rho={rho:.6g}, composed by rho with earlier zCDP charges)"
        self._check_budget(operation, zcdp, spent, (new_eps, new_delta))
        db.execute(
            "INSERT OR REPLACE INTO zcdp_totals VALUES (?, ?, ?, ?)", (self.dataset, new_rho, new_zdelta, new_zeps)
        )
        db.execute("UPDATE spent SET epsilon = ?, delta = ? WHERE dataset = ?", (new_eps, new_delta, self.dataset))
        return new_eps, new_delta

    def _check_budget(
        self, operation: str, zcdp: str, spent: tuple[float, float], new: tuple[float, float]
    ) -> None:
        """Refuse a charge taking the composed spending from ``spent`` to ``new`` past the budget.

        The refusal says what is left and what the request needs: the growth of the composed
        (epsilon, delta) it would cause (``zcdp`` notes a zCDP charge's rho).
        """
        if new[0] > self.epsilon * (1 + _TOLERANCE) or new[1] > self.delta * (1 + _TOLERANCE):
            have_eps, have_delta = self._remaining_after(spent)
            state = "spent" if have_eps == 0.0 else "too low"
            raise BudgetExceededError(
                f"privacy budget {state}: dataset {self.dataset!r} has epsilon={have_eps:.6g}, delta={have_delta:.3g} "
                f"left of ({self.epsilon:g}, {self.delta:g}); {operation!r} needs epsilon={new[0] - spent[0]:.6g}, "
                f"delta={max(new[1] - spent[1], 0.0):.3g}{zcdp}",
                "ask for less, or raise the budget in the party's [privacy] configuration",
            )

    @contextmanager
    def request(self, request_id: str | None, fingerprint: str = "") -> Iterator[None]:
        """Charges made inside carry ``request_id``, the idempotency key of one request.

        The first charge claims the key for this execution, with the request's ``fingerprint``
        (e.g. a hash of its operation and parameters); a concurrent or later execution of the same
        key cannot charge it again (:class:`ProtocolError`) and must take the recorded outcome
        (:meth:`recorded_outcome`). ``None`` makes the block an ordinary one.
        """
        if request_id is None:
            yield
            return
        key = _request_key(request_id)
        reset = _REQUEST.set((key, uuid.uuid4().hex, str(fingerprint)))
        try:
            yield
        finally:
            _REQUEST.reset(reset)

    def record_outcome(self, outcome: Any) -> None:
        """Store the reply (a :class:`~collabcausal.messages.Message`) or error of the current request.

        Does nothing outside :meth:`request` or when the request made no charge (nothing was spent,
        so a retry may run afresh).
        """
        request = _REQUEST.get()
        if request is None:
            return
        blob = _encode_outcome(outcome)
        with self._transaction() as db:
            db.execute(
                "UPDATE requests SET outcome = ? WHERE dataset = ? AND request_id = ? AND token = ?",
                (blob, self.dataset, *request[:2]),
            )

    def recorded_outcome(self, request_id: str, fingerprint: str = "") -> Any:
        """The stored reply of an already charged request, or ``None`` if the key is new.

        A stored error is raised again (same class, same message).

        Raises
        ------
        ProtocolError
            The key was charged for a request with another ``fingerprint`` (a key names one
            request), or it was charged but has no recorded outcome: the request is running, or
            its process died after charging. Its noise is gone, so it can never be answered: retry
            with a new key (charged anew).
        """
        key = _request_key(request_id)
        with self._transaction() as db:
            row = db.execute(
                "SELECT outcome, fingerprint FROM requests WHERE dataset = ? AND request_id = ?", (self.dataset, key)
            ).fetchone()
        if row is None:
            return None
        if row[1] != str(fingerprint):
            raise ProtocolError(
                f"request_id {key!r} was already used for a different request to {self.dataset!r}",
                "send each distinct request with its own request_id",
            )
        if row[0] is None:
            raise ProtocolError(
                f"request {key!r} was charged to {self.dataset!r} but has no recorded reply (still running, or lost "
                "in a crash after charging)",
                "wait for it, or send the request again with a new request_id (charged again)",
            )
        return _decode_outcome(row[0])

    def _claim(self, db: sqlite3.Connection, key: str, token: str, fingerprint: str) -> None:
        row = db.execute(
            "SELECT token FROM requests WHERE dataset = ? AND request_id = ?", (self.dataset, key)
        ).fetchone()
        if row is None:
            db.execute("INSERT INTO requests VALUES (?, ?, ?, ?, NULL)", (self.dataset, key, token, fingerprint))
        elif row[0] != token:
            raise ProtocolError(
                f"request {key!r} was already charged to {self.dataset!r} by another execution",
                "fetch its recorded reply (retry the same request) or use a new request_id",
            )

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

    def secret(self, name: str) -> bytes:
        """A 32-byte random secret of this dataset, made on first use and kept in the file (never released).

        Used where a party's choice must be random, fixed across requests and restarts, and
        unknown to the analyst: e.g. the cross-fitting folds of ``dp_effects``.
        """
        key = f"secret:{self.dataset}:{name}"
        with self._transaction() as db:
            db.execute("INSERT OR IGNORE INTO meta VALUES (?, ?)", (key, os.urandom(32).hex()))
            (value,) = db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return bytes.fromhex(value)

    def spent(self) -> tuple[float, float]:
        """Composed (epsilon, delta) spent on this dataset (the running totals)."""
        with self._transaction() as db:
            eps, dlt = db.execute("SELECT epsilon, delta FROM spent WHERE dataset = ?", (self.dataset,)).fetchone()
        return float(eps), float(dlt)

    def remaining(self) -> tuple[float, float]:
        """(epsilon, delta) still available (never negative)."""
        return self._remaining_after(self.spent())

    def history(self, after: int = 0) -> list[Charge]:
        """Every charge on this dataset, oldest first: the audit trail (only those with an id above ``after``).

        ``after`` reads through the ``(dataset, id)`` index, so the charges of one request cost the
        same whatever the length of the history (:meth:`last_charge_id`).
        """
        with self._transaction() as db:
            return _read_history(db, self.dataset, int(after))

    def last_charge_id(self) -> int:
        """The id of this dataset's latest charge (0 without charges); one indexed read."""
        with self._transaction() as db:
            row = db.execute("SELECT max(id) FROM charges WHERE dataset = ?", (self.dataset,)).fetchone()
        return int(row[0] or 0)

    def _remaining_after(self, spent: tuple[float, float]) -> tuple[float, float]:
        """Budget left after ``spent``; what the budget check's tolerance would let through counts as spent (0)."""
        return _left(self.epsilon, spent[0]), _left(self.delta, spent[1])

    def _connect(self) -> sqlite3.Connection:
        return connect(self.path)

    def _transaction(self) -> AbstractContextManager[sqlite3.Connection]:
        return _transaction(self.path, self._connect)

    def __repr__(self) -> str:
        eps, delta = self.spent()
        budget = f"spent=({eps:g}, {delta:g}) of ({self.epsilon:g}, {self.delta:g})"
        return f"PrivacyLedger({str(self.path)!r}, dataset={self.dataset!r}, {budget}, relation={self.relation!r})"


def _left(total: float, spent: float) -> float:
    """``total - spent``, 0 within the budget check's relative tolerance (rounding residue of composition)."""
    left = total - spent
    return 0.0 if left <= total * _TOLERANCE else left


def default_ledger_location(data: str | Path) -> tuple[Path, str]:
    """``(<data file>.ledger.sqlite, <data file name>)``: the one ledger of a data file.

    Used by ``collabcausal discover --data`` and by a party whose ``[privacy]`` section names no
    ledger file, so that the same data has one budget whichever way it is queried.
    """
    p = Path(data)
    return p.with_name(p.name + ".ledger.sqlite"), p.name


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


ADD_REMOVE_OPERATIONS = frozenset({
    "dp_count", "dp_sum", "dp_mean", "dp_histogram", "dp_range",
    # interpret's DP-EBM, add/remove-calibrated before substitution_dp_ebm_budget (issue 11 item 3):
    "dp_cate_meta_dr", "dp_cate_meta_r", "dp_cate_meta_s", "dp_cate_nuisances_dr", "dp_cate_nuisances_r",
})
"""Operations that format 1 calibrated for add/remove-one; :func:`migrate_ledger` doubles their cost."""


def migrate_ledger(path: str | Path) -> int:
    """Convert a format-1 ledger in place to the substitution-only format; return the charges converted.

    Format 1 added epsilons proved under two relations. A release that is (eps, delta)-DP under
    add/remove-one is (2 eps, (1 + e^eps) delta)-DP under substitution (group privacy: a
    substitution is a removal then an addition), so the format-1 charges of
    :data:`ADD_REMOVE_OPERATIONS` (including every DP-EBM fit: interpret calibrated them for
    add/remove) are recorded at that cost; the others (ANM scores, DP-CATE's functional release)
    were proved for substitution and keep theirs. Totals are rebuilt
    from the converted history (:func:`composed_cost`). One transaction: all or nothing.
    """
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"ledger {p} does not exist", "check the path")
    with _transaction(p, lambda: connect(p)) as db:
        fmt = _format_of(db)
        if fmt == FORMAT:
            return 0
        if fmt not in OLD_FORMATS:
            raise ConfigError(f"{p} is not a collabcausal privacy ledger", "point to the ledger file")
        rows = db.execute(
            "SELECT id, dataset, time, operation, study, epsilon, delta, partition, subset, details FROM charges "
            "ORDER BY id"
        ).fetchall()
        db.execute("ALTER TABLE charges RENAME TO charges_v1")
        db.execute("DELETE FROM meta WHERE key = 'format'")
        _create(db)
        history: dict[str, list[Charge]] = {}
        for cid, dataset, time, op, study, eps, dlt, part, sub, details in rows:
            if op in ADD_REMOVE_OPERATIONS:
                eps, dlt = 2.0 * eps, (1.0 + float(np.exp(eps))) * dlt
                details = json.dumps({**json.loads(details), "migrated_from": FORMAT_1_NOTE}, sort_keys=True)
            before = history.setdefault(dataset, [])
            before.append(Charge(cid, dataset, op, study, eps, dlt, part, sub))
            spent = composed_cost(before)
            db.execute(
                "INSERT INTO charges VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NULL, NULL)",
                (cid, dataset, time, op, study, eps, dlt, part, sub, details, *spent, RELATION),
            )
        db.execute("DROP TABLE charges_v1")
        for dataset, in db.execute("SELECT dataset FROM budgets").fetchall():
            _rebuild_totals(db, dataset, history.get(dataset, []))
    return len(rows)


FORMAT_1_NOTE = "collabcausal-ledger-1 add/remove charge, cost doubled for substitution"


def _rebuild_totals(db: sqlite3.Connection, dataset: str, charges: list[Charge]) -> None:
    db.execute("INSERT OR REPLACE INTO spent VALUES (?, ?, ?)", (dataset, *composed_cost(charges)))
    rho, dlt = _zcdp_sums(charges)
    if rho > 0.0:
        db.execute("INSERT OR REPLACE INTO zcdp_totals VALUES (?, ?, ?, ?)",
                   (dataset, rho, dlt, zcdp_epsilon(rho, dlt)))
    subsets: dict[tuple[str, str, str], list[float]] = {}
    for c in charges:
        if c.partition is not None:
            total = subsets.setdefault((c.study, c.partition, str(c.subset)), [0.0, 0.0])
            total[0] += c.epsilon
            total[1] += c.delta
    maxima: dict[tuple[str, str], list[float]] = {}
    for (study, part, sub), (eps, dlt) in subsets.items():
        db.execute("INSERT INTO subset_totals VALUES (?, ?, ?, ?, ?, ?)", (dataset, study, part, sub, eps, dlt))
        top = maxima.setdefault((study, part), [0.0, 0.0])
        top[0], top[1] = max(top[0], eps), max(top[1], dlt)
    for (study, part), (eps, dlt) in maxima.items():
        db.execute("INSERT INTO partition_totals VALUES (?, ?, ?, ?, ?)", (dataset, study, part, eps, dlt))


def _read_history(db: sqlite3.Connection, dataset: str, after: int = 0) -> list[Charge]:
    rows = db.execute(
        "SELECT id, dataset, operation, study, epsilon, delta, partition, subset, details, time, "
        "spent_epsilon, spent_delta, relation, request_id, rho FROM charges WHERE dataset = ? AND id > ? ORDER BY id",
        (dataset, after),
    ).fetchall()
    return [Charge(*row[:8], json.loads(row[8]), *row[9:]) for row in rows]


def _transaction(path: Path, open_db: Callable[[], sqlite3.Connection]) -> AbstractContextManager[sqlite3.Connection]:
    return transaction(
        open_db,
        f"ledger {path}",
        open_fix="check the path and permissions",
        corrupt_fix="restore it from a backup; never delete a ledger to reset a budget",
    )


def _create(db: sqlite3.Connection) -> None:
    for statement in _SCHEMA.split(";"):
        db.execute(statement)
    _add_zcdp_columns(db)
    db.execute("CREATE INDEX IF NOT EXISTS charges_by_dataset ON charges (dataset, id)")
    db.execute("INSERT OR REPLACE INTO meta VALUES ('format', ?)", (FORMAT,))
    db.execute("INSERT OR REPLACE INTO meta VALUES ('relation', ?)", (RELATION,))


def _add_zcdp_columns(db: sqlite3.Connection) -> None:
    """Give a ledger made before zCDP charges their column and totals (no charge changes meaning).

    Older versions of collabcausal still read such a file correctly: the ``spent`` totals include the
    converted zCDP cost, and they only ever add to them.
    """
    if "rho" not in {row[1] for row in db.execute("PRAGMA table_info(charges)")}:
        db.execute("ALTER TABLE charges ADD COLUMN rho REAL")
    db.execute("CREATE TABLE IF NOT EXISTS zcdp_totals (dataset TEXT PRIMARY KEY, rho REAL NOT NULL, "
               "delta REAL NOT NULL, epsilon REAL NOT NULL)")


def _is_empty(db: sqlite3.Connection) -> bool:
    return db.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] == 0


def _format_of(db: sqlite3.Connection) -> str | None:
    tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    if not {"meta", "budgets", "charges"} <= tables:
        return None
    row = db.execute("SELECT value FROM meta WHERE key='format'").fetchone()
    return None if row is None else str(row[0])


def _check_format(db: sqlite3.Connection, path: Path) -> None:
    fmt = _format_of(db)
    if fmt in OLD_FORMATS:
        raise ConfigError(
            f"ledger {path} is in the old format {fmt} (its totals mix two neighbouring relations)",
            f"convert it once with `collabcausal party budget --ledger {path} --migrate`",
        )
    if fmt != FORMAT:
        raise ConfigError(f"{path} is an SQLite file but not a collabcausal privacy ledger", "point to the ledger file")
    relation = db.execute("SELECT value FROM meta WHERE key='relation'").fetchone()
    if relation is None or relation[0] != RELATION:
        raise ConfigError(
            f"ledger {path} holds the neighbouring relation {None if relation is None else relation[0]!r}, "
            f"not {RELATION!r}",
            "use a ledger made by this version of collabcausal",
        )


def _request_key(request_id: Any) -> str:
    if not isinstance(request_id, str) or not request_id or len(request_id) > 200:
        raise InputError(f"request_id must be a non-empty string of at most 200 characters, got {request_id!r}",
                         "send e.g. a UUID as params['request_id']")
    return request_id


def _encode_outcome(outcome: Any) -> bytes:
    """A reply Message (params JSON + exact arrays) or an error, as bytes."""
    from collabcausal.errors import CollabCausalError
    from collabcausal.messages import Message

    buffer = io.BytesIO()
    if isinstance(outcome, Message):
        head = {"kind": "reply", "operation": outcome.operation, "params": dict(outcome.params)}
        np.savez(buffer, **{f"a_{k}": np.asarray(v) for k, v in outcome.arrays.items()})
    elif isinstance(outcome, CollabCausalError):
        head = {"kind": "error", "class": type(outcome).__name__, "problem": outcome.problem, "fix": outcome.fix}
    else:
        raise InputError(f"cannot record an outcome of type {type(outcome).__name__}", "record a Message or an error")
    return json.dumps(head, allow_nan=True).encode() + b"\n" + buffer.getvalue()


def _decode_outcome(blob: bytes) -> Any:
    from collabcausal import errors
    from collabcausal.messages import Message

    text, _, arrays = bytes(blob).partition(b"\n")
    head = json.loads(text)
    if head["kind"] == "error":
        raise getattr(errors, head["class"], errors.CollabCausalError)(head["problem"], head["fix"])
    with np.load(io.BytesIO(arrays), allow_pickle=False) as npz:
        loaded = {name[2:]: npz[name] for name in npz.files}
    return Message(head["operation"], head["params"], loaded)


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="microseconds")
