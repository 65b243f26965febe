"""PostgreSQL sources against a real throwaway server (the ``postgres_server`` fixture, tests/conftest.py).

The reader role may write (SELECT, INSERT, DELETE, CREATE): a write is refused by the party's
read-only transaction, not by missing grants. The password must never appear in any output, in
any message or in the audit log.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from collabcausal.errors import DataSourceError, InputError
from collabcausal.party.audit_verify import read_audit_log
from collabcausal.party.config import load_party_config
from collabcausal.party.sources import DataSource, read_table

N = 30
QUERY = "SELECT person_id AS id, age, sex, t, y FROM cohort"
PASSWORD = "pw-" + secrets.token_hex(12)


@pytest.fixture(scope="module")
def database(postgres_server):
    """``(server, name)``: a database with table ``cohort`` and a login role ``reader`` (PASSWORD)."""
    name = "cohort_" + secrets.token_hex(4)
    postgres_server.create_database(name)
    rng = np.random.default_rng(5)
    rows = ", ".join(
        f"({i}, {rng.normal(60, 10):.3f}, {i % 2}, {(i // 2) % 2}, {rng.normal():.6f})" for i in range(N)
    )
    postgres_server.execute(
        "CREATE TABLE cohort (person_id integer PRIMARY KEY, age numeric(6, 3), sex integer, t integer,"
        f" y double precision); INSERT INTO cohort VALUES {rows}; CREATE SEQUENCE s;"
        "DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'reader') THEN"
        f" CREATE ROLE reader LOGIN PASSWORD '{PASSWORD}'; END IF; END $$;"
        "GRANT SELECT, INSERT, DELETE ON cohort TO reader; GRANT USAGE ON SEQUENCE s TO reader;"
        "GRANT CREATE ON SCHEMA public TO reader;",
        database=name,
    )
    return postgres_server, name


def source(database, query: str = QUERY, **extra: object) -> DataSource:
    server, name = database
    section = {"url": server.url(name, "reader"), "query": query, "password_env": "CC_PG_PASSWORD", **extra}
    return DataSource.from_section(section, Path("/"))


def read(src: DataSource):
    return read_table(src, ["age", "sex"], treatment="t", outcome="y", subject_id="id")


@pytest.fixture
def password(monkeypatch):
    monkeypatch.setenv("CC_PG_PASSWORD", PASSWORD)


def rows_left(database) -> int:
    server, name = database
    import psycopg

    with psycopg.connect(host="127.0.0.1", port=server.port, user="postgres", password=server.password,
                         dbname=name) as conn:
        return conn.execute("SELECT count(*) FROM cohort").fetchone()[0]


def test_a_cohort_query_is_read_into_the_table(database, password) -> None:
    table = read(source(database))
    assert table.n_subjects == N and table.has_labels
    assert table.subject_ids[:3].tolist() == ["0", "1", "2"]
    assert table.covariates.dtype == np.float64 and np.ptp(table.column("age")) > 0  # numeric -> float64


@pytest.mark.parametrize(
    "query",
    [
        "DELETE FROM cohort",
        "INSERT INTO cohort VALUES (999, 1, 1, 1, 1)",
        "CREATE TABLE stolen AS SELECT * FROM cohort",
        "SELECT person_id AS id, age + nextval('s') AS age, sex, t, y FROM cohort",
        "WITH gone AS (DELETE FROM cohort RETURNING *) SELECT person_id AS id, age, sex, t, y FROM gone",
    ],
)
def test_a_query_that_writes_is_refused_by_the_read_only_transaction(database, password, query) -> None:
    with pytest.raises(DataSourceError) as info:
        read(source(database, query))
    assert "read-only transaction refused it" in str(info.value) and "\n" not in str(info.value)
    assert rows_left(database) == N


@pytest.mark.parametrize(
    ("query", "error", "message"),
    [
        ("SELECT pg_sleep(5) AS age", DataSourceError, "ran longer than statement_timeout = 0.3 s"),
        ("SELECT * FROM no_such_table", DataSourceError, 'the query failed (relation "no_such_table" does not exist'),
        (QUERY.replace("sex,", "sex, sex AS secret,"), InputError, "returns column 'secret'"),
        (QUERY.replace("age,", "NULLIF(age, age) AS age,"), InputError, "column 'age' has a NULL (row 1)"),
        (QUERY + " WHERE false", InputError, "the query returned no rows"),
        (QUERY.replace(" t,", " t * 2 AS t,"), InputError, "must be coded 0/1, found 2"),
        (QUERY.replace("person_id AS id", "1 AS id"), InputError, "subject id column 'id' has duplicates"),
    ],
)
def test_bad_queries_are_one_line_errors(database, password, query, error, message) -> None:
    with pytest.raises(error) as info:
        read(source(database, query, statement_timeout=0.3))
    text = str(info.value)
    assert message in text and "fix:" in text and "\n" not in text and PASSWORD not in text


def test_a_wrong_password_is_refused_and_never_shown(database, monkeypatch) -> None:
    wrong = "wrong-" + secrets.token_hex(8)
    monkeypatch.setenv("CC_PG_PASSWORD", wrong)
    with pytest.raises(DataSourceError) as info:
        read(source(database))
    text = str(info.value)
    assert "the database refused the login" in text and "check the password in CC_PG_PASSWORD" in text
    assert wrong not in text and PASSWORD not in text


def test_an_unreachable_server_is_named(password) -> None:
    src = DataSource.from_section(
        {"url": "postgresql+psycopg://reader@127.0.0.1:1/omop", "query": QUERY, "password_env": "CC_PG_PASSWORD"},
        Path("/"),
    )
    with pytest.raises(DataSourceError, match=r"127\.0\.0\.1:1/omop: cannot connect to the database"):
        read(src)


def _party_toml(folder: Path, database, secret: Path) -> Path:
    server, name = database
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "party.toml"
    path.write_text(
        f"""[party]
name = "h1"
study = "s"

[analyst]
address = "127.0.0.1:1"
insecure = true

[data]
url = "{server.url(name, "reader")}"
query = "{QUERY}"
password_file = "{secret}"
treatment = "t"
outcome = "y"
subject_id = "id"

[policy]
columns = ["age", "sex"]
operations = ["describe"]
min_subjects = 5
"""
    )
    return path


def _join(config: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "GRPC_VERBOSITY": "ERROR"}
    command = [sys.executable, "-m", "collabcausal.cli", "party", "join", "--config", str(config)]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=120, check=False)


def test_party_join_never_prints_logs_or_audits_the_password(database, tmp_path, capfd) -> None:
    secret = tmp_path / "db.password"
    secret.write_text(PASSWORD + "\n")
    secret.chmod(0o600)
    config = load_party_config(_party_toml(tmp_path / "h1", database, secret))
    assert config.build_party().table.n_subjects == N  # what `party join` does before dialing
    (entry,) = read_audit_log(config.audit_path).entries
    assert entry["rows"] == N and len(entry["query_sha256"]) == 64
    secret.write_text("not-the-password\n")
    refused = _join(config.path)
    assert refused.returncode == 11 and "refused the login" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
    out, err = capfd.readouterr()
    for text in (out, err, refused.stdout, refused.stderr, config.audit_path.read_text()):
        assert PASSWORD not in text and "not-the-password" not in text
