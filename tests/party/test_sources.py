"""Data sources: Parquet and CSV files, SQLite and DuckDB queries, passwords, the audit record.

PostgreSQL (a real throwaway server) is in test_sources_postgres.py.
"""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from collabcausal.errors import ConfigError, DataSourceError, InputError
from collabcausal.party.audit_verify import read_audit_log, summarise
from collabcausal.party.config import load_party_config
from collabcausal.party.sources import DataSource, read_table
from collabcausal.party.table import PartyTable

N = 40
COLUMNS = ("id", "age", "sex", "t", "y")
QUERY = "SELECT id, age, sex, t, y FROM cohort"


def cohort(n: int = N) -> pd.DataFrame:
    rng = np.random.default_rng(3)
    return pd.DataFrame(
        {
            "id": [f"p{i}" for i in range(n)],
            "age": rng.normal(60, 10, n),
            "sex": np.arange(n) % 2,
            "t": (np.arange(n) // 2) % 2,
            "y": rng.normal(size=n),
            "secret": rng.normal(size=n),
        }
    )


def read(source: DataSource, **kwargs: object) -> PartyTable:
    args = {"treatment": "t", "outcome": "y", "subject_id": "id"} | kwargs
    return read_table(source, ["age", "sex"], **args)  # type: ignore[arg-type]


def query_source(url: str, query: str = QUERY, **extra: object) -> DataSource:
    return DataSource.from_section({"url": url, "query": query, **extra}, Path("/"))


@pytest.fixture
def sqlite_db(tmp_path) -> Path:
    path = tmp_path / "cohort.db"
    with sqlite3.connect(path) as db:
        cohort().to_sql("cohort", db, index=False)
    return path


@pytest.fixture
def duckdb_db(tmp_path) -> Path:
    duckdb = pytest.importorskip("duckdb")
    path = tmp_path / "cohort.duckdb"
    frame = cohort()  # noqa: F841 (read by DuckDB's replacement scan)
    with duckdb.connect(str(path)) as db:
        db.execute("CREATE TABLE cohort AS SELECT * FROM frame")
    return path


def test_parquet_is_read_in_batches_into_the_same_table_as_the_frame(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr("collabcausal.party.sources.BATCH_ROWS", 7)
    cohort().to_parquet(tmp_path / "c.parquet")
    table = read(DataSource(path=tmp_path / "c.parquet"))
    expected = PartyTable.from_frame(cohort(), ["age", "sex"], treatment="t", outcome="y", subject_id="id")
    np.testing.assert_array_equal(table.covariates, expected.covariates)
    np.testing.assert_array_equal(table.treatment, expected.treatment)
    np.testing.assert_array_equal(table.subject_ids, expected.subject_ids)
    assert table.covariates.flags.c_contiguous and table.source.endswith("c.parquet")


def test_format_overrides_the_extension(tmp_path) -> None:
    cohort().to_csv(tmp_path / "export.dat", index=False)
    cohort().to_parquet(tmp_path / "export.bin")
    a = read(DataSource(path=tmp_path / "export.dat", file_format="csv"))
    b = read(DataSource(path=tmp_path / "export.bin", file_format="parquet"))
    np.testing.assert_allclose(a.covariates, b.covariates)
    with pytest.raises(InputError, match=r"unsupported file type '\.dat'"):
        read(DataSource(path=tmp_path / "export.dat"))


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d.drop(columns="sex"), "unknown column 'sex'"),
        (lambda d: d.assign(age=d["age"].where(d.index != 5)), "column 'age' has a NULL (row 6)"),
        (lambda d: d.assign(sex=d["sex"].astype(str)), "column 'sex' is not numeric (type large_string)"),
        (lambda d: d.assign(t=d["t"] * 3), "must be coded 0/1, found 3"),
        (lambda d: d.assign(id="same"), "has duplicates"),
        (lambda d: d.iloc[:0], "has no rows"),
    ],
)
def test_bad_parquet_tables_are_one_line_errors(tmp_path, mutate, message) -> None:
    mutate(cohort()).to_parquet(tmp_path / "c.parquet")
    with pytest.raises(InputError) as info:
        read(DataSource(path=tmp_path / "c.parquet"))
    assert message in str(info.value) and "fix:" in str(info.value) and "\n" not in str(info.value)


