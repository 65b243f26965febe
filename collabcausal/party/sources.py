"""A party's data source: read the declared columns of a file or a database query into arrays.

The ``[data]`` section of party.toml names one source (docs/data-sources.md)::

    path = "cohort.parquet"         # a file: .csv or .parquet (format = "csv" | "parquet" overrides)

    url = "postgresql+psycopg://reader@db.hospital.org:5432/omop"   # or sqlite:///c.db, duckdb:///c.duckdb
    query_file = "cohort.sql"       # or query = "SELECT ..."; one row per subject, the declared columns
    password_env = "OMOP_PASSWORD"  # or password_file = "secrets/omop.password" (mode 0600)
    statement_timeout = 300         # seconds

A query returns exactly the declared columns (covariates, treatment, outcome, subject id): a
missing or an extra column is refused, so nothing undeclared is read. It runs in a read-only
transaction with a statement timeout (PostgreSQL: ``SET TRANSACTION READ ONLY`` and ``SET LOCAL
statement_timeout``; SQLite: opened with ``mode=ro`` and interrupted at the deadline; DuckDB:
``read_only`` and interrupted at the deadline), so a query that writes fails instead of writing.
The password is read when the source is opened, only from the environment variable or the
owner-only file the section names; the URL in party.toml may not hold one, and every message
shows the URL with the password hidden (``***``) and any echo of the password scrubbed.

Parquet and query results are read in Arrow record batches straight into the table's float64
arrays: a Parquet file's covariate matrix is allocated once, at its final size, from the file's
row count (a query's row count is not known ahead, so its batches are joined at the end). CSV
files go through :func:`collabcausal.party.table.read_table_file` (pandas), as before.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import sqlite3
import stat
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import pyarrow as pa
from numpy.typing import NDArray

from collabcausal.errors import ConfigError, DataSourceError, InputError
from collabcausal.party.arrow_columns import check_no_nulls, float_column
from collabcausal.party.chunked_table import ChunkedTable
from collabcausal.party.table import PartyTable, check_declared, read_table_file

if TYPE_CHECKING:
    from sqlalchemy.engine import URL, Engine

__all__ = ["BACKENDS", "DataSource", "read_table"]

BATCH_ROWS = 65_536
BACKENDS = ("postgresql", "sqlite", "duckdb")
CONNECT_TIMEOUT = 10
_FIX_DRIVERS = 'install the database drivers: pip install "collabcausal[db]"'


@dataclass(frozen=True)
class DataSource:
    """One declared source: a file (``path``) or a database ``url`` and ``query``.

    Attributes
    ----------
    path : Path or None
        The CSV or Parquet file.
    file_format : {"csv", "parquet"} or None
        Overrides the file's extension.
    url : str or None
        A SQLAlchemy 2 URL without a password (relative SQLite and DuckDB files already resolved).
    query : str or None
        The cohort query.
    password_env, password_file
        Where the database password is (at most one).
    workers : int or None
        Blocks read at once when ``path`` is a directory of Parquet files (read out of core).
    statement_timeout : float
        Seconds the query may run.
    """

    path: Path | None = None
    file_format: Literal["csv", "parquet"] | None = None
    url: str | None = None
    query: str | None = None
    password_env: str | None = None
    password_file: Path | None = None
    statement_timeout: float = 300.0
    workers: int | None = None

    @classmethod
    def from_section(cls, data: Mapping[str, Any], base: Path) -> DataSource:
        """The source of a validated ``[data]`` section; relative paths are relative to ``base``."""
        if data.get("path") is not None:
            path = (base / data["path"]).resolve()
            return cls(path=path, file_format=data.get("format"), workers=data.get("workers"))
        url = _parse_url(data["url"])
        if url.get_backend_name() in ("sqlite", "duckdb") and url.database and url.database != ":memory:":
            url = url.set(database=str((base / url.database).resolve()))
        query = data.get("query")
        if query is None:
            query_path = base / data["query_file"]
            try:
                query = query_path.read_text()
            except OSError as exc:
                raise ConfigError(f"[data] query_file {query_path}: {exc.strerror}", "check the path") from None
        if not query.strip():
            raise ConfigError("[data] query is empty", "give the cohort query, one row per subject")
        password_file = data.get("password_file")
        return cls(
            url=url.render_as_string(hide_password=False),
            query=query,
            password_env=data.get("password_env"),
            password_file=None if password_file is None else (base / password_file).resolve(),
            statement_timeout=float(data.get("statement_timeout", 300.0)),
        )

    @property
    def is_query(self) -> bool:
        """True for a database query, False for a file."""
        return self.url is not None

    def describe(self) -> str:
        """The file path, or the URL (no password is ever in it), for messages and the audit log."""
        return str(self.path) if self.url is None else self.url

    def query_digest(self) -> str | None:
        """Hex SHA-256 of the query text (UTF-8), or None for a file."""
        return None if self.query is None else hashlib.sha256(self.query.encode()).hexdigest()

    def password(self) -> str | None:
        """The database password from ``password_env`` or ``password_file`` (None when neither is set)."""
        if self.password_env is not None:
            value = os.environ.get(self.password_env)
            if value is None:
                raise ConfigError(
                    f"[data] password_env: the environment variable {self.password_env} is not set",
                    f"export {self.password_env} in the party's environment (never in party.toml)",
                )
            return value
        if self.password_file is not None:
            return read_password_file(self.password_file)
        return None


def read_password_file(path: Path) -> str:
    """The first line of an owner-only file; a file others can read or write is refused."""
    try:
        mode = path.stat().st_mode
    except OSError as exc:
        raise ConfigError(f"[data] password_file {path}: {exc.strerror}", "check the path") from None
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise ConfigError(
            f"[data] password_file {path} is accessible to group or others (mode {stat.S_IMODE(mode):04o})",
            f"chmod 600 {path}",
        )
    lines = path.read_text().splitlines()
    if not lines or not lines[0]:
        raise ConfigError(f"[data] password_file {path} is empty", "write the password on its first line")
    return lines[0]


def read_table(
    source: DataSource,
    covariates: Sequence[str],
    *,
    treatment: str | None = None,
    outcome: str | None = None,
    subject_id: str | None = None,
    min_subjects: int = 10,
    on_constant: Literal["error", "drop"] = "error",
) -> PartyTable | ChunkedTable:
    """Read the declared columns of ``source`` and validate them (:meth:`PartyTable.from_arrays`).

    A ``path`` naming a directory of Parquet files is opened out of core instead
    (:meth:`~collabcausal.party.chunked_table.ChunkedTable.open`: validated block by block, not loaded).

    Every problem is one :class:`InputError` (the data), :class:`ConfigError` (the section or the
    password) or :class:`DataSourceError` (the database), naming the source and the fix.
    """
    where = source.describe()
    check_declared(covariates, treatment, outcome, subject_id, where)
    checks = {"min_subjects": min_subjects, "on_constant": on_constant}
    if source.path is not None and source.path.is_dir():
        return ChunkedTable.open(source.path, covariates, treatment=treatment, outcome=outcome, subject_id=subject_id,
                                 workers=source.workers, source=where, **checks)
    if source.path is not None and _file_format(source) == "csv":
        frame = read_table_file(source.path, "csv")
        return PartyTable.from_frame(
            frame, covariates, treatment=treatment, outcome=outcome, subject_id=subject_id, source=where, **checks
        )
    labels = {"treatment": treatment, "outcome": outcome, "subject_ids": subject_id}
    layout = _Layout(tuple(covariates), {k: v for k, v in labels.items() if v is not None})
    if source.path is not None:
        arrays = _read_parquet(source.path, layout)
    else:
        arrays = _read_query(source, layout)
    X, extra = arrays
    return PartyTable.from_arrays(
        X, tuple(covariates), **{k: (layout.labels[k], v) for k, v in extra.items()}, source=where, **checks
    )


@dataclass(frozen=True)
class _Layout:
    """The declared columns: covariates in order, and label columns by role."""

    covariates: tuple[str, ...]
    labels: dict[str, str]

    @property
    def names(self) -> list[str]:
        return [*self.covariates, *self.labels.values()]


def _file_format(source: DataSource) -> str:
    assert source.path is not None
    if source.file_format is not None:
        return source.file_format
    suffix = source.path.suffix.lower()
    if suffix in (".csv", ".txt"):
        return "csv"
    if suffix == ".parquet":
        return "parquet"
    raise InputError(f"{source.path}: unsupported file type {suffix!r}", 'use .csv or .parquet, or set format = "csv"')


# -- Arrow batches into arrays -------------------------------------------------------------------


def _fill(
    batches: Iterable[pa.RecordBatch], layout: _Layout, where: str, total: int | None
) -> tuple[NDArray[np.float64], dict[str, NDArray]]:
    """Copy record batches into the covariate matrix and label arrays.

    With ``total`` rows known (Parquet metadata) every output is allocated once at its final size
    and each batch is copied into it; otherwise (a query) each batch gets its own block and the
    blocks are joined at the end. Nothing keeps a view of a batch: a zero-copy view would keep the
    reader's whole decoded page buffer alive.
    """
    p = len(layout.covariates)
    numeric = [role for role in layout.labels if role != "subject_ids"]
    if total is not None:
        X, out = np.empty((total, p)), {role: np.empty(total) for role in numeric}
    blocks: dict[str, list[NDArray]] = {role: [] for role in ["X", *layout.labels]}
    start = 0
    for batch in batches:
        k = batch.num_rows
        if total is not None:
            block, dest = X[start : start + k], {role: out[role][start : start + k] for role in numeric}
        else:
            block, dest = np.empty((k, p)), {role: np.empty(k) for role in numeric}
            for role, array in [("X", block), *dest.items()]:
                blocks[role].append(array)
        for j, name in enumerate(layout.covariates):
            block[:, j] = float_column(batch.column(name), name, where, start)
        for role in numeric:
            dest[role][:] = float_column(batch.column(layout.labels[role]), layout.labels[role], where, start)
        if "subject_ids" in layout.labels:
            name = layout.labels["subject_ids"]
            check_no_nulls(batch.column(name), name, where, start)
            blocks["subject_ids"].append(batch.column(name).cast(pa.string()).to_numpy(zero_copy_only=False))
        start += k
    if total is None:
        X = np.concatenate(blocks["X"]) if blocks["X"] else np.empty((0, p))
        out = {role: np.concatenate(blocks[role]) if blocks[role] else np.empty(0) for role in numeric}
    elif start != total:
        raise InputError(f"{where}: {start} rows read, the file's metadata says {total}", "re-export the file")
    if "subject_ids" in layout.labels:
        ids = blocks["subject_ids"]
        out["subject_ids"] = np.concatenate(ids).astype(str) if ids else np.empty(0, dtype=str)
    return X, out


def _read_parquet(path: Path, layout: _Layout) -> tuple[NDArray[np.float64], dict[str, NDArray]]:
    import pyarrow.parquet as pq

    where = str(path)
    if not path.is_file():
        raise InputError(f"{path}: no such file", "check [data] path")
    try:
        # pre_buffer (pyarrow's default) keeps every row group's bytes cached as it iterates: about
        # the file's size on top of the arrays; streamed reads in 1 MiB buffers keep ~100 MiB.
        file = pq.ParquetFile(path, pre_buffer=False, buffer_size=1 << 20)
    except (pa.ArrowException, OSError) as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise InputError(f"{path} is not a readable parquet table ({first})", "fix or re-export the file") from exc
    present = file.schema_arrow.names
    missing = [c for c in layout.names if c not in present]
    if missing:
        raise InputError(f"{where}: unknown column {missing[0]!r}", f"use one of {present}")
    total = file.metadata.num_rows
    batches = file.iter_batches(batch_size=BATCH_ROWS, columns=layout.names, use_threads=False)
    return _fill(batches, layout, where, total)


# -- database queries ----------------------------------------------------------------------------


def _parse_url(text: str) -> URL:
    try:
        from sqlalchemy.engine import make_url
        from sqlalchemy.exc import ArgumentError
    except ImportError:
        raise ConfigError("[data] url needs SQLAlchemy, which is not installed", _FIX_DRIVERS) from None
    try:
        url = make_url(text)
    except ArgumentError:
        raise ConfigError(
            "[data] url is not a SQLAlchemy URL",
            'write it like "postgresql+psycopg://user@host:5432/db", "sqlite:///cohort.db" or "duckdb:///c.duckdb"',
        ) from None
    if url.password is not None or any(key.lower() in ("password", "passfile") for key in url.query):
        raise ConfigError(
            f"[data] url {url.set(query={}).render_as_string(hide_password=True)} holds a password",
            "remove it from the URL and give password_env or password_file in [data]",
        )
    backend = url.get_backend_name()
    if backend not in BACKENDS:
        raise ConfigError(f"[data] url: unsupported database {backend!r}", f"use one of {', '.join(BACKENDS)}")
    if backend == "postgresql":
        url = url.set(drivername="postgresql+psycopg")
    elif not url.database or url.database == ":memory:":
        raise ConfigError(f"[data] url {text!r} names no database file", f'write it like "{backend}:///cohort.db"')
    return url


def _read_query(source: DataSource, layout: _Layout) -> tuple[NDArray[np.float64], dict[str, NDArray]]:
    from sqlalchemy.exc import DBAPIError

    where, seconds = source.describe(), source.statement_timeout
    password = source.password()
    with _scrubbed(password):
        engine = _engine(source, password)
        try:
            try:
                raw = engine.raw_connection()
            except (DBAPIError, engine.dialect.loaded_dbapi.Error) as exc:
                raise _connect_error(getattr(exc, "orig", exc), source) from None
            driver, backend = raw.driver_connection, engine.dialect.name
            try:
                with _deadline(driver, backend, seconds):
                    columns, batches = _execute(driver, backend, str(source.query), seconds)
                    if not columns:  # psycopg names no columns when a stream returns no rows
                        raise InputError(f"{where}: the query returned no rows", "check the cohort's criteria")
                    _check_result_columns(columns, layout, where)
                    return _fill((_record_batch(rows, columns) for rows in batches), layout, where, None)
            except engine.dialect.loaded_dbapi.Error as exc:
                raise _query_error(exc, where, seconds) from None
            finally:
                raw.close()  # ends the read-only transaction (nothing was written)
        finally:
            engine.dispose()


def _execute(driver: Any, backend: str, query: str, seconds: float) -> tuple[list[str], Iterator[list[tuple]]]:
    """Run ``query`` read-only; its column names and its rows in lists of at most :data:`BATCH_ROWS`.

    PostgreSQL rows are streamed (psycopg's ``Cursor.stream``: no server-side cursor, so any
    statement reaches the read-only transaction, which refuses writes); SQLite and DuckDB rows
    come through ``fetchmany``. Nothing is bound into the query (no ``%`` or ``?`` processing).
    """
    cursor = driver.cursor()
    if backend == "postgresql":
        cursor.execute("SET TRANSACTION READ ONLY")
        cursor.execute(f"SET LOCAL statement_timeout = {max(1, round(seconds * 1000))}")
        rows = cursor.stream(query, size=BATCH_ROWS)
        batches = iter(lambda: list(itertools.islice(rows, BATCH_ROWS)), [])
    else:
        cursor.execute(query)
        batches = iter(lambda: cursor.fetchmany(BATCH_ROWS), [])
    first = next(batches, [])
    columns = [d[0] for d in cursor.description or ()]
    return columns, itertools.chain([first] if first else [], batches)


def _check_result_columns(columns: list[str], layout: _Layout, where: str) -> None:
    declared = layout.names
    missing = [c for c in declared if c not in columns]
    if missing:
        raise InputError(
            f"{where}: the query returns no column {missing[0]!r} (it returns {columns})",
            "select every declared column (covariates, treatment, outcome, subject_id) by that name",
        )
    extra = [c for c in columns if c not in declared]
    if extra or len(columns) != len(set(columns)):
        name = extra[0] if extra else next(c for c in columns if columns.count(c) > 1)
        raise InputError(
            f"{where}: the query returns column {name!r}, which party.toml does not declare (or returns it twice)",
            "select only the declared columns, each once",
        )


def _record_batch(rows: Sequence[Sequence[Any]], columns: list[str]) -> pa.RecordBatch:
    values = list(zip(*rows, strict=True)) if rows else [() for _ in columns]
    return pa.RecordBatch.from_arrays([_arrow(v) for v in values], names=columns)


def _arrow(values: Sequence[Any]) -> pa.Array:
    try:
        return pa.array(values, from_pandas=False)
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return pa.array([None if v is None else str(v) for v in values], type=pa.string())


def _engine(source: DataSource, password: str | None) -> Engine:
    from sqlalchemy import create_engine
    from sqlalchemy.pool import NullPool

    url = _parse_url(str(source.url))
    backend = url.get_backend_name()
    if backend == "postgresql":
        return create_engine(
            url.set(password=password), poolclass=NullPool, connect_args={"connect_timeout": CONNECT_TIMEOUT}
        )
    database = Path(str(url.database))
    if not database.is_file():
        raise DataSourceError(f"{source.describe()}: no such database file", "check the path in [data] url")
    if backend == "sqlite":
        uri = f"{database.as_uri()}?mode=ro"
        return create_engine("sqlite://", poolclass=NullPool, creator=lambda: sqlite3.connect(uri, uri=True))
    return create_engine(url, poolclass=NullPool, connect_args={"read_only": True})


@contextmanager
def _deadline(driver: Any, backend: str, seconds: float) -> Iterator[None]:
    """Interrupt a SQLite or DuckDB statement after ``seconds`` (PostgreSQL enforces its own)."""
    if backend == "sqlite":
        stop = time.monotonic() + seconds
        driver.set_progress_handler(lambda: int(time.monotonic() > stop), 10_000)
        yield
        return
    if backend == "duckdb":
        timer = threading.Timer(seconds, driver.interrupt)
        timer.start()
        try:
            yield
        finally:
            timer.cancel()
        return
    yield


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _connect_error(exc: BaseException, source: DataSource) -> DataSourceError:
    where, message = source.describe(), _first_line(exc)
    if getattr(exc, "sqlstate", None) in ("28P01", "28000") or "authentication" in message:
        secret = source.password_env or source.password_file or "password_env / password_file"
        return DataSourceError(
            f"{where}: the database refused the login ({message})",
            f"check the password in {secret} and the user's access rights (the password is never shown)",
        )
    return DataSourceError(
        f"{where}: cannot connect to the database ({message})",
        "check host, port and database name, and that the server accepts connections from this machine",
    )


def _query_error(exc: BaseException, where: str, seconds: float) -> DataSourceError:
    message = _first_line(exc)
    state = getattr(exc, "sqlstate", None) or ""
    lower = message.lower()
    if state == "25006" or "readonly" in lower or "read-only" in lower:
        return DataSourceError(
            f"{where}: the query tries to write and the read-only transaction refused it ({message})",
            "the party only reads: make the cohort query a single SELECT (or WITH ... SELECT)",
        )
    if state == "57014" or "interrupt" in lower:
        return DataSourceError(
            f"{where}: the query ran longer than statement_timeout = {seconds:g} s ({message})",
            "speed the query up (indexes, a prepared cohort table) or raise statement_timeout in [data]",
        )
    if state.startswith("08") or "connection" in lower:
        return DataSourceError(
            f"{where}: the connection to the database was lost ({message})", "check the server and retry"
        )
    return DataSourceError(
        f"{where}: the query failed ({message})", "fix the query (try it in the database's shell as the same user)"
    )


@contextmanager
def _scrubbed(secret: str | None) -> Iterator[None]:
    """Re-raise project errors with every occurrence of ``secret`` replaced by ``***``."""
    try:
        yield
    except (DataSourceError, InputError, ConfigError) as exc:
        if not secret or secret not in str(exc):
            raise
        fix = None if exc.fix is None else exc.fix.replace(secret, "***")
        raise type(exc)(exc.problem.replace(secret, "***"), fix) from None
