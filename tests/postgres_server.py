"""A throwaway PostgreSQL cluster for tests: Debian's ``initdb`` / ``pg_ctl`` in a temporary directory.

The cluster listens on 127.0.0.1 on a free port (and on a unix socket in its directory), requires
SCRAM passwords for every connection, runs with ``fsync=off``, and is stopped and deleted by
:meth:`PostgresServer.stop`. ``initdb`` refuses to run as root: as root the binaries run as the
``postgres`` user the Debian package creates (else ``nobody``) through ``runuser``.
:func:`start_server` raises :class:`ServerUnavailable` with the reason when there is no server
binary (``make test`` installs the ``postgresql`` package when it can) or it cannot start.
"""

from __future__ import annotations

import glob
import os
import pwd
import secrets
import shutil
import socket
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

SUPERUSER = "postgres"


class ServerUnavailable(RuntimeError):
    """No PostgreSQL server could be started here (the message says why)."""


@dataclass
class PostgresServer:
    """A running throwaway cluster."""

    root: Path
    bin: Path
    port: int
    password: str
    run_as: str | None

    def url(self, database: str, user: str = SUPERUSER, password: str | None = None) -> str:
        """A SQLAlchemy URL (psycopg 3) to ``database`` on loopback; a password only when given."""
        auth = user if password is None else f"{user}:{password}"
        return f"postgresql+psycopg://{auth}@127.0.0.1:{self.port}/{database}"

    def execute(self, sql: str, database: str = "postgres") -> None:
        """Run SQL as the superuser in autocommit (CREATE DATABASE cannot run in a transaction)."""
        import psycopg

        with psycopg.connect(
            host="127.0.0.1", port=self.port, user=SUPERUSER, password=self.password, dbname=database, autocommit=True
        ) as conn:
            conn.execute(sql)

    def create_database(self, name: str) -> None:
        """A new empty database."""
        self.execute(f'CREATE DATABASE "{name}"')

    def stop(self) -> None:
        """Stop the server (immediately) and delete its directory."""
        _run(self, [str(self.bin / "pg_ctl"), "-D", str(self.root / "data"), "-m", "immediate", "-w", "stop"])
        shutil.rmtree(self.root, ignore_errors=True)


def find_bin() -> Path | None:
    """The newest ``/usr/lib/postgresql/<version>/bin`` holding ``initdb``, or None."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[-3]))
    return Path(found[-1]).parent if found else None


def start_server() -> PostgresServer:
    """Initialise and start a cluster; :class:`ServerUnavailable` says why it cannot."""
    bin_dir = find_bin()
    if bin_dir is None:
        raise ServerUnavailable(
            "PostgreSQL server binaries not found under /usr/lib/postgresql/*/bin "
            "(install the Debian package: apt-get install postgresql; `make test` does it as root)"
        )
    try:
        import psycopg  # noqa: F401
    except ImportError:
        raise ServerUnavailable('psycopg is not installed (pip install "collabcausal[db]")') from None
    run_as = None
    if os.geteuid() == 0:
        run_as = next((u for u in (SUPERUSER, "nobody") if _user_exists(u)), None)
        if run_as is None or shutil.which("runuser") is None:
            raise ServerUnavailable("running as root with no unprivileged user and runuser to run initdb as")
    root = Path(tempfile.mkdtemp(prefix="collabcausal-pg-"))
    server = PostgresServer(root, bin_dir, _free_port(), secrets.token_urlsafe(16), run_as)
    pwfile = root / "superuser.pw"
    pwfile.write_text(server.password + "\n")
    if run_as is not None:
        entry = pwd.getpwnam(run_as)
        for path in (root, pwfile):
            os.chown(path, entry.pw_uid, entry.pw_gid)
    root.chmod(0o700)
    pwfile.chmod(0o600)
    initdb = [str(bin_dir / "initdb"), "-D", str(root / "data"), "-U", SUPERUSER, "-A", "scram-sha-256"]
    options = f"-c listen_addresses=127.0.0.1 -p {server.port} -k {root} -c fsync=off"
    start = [str(bin_dir / "pg_ctl"), "-D", str(root / "data"), "-l", str(root / "log"), "-w", "-o", options, "start"]
    for command in ([*initdb, f"--pwfile={pwfile}", "-E", "UTF8", "--no-sync"], start):
        done = _run(server, command)
        if done.returncode != 0:
            log = (root / "log").read_text() if (root / "log").exists() else ""
            shutil.rmtree(root, ignore_errors=True)
            tail = (done.stderr + done.stdout + log).strip().splitlines()[-3:]
            raise ServerUnavailable(f"{Path(command[0]).name} failed: {' | '.join(tail)}")
    return server


def _run(server: PostgresServer, command: list[str]) -> subprocess.CompletedProcess:
    prefix = [] if server.run_as is None else ["runuser", "-u", server.run_as, "--"]
    return subprocess.run([*prefix, *command], capture_output=True, text=True, timeout=120, check=False)


def _user_exists(name: str) -> bool:
    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