def test_sqlite_query_reads_only_the_declared_columns(sqlite_db) -> None:
    table = read(query_source(f"sqlite:///{sqlite_db}"))
    expected = PartyTable.from_frame(cohort(), ["age", "sex"], treatment="t", outcome="y", subject_id="id")
    np.testing.assert_allclose(table.covariates, expected.covariates)
    np.testing.assert_array_equal(table.treatment, expected.treatment)
    assert table.source == f"sqlite:///{sqlite_db}"


@pytest.mark.parametrize(
    ("query", "error", "message"),
    [
        ("DELETE FROM cohort", DataSourceError, "the query tries to write and the read-only transaction refused it"),
        ("CREATE TABLE x AS SELECT * FROM cohort", DataSourceError, "tries to write"),
        ("SELEC id FROM cohort", DataSourceError, "the query failed (near \"SELEC\": syntax error)"),
        ("SELECT id, age, sex, t, y, secret FROM cohort", InputError, "returns column 'secret', which party.toml"),
        ("SELECT id, age, t, y FROM cohort", InputError, "returns no column 'sex'"),
        ("SELECT id, age, sex, t, y FROM cohort WHERE 0", InputError, "has no rows"),
        ("SELECT id, CASE WHEN id = 'p3' THEN NULL ELSE age END AS age, sex, t, y FROM cohort", InputError,
         "column 'age' has a NULL (row 4)"),
        ("SELECT id, age, sex, t + 1 AS t, y FROM cohort", InputError, "must be coded 0/1, found 2"),
        ("SELECT 'x' AS id, age, sex, t, y FROM cohort", InputError, "subject id column 'id' has duplicates"),
        ("SELECT id, 'old' AS age, sex, t, y FROM cohort", InputError, "column 'age' is not numeric (type string)"),
    ],
)
def test_bad_sqlite_queries_are_one_line_errors(sqlite_db, query, error, message) -> None:
    with pytest.raises(error) as info:
        read(query_source(f"sqlite:///{sqlite_db}", query))
    text = str(info.value)
    assert message in text and "fix:" in text and "\n" not in text
    assert len(pd.read_sql("SELECT * FROM cohort", sqlite3.connect(sqlite_db))) == N  # nothing written


def test_a_long_sqlite_query_stops_at_the_statement_timeout(sqlite_db) -> None:
    endless = "WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM r) SELECT count(*) AS age FROM r"
    with pytest.raises(DataSourceError, match=r"ran longer than statement_timeout = 0.2 s"):
        read(query_source(f"sqlite:///{sqlite_db}", endless, statement_timeout=0.2))


def test_duckdb_query_is_read_only(duckdb_db) -> None:
    table = read(query_source(f"duckdb:///{duckdb_db}"))
    assert table.n_subjects == N and table.has_labels
    with pytest.raises(DataSourceError, match="tries to write"):
        read(query_source(f"duckdb:///{duckdb_db}", "DELETE FROM cohort"))
    endless = "SELECT count(*) AS age FROM range(1000000000000) a"
    with pytest.raises(DataSourceError, match="ran longer than statement_timeout"):
        read(query_source(f"duckdb:///{duckdb_db}", endless, statement_timeout=0.2))
    assert read(query_source(f"duckdb:///{duckdb_db}")).n_subjects == N


def test_a_missing_database_file_is_named(tmp_path) -> None:
    with pytest.raises(DataSourceError, match="no such database file"):
        read(query_source(f"sqlite:///{tmp_path / 'absent.db'}"))


# -- party.toml ---------------------------------------------------------------------------------

