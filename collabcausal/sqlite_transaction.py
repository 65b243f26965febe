"""One SQLite transaction of a state file: a privacy ledger, a party's audit head and request state.

Every such file is opened the same way (autocommit connection, a 60 s busy timeout), written under
``BEGIN IMMEDIATE`` so two processes never interleave, and rolled back on any error; a SQLite error
becomes one :class:`~collabcausal.errors.ConfigError` that names the file and the fix.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from collabcausal.errors import ConfigError


def connect(path: str | Path) -> sqlite3.Connection:
    """An autocommit connection that waits up to 60 s for another process's transaction."""
    return sqlite3.connect(path, timeout=60.0, isolation_level=None)


@contextmanager
def transaction(
    open_db: Callable[[], sqlite3.Connection],
    what: str,
    *,
    open_fix: str,
    corrupt_fix: str,
    write: bool = True,
    durable: bool = True,
    close: bool = True,
) -> Iterator[sqlite3.Connection]:
    """``open_db()``, one transaction committed on success and rolled back on error, then closed.

    Parameters
    ----------
    open_db : callable
        Opens the connection (usually :func:`connect`).
    what : str
        The file as messages name it, e.g. ``"ledger /srv/ledger.sqlite"``.
    open_fix, corrupt_fix : str
        The fixes of the two errors: the file cannot be opened; it is unreadable or corrupt.
    write : bool
        ``BEGIN IMMEDIATE`` (take the write lock now) or a plain ``BEGIN`` for reads.
    durable : bool
        ``PRAGMA synchronous=FULL``: the commit reaches the disk before it returns.
    close : bool
        Close the connection afterwards (False for an in-memory database that must live on).
    """
    try:
        db = open_db()
    except sqlite3.Error as exc:
        raise ConfigError(f"{what} cannot be opened ({exc})", open_fix) from exc
    try:
        if durable:
            db.execute("PRAGMA synchronous=FULL")
        db.execute("BEGIN IMMEDIATE" if write else "BEGIN")
        yield db
        db.execute("COMMIT")
    except sqlite3.Error as exc:
        raise ConfigError(f"{what} is unreadable or corrupt ({exc})", corrupt_fix) from exc
    finally:
        if db.in_transaction:
            with suppress(sqlite3.Error):
                db.execute("ROLLBACK")
        if close:
            db.close()
