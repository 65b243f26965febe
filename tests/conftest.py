"""Fixtures shared across test packages."""

from __future__ import annotations

import sqlite3

import pytest


@pytest.fixture()
def format_1_ledger():
    """``write(path, budget, charges)``: a ledger as version 1 wrote it (mixed relations, no totals).

    ``charges`` are ``(operation, epsilon, partition, subset)`` rows of dataset ``"d"``.
    """

    def write(path, budget, charges):
        with sqlite3.connect(path) as db:
            db.executescript(
                "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);"
                "CREATE TABLE budgets (dataset TEXT PRIMARY KEY, epsilon REAL, delta REAL, updated TEXT);"
                "CREATE TABLE charges (id INTEGER PRIMARY KEY AUTOINCREMENT, dataset TEXT, time TEXT, operation TEXT,"
                " study TEXT, epsilon REAL, delta REAL, partition TEXT, subset TEXT, details TEXT,"
                " spent_epsilon REAL, spent_delta REAL);"
                "INSERT INTO meta VALUES ('format', 'collabcausal-ledger-1');"
            )
            db.execute("INSERT INTO budgets VALUES ('d', ?, 1e-5, 't')", (budget,))
            db.executemany(
                "INSERT INTO charges (dataset, time, operation, study, epsilon, delta, partition, subset, details,"
                " spent_epsilon, spent_delta) VALUES ('d', 't', ?, 's', ?, 0.0, ?, ?, '{}', 0.0, 0.0)",
                charges,
            )
        return path

    return write


@pytest.fixture(scope="session")
def postgres_server():
    """A throwaway PostgreSQL cluster (tests/postgres_server.py), stopped after the session.

    Skipped, with the reason, where no server can run (no Debian package, no unprivileged user).
    """
    from postgres_server import ServerUnavailable, start_server

    try:
        server = start_server()
    except ServerUnavailable as exc:
        pytest.skip(f"no PostgreSQL server: {exc}")
    yield server
    server.stop()


@pytest.fixture(scope="session")
def small_result():
    """A small seeded DC-QE simulation (3 settings, 6 bootstrap replicates) for the report tests."""
    from collabcausal.simulations.datasets import make_dcqe_synthetic
    from collabcausal.simulations.dcqe_experiment import ExperimentConfig, run_experiment
    from collabcausal.simulations.partition import partition_grid
    from collabcausal.simulations.settings import parse_settings

    data = make_dcqe_synthetic(seed=0)
    grid = partition_grid(data, 2, seed=0)
    config = ExperimentConfig(data, grid, parse_settings(["L-IA", "W", "CA"], grid), n_boot=6, party_components=2)
    return run_experiment(config)