PARTY = """
[party]
name = "h1"
study = "s"

[analyst]
address = "127.0.0.1:50051"
insecure = true

[data]
{data}
treatment = "t"
outcome = "y"
subject_id = "id"

[policy]
columns = ["age", "sex"]
operations = ["describe"]
min_subjects = 5
{extra}
"""


def party_toml(folder: Path, data: str, extra: str = "") -> Path:
    path = folder / "party.toml"
    path.write_text(PARTY.format(data=data, extra=extra))
    return path


def test_party_loads_a_query_and_audits_its_digest_and_row_count(tmp_path, sqlite_db) -> None:
    (tmp_path / "cohort.sql").write_text(QUERY)
    config = load_party_config(party_toml(tmp_path, 'url = "sqlite:///cohort.db"\nquery_file = "cohort.sql"'))
    party = config.build_party()
    assert party.table.n_subjects == N
    (entry,) = read_audit_log(config.audit_path).entries
    assert entry["event"] == "data_loaded" and entry["rows"] == N
    assert entry["query_sha256"] == hashlib.sha256(QUERY.encode()).hexdigest()
    assert entry["source"] == f"sqlite:///{sqlite_db}"
    assert summarise(read_audit_log(config.audit_path))["operations"] == {}


@pytest.mark.parametrize(
    ("data", "extra", "message"),
    [
        ('path = "a.csv"\nurl = "sqlite:///c.db"\nquery = "SELECT 1"', "", "give either path"),
        ('url = "sqlite:///c.db"', "", "exactly one of query or query_file"),
        ('path = "a.csv"\npassword_env = "X"', "", "password_env goes with url"),
        ('url = "sqlite:///c.db"\nquery = "SELECT 1"\npassword_env = "A"\npassword_file = "b"', "", "not both"),
        ('url = "oracle://u@h/db"\nquery = "SELECT 1"', "", "unsupported database 'oracle'"),
        ('url = "not a url"\nquery = "SELECT 1"', "", "is not a SQLAlchemy URL"),
        ('url = "sqlite:///c.db"\nquery_file = "absent.sql"', "", "query_file"),
        ('url = "sqlite:///c.db"\nquery = "SELECT 1"', "[privacy]\nepsilon = 1.0", 'set [privacy] ledger = "ledger'),
    ],
)
def test_bad_data_sections_are_one_line_config_errors(tmp_path, data, extra, message) -> None:
    with pytest.raises(ConfigError) as info:
        load_party_config(party_toml(tmp_path, data, extra))
    assert message in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize(
    "url", ["postgresql+psycopg://reader:hunter2secret@db.example.org/omop", "postgresql://r@db/omop?password=hunter2secret"]
)
def test_a_password_in_the_url_is_refused_without_being_shown(tmp_path, url) -> None:
    with pytest.raises(ConfigError) as info:
        load_party_config(party_toml(tmp_path, f'url = "{url}"\nquery = "SELECT 1"'))
    assert "holds a password" in str(info.value) and "hunter2secret" not in str(info.value)


def test_password_env_must_be_set(monkeypatch) -> None:
    monkeypatch.delenv("CC_TEST_PW", raising=False)
    source = query_source("postgresql+psycopg://reader@127.0.0.1:1/omop", password_env="CC_TEST_PW")
    with pytest.raises(ConfigError, match="the environment variable CC_TEST_PW is not set"):
        source.password()
    monkeypatch.setenv("CC_TEST_PW", "s3cret")
    assert source.password() == "s3cret"


def test_a_password_file_others_can_read_is_refused_with_the_chmod_fix(tmp_path) -> None:
    secret = tmp_path / "db.password"
    secret.write_text("s3cret\n")
    secret.chmod(0o644)
    source = query_source("postgresql+psycopg://reader@127.0.0.1:1/omop", password_file=str(secret))
    with pytest.raises(ConfigError) as info:
        source.password()
    assert "accessible to group or others (mode 0644)" in str(info.value)
    assert f"fix: chmod 600 {secret}" in str(info.value) and "s3cret" not in str(info.value)
    secret.chmod(0o600)
    assert source.password() == "s3cret"
