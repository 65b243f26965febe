"""One process at a time per party: an OS lock on the files a party writes (issue 38, item 1).

Two ``party join`` processes of one party would both answer the analyst, charge one ledger and
append to one audit log. :func:`lock_party_files` takes an exclusive, non-blocking
:func:`fcntl.flock` on ``<file>.lock`` beside each file the party writes (its audit log, and its
ledger, which also keeps its request state; without a ledger the state sits beside the audit log)
and writes its pid there; a second process is refused in one line naming that pid. The kernel
releases the lock when the holder exits, however it exits (even ``kill -9``), so a stale lock
file never blocks a restart.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterable
from pathlib import Path

from collabcausal.errors import ConfigError

LOCK_SUFFIX = ".lock"


class PartyFilesLock:
    """The locks a party process holds on its files; released by :meth:`release` or at process exit.

    Parameters
    ----------
    party : str
        The party's name, for the refusal.
    files : iterable of path
        The files to hold (each locked through ``<file>.lock``).

    Raises
    ------
    ConfigError
        Another process holds one of the files (naming its pid and how to stop it).
    """

    def __init__(self, party: str, files: Iterable[str | Path]) -> None:
        self._fds: list[int] = []
        try:
            for file in dict.fromkeys(Path(f).resolve() for f in files):
                self._fds.append(_lock(party, file))
        except BaseException:
            self.release()
            raise

    def release(self) -> None:
        """Give the files up (closing the lock files releases the locks)."""
        while self._fds:
            os.close(self._fds.pop())

    def __enter__(self) -> PartyFilesLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _lock(party: str, file: Path) -> int:
    """Lock ``file`` through ``<file>.lock``; return the lock file's descriptor."""
    path = file.with_name(file.name + LOCK_SUFFIX)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "unknown"
        os.close(fd)
        raise ConfigError(
            f"party {party}: {file} is in use by another process (pid {holder}, e.g. a `collabcausal party join` "
            "of the same party.toml); one process at a time may answer for a party",
            f"stop that process first (Ctrl-C in its terminal, or `kill {holder}`), or use it instead of starting "
            "another",
        ) from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd
