"""PrivacyLedger: composition, refusal before recording, persistence, crash safety, bad files,
one neighbouring relation, O(1) charges, idempotency keys, zCDP charges."""

from __future__ import annotations

import os
import sqlite3
import threading

import pytest
from fault_injection import kill_loop

from collabcausal.errors import BudgetExceededError, ConfigError, InputError, NoAnswerError, ProtocolError
from collabcausal.estimators.dp.zcdp import zcdp_epsilon, zcdp_rho
from collabcausal.ledger import (
    ADD_REMOVE,
    SUBSTITUTION,
    PrivacyLedger,
    composed_cost,
    ledger_budgets,
    migrate_ledger,
)
from collabcausal.party.node import request_fingerprint

RHO = zcdp_rho(1.0, 1e-5)


@pytest.fixture()
def ledger(tmp_path):
    return PrivacyLedger(tmp_path / "ledger.sqlite", epsilon=1.0, delta=1e-5, dataset="data.csv")


def test_basic_composition_adds_epsilon_and_delta(ledger):
    ledger.charge("a", 0.25, 2e-6)
    ledger.charge("b", 0.5, 3e-6, study="s")
    assert ledger.spent() == pytest.approx((0.75, 5e-6))
    assert ledger.remaining() == pytest.approx((0.25, 5e-6))
    assert [c.operation for c in ledger.history()] == ["a", "b"]
    assert ledger.history()[-1].spent_epsilon == pytest.approx(0.75)


def test_parallel_composition_costs_the_max_over_disjoint_subsets(ledger):
    ledger.charge("stage1", 0.4, study="s", partition="splits", subset="a")
    ledger.charge("stage2", 0.3, study="s", partition="splits", subset="b")
    ledger.charge("stage3", 0.2, study="s", partition="splits", subset="c")
    assert ledger.spent()[0] == pytest.approx(0.4)
    ledger.charge("stage2-again", 0.3, study="s", partition="splits", subset="b")  # same subset: adds
    assert ledger.spent()[0] == pytest.approx(0.6)


def test_parallel_composition_is_not_applied_across_partitions_or_studies(ledger):
    ledger.charge("x", 0.2, study="s1", partition="cells", subset="a")
    ledger.charge("y", 0.2, study="s1", partition="other", subset="b")
    ledger.charge("z", 0.2, study="s2", partition="cells", subset="b")
    ledger.charge("w", 0.2)
    assert ledger.spent()[0] == pytest.approx(0.8)


def test_over_budget_charge_is_refused_and_nothing_is_recorded(ledger):
    ledger.charge("a", 0.9)
    with pytest.raises(BudgetExceededError, match="left"):
        ledger.charge("b", 0.2)
    with pytest.raises(BudgetExceededError):
        ledger.charge("c", 0.05, 2e-5)
    assert len(ledger.history()) == 1
    assert ledger.spent()[0] == pytest.approx(0.9)
    ledger.charge("d", 0.1)  # exactly the rest is allowed
    assert ledger.remaining()[0] == pytest.approx(0.0)


@pytest.mark.parametrize("zcdp", [False, True])
def test_concurrent_writers_cannot_both_spend_the_last_budget(tmp_path, zcdp):
    # three charges fit, a fourth would not: 0.3 of epsilon 1, or 1/3.5 of the largest rho
    path = tmp_path / "shared.sqlite"
    PrivacyLedger(path, epsilon=1.0, delta=1e-5)
    outcomes = []

    def spend():
        ledger = PrivacyLedger(path, epsilon=1.0, delta=1e-5)
        try:
            ledger.charge_zcdp("q", RHO / 3.5, 1e-6) if zcdp else ledger.charge("q", 0.3)
            outcomes.append("ok")
        except BudgetExceededError:
            outcomes.append("refused")

    threads = [threading.Thread(target=spend) for _ in range(6)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert sorted(outcomes) == ["ok"] * 3 + ["refused"] * 3
    expected = (zcdp_epsilon(3 * RHO / 3.5, 3e-6), 3e-6) if zcdp else (0.9, 0.0)
    assert PrivacyLedger(path, epsilon=1.0, delta=1e-5).spent() == pytest.approx(expected, rel=1e-12)


def test_charges_persist_across_ledger_objects_and_budget_follows_the_config(tmp_path):
    path = tmp_path / "l.sqlite"
    PrivacyLedger(path, epsilon=1.0, dataset="d").charge("a", 0.6, details={"columns": ["age"]})
    again = PrivacyLedger(path, epsilon=2.0, dataset="d")
    assert again.spent()[0] == pytest.approx(0.6)
    assert again.history()[0].details["columns"] == ["age"]
    assert ledger_budgets(path) == {"d": (2.0, 0.0)}
    assert PrivacyLedger(path, epsilon=1.0, dataset="other").spent() == (0.0, 0.0)


def test_annotate_adds_local_notes_to_a_charge(ledger):
    charge = ledger.charge("a", 0.1, details={"columns": ["y"]})
    ledger.annotate(charge.id, {"n_clipped": {"y": 3}})
    assert dict(ledger.history()[0].details) == {"columns": ["y"], "n_clipped": {"y": 3}}


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"epsilon": 0.0}, "epsilon"),
        ({"epsilon": -1.0}, "epsilon"),
        ({"epsilon": 0.1, "delta": 1.0}, "delta"),
        ({"epsilon": 0.1, "partition": "cells"}, "subset"),
        ({"epsilon": 0.1, "subset": "a"}, "subset"),
        ({"epsilon": 0.1, "details": {"x": object()}}, "JSON"),
    ],
)
def test_bad_charges_are_input_errors(ledger, kwargs, match):
    with pytest.raises(InputError, match=match):
        ledger.charge("op", **kwargs)
    assert ledger.history() == []


@pytest.mark.parametrize(("epsilon", "delta"), [(0.0, 0.0), (float("nan"), 0.0), (1.0, -0.1), (1.0, 1.0)])
def test_bad_budgets_are_input_errors(tmp_path, epsilon, delta):
    with pytest.raises(InputError):
        PrivacyLedger(tmp_path / "l.sqlite", epsilon=epsilon, delta=delta)


def test_corrupt_foreign_or_unreachable_files_are_config_errors(tmp_path):
    garbage = tmp_path / "garbage.sqlite"
    garbage.write_bytes(os.urandom(4096))
    with pytest.raises(ConfigError, match="corrupt"):
        PrivacyLedger(garbage, epsilon=1.0)
    foreign = tmp_path / "foreign.sqlite"
    with sqlite3.connect(foreign) as db:
        db.execute("CREATE TABLE patients (id INTEGER)")
    with pytest.raises(ConfigError, match="not a collabcausal privacy ledger"):
        PrivacyLedger(foreign, epsilon=1.0)
    with pytest.raises(ConfigError, match="does not exist"):
        PrivacyLedger(tmp_path / "missing" / "l.sqlite", epsilon=1.0)


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root reads any file")
def test_unreadable_ledger_is_a_config_error(tmp_path):
    path = tmp_path / "l.sqlite"
    PrivacyLedger(path, epsilon=1.0).charge("a", 0.1)
    path.chmod(0)
    try:
        with pytest.raises(ConfigError):
            PrivacyLedger(path, epsilon=1.0).spent()
    finally:
        path.chmod(0o600)


def test_composed_cost_of_nothing_is_zero():
    assert composed_cost([]) == (0.0, 0.0)


def _writer(path, fd: int) -> None:
    """Charge forever, writing each acknowledged charge id to ``fd`` (runs in a forked child)."""
    ledger = PrivacyLedger(path, epsilon=1e9, delta=0.5, dataset="d")
    i = 0
    while True:
        parallel = i % 3 == 0
        if i % 3 == 1:  # a zCDP charge: its running totals live in another table, written in the same transaction
            charge = ledger.charge_zcdp("op", 1e-4, 1e-9, study="s", details={"i": i})
        else:
            charge = ledger.charge(
                "op",
                0.001,
                1e-9,
                study="s",
                partition="p" if parallel else None,
                subset=str(i % 2) if parallel else None,
                details={"i": i},
            )
        os.write(fd, f"{charge.id}\n".encode())
        i += 1


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
@pytest.mark.parametrize("kills", [6, pytest.param(60, marks=pytest.mark.slow)])
def test_sigkill_of_the_writer_never_corrupts_the_ledger_nor_loses_a_charge(tmp_path, kills):
    path = tmp_path / "crash.sqlite"

    def check(acknowledged: set[int]) -> None:
        with sqlite3.connect(path) as db:
            assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        ledger = PrivacyLedger(path, epsilon=1e9, delta=0.5, dataset="d")
        history = ledger.history()
        assert acknowledged <= {c.id for c in history}
        assert history[-1].spent_epsilon == pytest.approx(composed_cost(history)[0])
        assert ledger.spent() == pytest.approx(composed_cost(history), rel=1e-9)  # the running totals too

    acknowledged = kill_loop(lambda fd: _writer(path, fd), kills, seed=kills, check=check)
    assert len(acknowledged) > kills


# --- one neighbouring relation -----------------------------------------------------------------


def test_a_charge_names_its_relation_and_the_ledger_refuses_any_other(ledger):
    charge = ledger.charge("dp_sum", 0.1)
    assert charge.relation == SUBSTITUTION == ledger.relation
    assert ledger.history()[0].relation == SUBSTITUTION
    with pytest.raises(InputError, match="neighbouring relation 'add-remove-one'"):
        ledger.charge("legacy", 0.1, relation=ADD_REMOVE)
    assert len(ledger.history()) == 1
    assert ledger.spent()[0] == pytest.approx(0.1)


def test_an_old_format_ledger_is_refused_with_one_line_then_migrated_with_add_remove_costs_doubled(
    tmp_path, format_1_ledger
):
    charges = [("dp_sum", 0.5, None, None), ("dp_discover", 0.25, None, None), ("cate", 0.5, "split", "a")]
    path = format_1_ledger(tmp_path / "old.sqlite", 5.0, [*charges, ("cate", 0.25, "split", "b")])
    with pytest.raises(ConfigError, match=r"old format.*--migrate") as refused:
        PrivacyLedger(path, epsilon=5.0, dataset="d")
    assert "\n" not in str(refused.value)
    assert migrate_ledger(path) == 4
    ledger = PrivacyLedger(path, epsilon=5.0, delta=1e-5, dataset="d")
    # dp_sum (add/remove, 0.5) -> 1.0 under substitution; discover 0.25; parallel split max 0.5.
    assert ledger.spent()[0] == pytest.approx(1.75)
    assert [c.epsilon for c in ledger.history()] == [1.0, 0.25, 0.5, 0.25]
    assert {c.relation for c in ledger.history()} == {SUBSTITUTION}
    ledger.charge("cate", 0.5, study="s", partition="split", subset="b")  # subset b: 0.75 is the new max
    assert ledger.spent()[0] == pytest.approx(2.0)
    assert ledger.spent()[0] == pytest.approx(composed_cost(ledger.history())[0])
    assert migrate_ledger(path) == 0  # idempotent


def test_migration_doubles_dp_ebm_charges_which_interpret_calibrated_for_add_remove(tmp_path, format_1_ledger):
    """Issue 11 item 3: before the converted budget, a DP-EBM fit at eps was add/remove (eps, delta)-DP."""
    path = format_1_ledger(tmp_path / "old.sqlite", 5.0, [("dp_cate_meta_r", 0.5, None, None),
                                                           ("dp_cate_function_r", 0.25, None, None)])
    assert migrate_ledger(path) == 2
    assert [c.epsilon for c in PrivacyLedger(path, epsilon=5.0, dataset="d").history()] == [1.0, 0.25]


# --- O(1) charging ---------------------------------------------------------------------------


class _CountingLedger(PrivacyLedger):
    """Counts the SQLite virtual-machine instructions its connections execute (rows read scale them)."""

    steps = 0

    def _connect(self):
        db = super()._connect()

        def tick():
            type(self).steps += 1

        db.set_progress_handler(tick, 1)
        return db


def _steps_of_one_charge(ledger, **kwargs) -> int:
    _CountingLedger.steps = 0
    if kwargs.get("zcdp"):
        ledger.charge_zcdp("q", 1e-6, 1e-12, study="s")
    else:
        ledger.charge("q", 1e-3, 1e-12, study="s", **kwargs)
    return _CountingLedger.steps


@pytest.mark.parametrize("kwargs", [{}, {"partition": "p", "subset": "a"}, {"zcdp": True}])
def test_the_work_of_a_charge_does_not_grow_with_the_history(tmp_path, kwargs):
    ledger = _CountingLedger(tmp_path / "big.sqlite", epsilon=1e6, delta=0.5, dataset="d")
    for i in range(6):
        ledger.charge("q", 1e-3, study="s", partition="p" if i % 2 else None, subset=str(i % 3) if i % 2 else None)
    ledger.charge_zcdp("q", 1e-6, 1e-12, study="s")
    few = _steps_of_one_charge(ledger, **kwargs)
    with sqlite3.connect(ledger.path) as db:  # 3000 more past charges (the audit trail only)
        db.executemany(
            "INSERT INTO charges (dataset, time, operation, study, epsilon, delta, partition, subset, details, "
            "spent_epsilon, spent_delta, relation) VALUES ('d', 't', 'q', 's', 0, 0, ?, ?, '{}', 0, 0, ?)",
            [("p" if i % 2 else None, str(i % 5) if i % 2 else None, SUBSTITUTION) for i in range(3000)],
        )
    many = _steps_of_one_charge(ledger, **kwargs)
    # Re-reading the history costs dozens of instructions per past charge: >= 3000 * 10 more.
    assert many <= few + 50, (few, many)


# --- idempotency keys ------------------------------------------------------------------------


def _party(tmp_path):
    import numpy as np
    import pandas as pd

    from collabcausal.party import Party, PartyTable

    rng = np.random.default_rng(1)
    frame = pd.DataFrame({"age": rng.uniform(20, 80, 50), "t": rng.binomial(1, 0.5, 50), "y": rng.normal(size=50)})
    table = PartyTable.from_frame(frame, ["age"], treatment="t", outcome="y")
    return Party("h1", table, ledger=PrivacyLedger(tmp_path / "p.sqlite", epsilon=1.0, dataset="h1"))


def _sum_request(request_id, epsilon=0.3):
    from collabcausal.messages import Message

    params = {"epsilon": epsilon, "study": "s", "columns": ["age"], "sums": [{"column": "age", "bounds": [0, 100]}]}
    return Message("dp_sum", {**params, "request_id": request_id})


def test_a_retried_request_returns_the_recorded_release_without_a_new_charge(tmp_path):
    party = _party(tmp_path)
    first = party.handle(_sum_request("r-1"))
    again = party.handle(_sum_request("r-1"))
    assert again.array("sums").tobytes() == first.array("sums").tobytes()
    assert dict(again.params) == dict(first.params)
    assert len(party.ledger.history()) == 1 and party.ledger.history()[0].request_id == "r-1"
    other = party.handle(_sum_request("r-2"))
    assert other.array("sums").tobytes() != first.array("sums").tobytes()
    assert party.ledger.spent()[0] == pytest.approx(0.6)


def test_a_request_id_names_one_request_and_is_refused_for_another(tmp_path):
    party = _party(tmp_path)
    party.handle(_sum_request("r-1", epsilon=0.3))
    with pytest.raises(ProtocolError, match="different request"):
        party.handle(_sum_request("r-1", epsilon=0.5))
    assert party.ledger.spent()[0] == pytest.approx(0.3)


def test_a_refused_request_records_nothing_and_a_retry_runs_afresh(tmp_path):
    party = _party(tmp_path)
    with pytest.raises(BudgetExceededError):
        party.handle(_sum_request("big", epsilon=2.0))
    assert party.ledger.recorded_outcome("big") is None
    party.handle(_sum_request("r", epsilon=0.9))
    with pytest.raises(BudgetExceededError):
        party.handle(_sum_request("big", epsilon=0.2))


def test_a_charged_request_without_a_recorded_reply_is_never_answered_again(tmp_path):
    party = _party(tmp_path)
    with party.ledger.request("lost", request_fingerprint(_sum_request("lost"))):
        party.ledger.charge("dp_sum", 0.1)  # the process dies here: the noise is gone
    with pytest.raises(ProtocolError, match="new request_id"):
        party.handle(_sum_request("lost"))
    with party.ledger.request("lost"), pytest.raises(ProtocolError, match="another execution"):
        party.ledger.charge("dp_sum", 0.1)
    assert party.ledger.spent()[0] == pytest.approx(0.1)


def test_an_error_after_charging_is_replayed_not_recharged(tmp_path):
    party = _party(tmp_path)
    with party.ledger.request("e", request_fingerprint(_sum_request("e"))):
        party.ledger.charge("dp_discover", 0.2)
        party.ledger.record_outcome(NoAnswerError("declined", "use more rows"))
    with pytest.raises(NoAnswerError, match="declined"):
        party.handle(_sum_request("e"))
    assert party.ledger.spent()[0] == pytest.approx(0.2)


@pytest.mark.parametrize("bad", ["", 7, "x" * 201])
def test_bad_request_ids_are_input_errors(tmp_path, bad):
    party = _party(tmp_path)
    with pytest.raises(InputError, match="request_id"):
        party.handle(_sum_request(bad))
    assert party.ledger.history() == []


# --- zCDP charges ----------------------------------------------------------------------------

"""The largest rho the fixture's budget (1, 1e-5) holds when all its delta goes to zCDP charges."""


def _zcdp_totals(path) -> list[tuple]:
    with sqlite3.connect(path) as db:
        return db.execute("SELECT dataset, rho, delta, epsilon FROM zcdp_totals").fetchall()


def test_two_zcdp_halves_cost_the_conversion_of_their_summed_rho(ledger):
    first = ledger.charge_zcdp("statistics", RHO / 2, 5e-6, study="s")
    second = ledger.charge_zcdp("scores", RHO / 2, 5e-6, study="s")
    assert ledger.spent() == (zcdp_epsilon(RHO, 1e-5), 1e-5)
    assert ledger.spent() == pytest.approx((1.0, 1e-5), rel=1e-9) and ledger.spent()[0] <= 1.0
    # each charge states what it would cost alone: as two (epsilon, delta) charges they would not fit
    assert first.epsilon == second.epsilon == zcdp_epsilon(RHO / 2, 5e-6)
    assert first.epsilon + second.epsilon > 1.3
    assert [(c.rho, c.delta, c.partition) for c in ledger.history()] == [(RHO / 2, 5e-6, None)] * 2
    assert ledger.history()[-1].spent_epsilon == ledger.spent()[0]
    assert _zcdp_totals(ledger.path) == [("data.csv", RHO, 1e-5, zcdp_epsilon(RHO, 1e-5))]


def test_approximate_and_zcdp_charges_add_by_basic_composition(ledger):
    rho = RHO / 10
    ledger.charge("count", 0.2, 1e-6)
    ledger.charge_zcdp("z1", rho, 2e-6)
    ledger.charge_zcdp("z2", 2 * rho, 3e-6)
    assert ledger.spent() == pytest.approx((0.2 + zcdp_epsilon(3 * rho, 5e-6), 6e-6), rel=1e-12)
    assert ledger.remaining() == pytest.approx((1.0 - ledger.spent()[0], 4e-6), rel=1e-12)


def test_composed_cost_of_the_history_is_the_running_total_after_a_mix_of_charges(ledger):
    rho = RHO / 20
    ledger.charge("a", 0.05, 1e-7)
    ledger.charge_zcdp("z", rho, 1e-6, study="s")
    ledger.charge("split", 0.04, study="s", partition="folds", subset="0")
    ledger.charge("split", 0.03, 2e-7, study="s", partition="folds", subset="1")
    ledger.charge_zcdp("z", 2 * rho, 1e-6, study="s")
    ledger.charge("split", 0.02, study="s", partition="folds", subset="1")  # subset 1: 0.05 is the new max
    ledger.charge("b", 0.01)
    ledger.charge_zcdp("z", rho, 5e-7, study="t")
    history = ledger.history()
    expected = (0.05 + 0.05 + 0.01 + zcdp_epsilon(4 * rho, 2.5e-6), 1e-7 + 2e-7 + 2.5e-6)
    assert composed_cost(history) == pytest.approx(expected, rel=1e-12, abs=0.0)
    assert composed_cost(history) == pytest.approx(ledger.spent(), rel=1e-12, abs=0.0)
    for k in range(1, len(history) + 1):  # every charge records the composed spending right after it
        assert (history[k - 1].spent_epsilon, history[k - 1].spent_delta) == pytest.approx(
            composed_cost(history[:k]), rel=1e-12, abs=0.0)


def test_an_over_budget_zcdp_charge_is_refused_and_nothing_is_written(ledger):
    ledger.charge("a", 0.3, 1e-6)
    ledger.charge_zcdp("z", RHO / 4, 2e-6)
    before = (len(ledger.history()), ledger.spent(), _zcdp_totals(ledger.path))
    with pytest.raises(BudgetExceededError, match="zCDP") as refused:
        ledger.charge_zcdp("big", RHO, 2e-6)  # epsilon: 0.3 + zcdp_epsilon(1.25 RHO) > 1
    assert "\n" not in str(refused.value)
    with pytest.raises(BudgetExceededError):
        ledger.charge_zcdp("greedy", RHO / 100, 8e-6)  # delta: 1e-6 + 2e-6 + 8e-6 > 1e-5
    assert (len(ledger.history()), ledger.spent(), _zcdp_totals(ledger.path)) == before
    ledger.charge_zcdp("fits", RHO / 100, 2e-6)
    assert ledger.spent() == pytest.approx((0.3 + zcdp_epsilon(0.26 * RHO, 4e-6), 5e-6), rel=1e-12)


@pytest.mark.parametrize(
    ("rho", "delta", "match"),
    [(RHO, 0.0, "delta 0"), (0.0, 1e-6, "rho"), (-RHO, 1e-6, "rho"), (float("nan"), 1e-6, "rho"),
     (True, 1e-6, "rho"), ("a lot", 1e-6, "rho"), (RHO, 1.0, "delta"), (RHO, -1e-6, "delta")],
)
def test_a_bad_zcdp_charge_is_a_one_line_input_error_and_writes_nothing(ledger, rho, delta, match):
    with pytest.raises(InputError, match=match) as refused:
        ledger.charge_zcdp("op", rho, delta)
    assert "\n" not in str(refused.value)
    assert ledger.history() == [] and ledger.spent() == (0.0, 0.0) and _zcdp_totals(ledger.path) == []


def test_zcdp_charges_survive_reopening_and_keep_composing_by_rho(tmp_path):
    path = tmp_path / "l.sqlite"
    PrivacyLedger(path, epsilon=1.0, delta=1e-5, dataset="d").charge_zcdp("z1", RHO / 4, 2e-6)
    reopened = PrivacyLedger(path, epsilon=1.0, delta=1e-5, dataset="d")
    assert reopened.spent() == (zcdp_epsilon(RHO / 4, 2e-6), 2e-6)
    reopened.charge_zcdp("z2", RHO / 4, 2e-6)  # composes with z1's rho, not with its epsilon
    third = PrivacyLedger.from_file(path, "d")
    assert third.spent() == pytest.approx((zcdp_epsilon(RHO / 2, 4e-6), 4e-6), rel=1e-12)
    assert third.spent()[0] < 2 * zcdp_epsilon(RHO / 4, 2e-6)
    assert [c.rho for c in third.history()] == [RHO / 4, RHO / 4]


def _to_schema_before_zcdp(path) -> None:
    """Rebuild ``charges`` without its ``rho`` column and drop ``zcdp_totals``: a ledger as written before zCDP."""
    with sqlite3.connect(path) as db:
        db.executescript(
            "CREATE TABLE old (id INTEGER PRIMARY KEY AUTOINCREMENT, dataset TEXT NOT NULL, time TEXT NOT NULL,"
            " operation TEXT NOT NULL, study TEXT NOT NULL, epsilon REAL NOT NULL, delta REAL NOT NULL,"
            " partition TEXT, subset TEXT, details TEXT NOT NULL, spent_epsilon REAL NOT NULL,"
            " spent_delta REAL NOT NULL, relation TEXT NOT NULL, request_id TEXT);"
            "INSERT INTO old SELECT id, dataset, time, operation, study, epsilon, delta, partition, subset, details,"
            " spent_epsilon, spent_delta, relation, request_id FROM charges;"
            "DROP TABLE charges; ALTER TABLE old RENAME TO charges;"
            "CREATE INDEX charges_by_dataset ON charges (dataset, id);"
            "DROP TABLE zcdp_totals;"
        )


def test_a_ledger_made_before_zcdp_keeps_its_spending_and_history_and_then_takes_zcdp_charges(tmp_path):
    path = tmp_path / "old.sqlite"
    old = PrivacyLedger(path, epsilon=1.0, delta=1e-5, dataset="d")
    old.charge("dp_sum", 0.25, 1e-6, details={"columns": ["age"]})
    old.charge("cate", 0.125, study="s", partition="split", subset="a")
    history = [(c.id, c.operation, c.epsilon, c.delta, c.partition, c.spent_epsilon) for c in old.history()]
    _to_schema_before_zcdp(path)
    with sqlite3.connect(path) as db:
        assert "rho" not in {row[1] for row in db.execute("PRAGMA table_info(charges)")}
        assert db.execute("SELECT value FROM meta WHERE key = 'format'").fetchone() == ("collabcausal-ledger-2",)
    assert ledger_budgets(path) == {"d": (1.0, 1e-5)}
    ledger = PrivacyLedger(path, epsilon=1.0, delta=1e-5, dataset="d")
    assert ledger.spent() == (0.375, 1e-6)
    assert [(c.id, c.operation, c.epsilon, c.delta, c.partition, c.spent_epsilon) for c in ledger.history()] == history
    assert [c.rho for c in ledger.history()] == [None, None]
    assert ledger.history()[0].details["columns"] == ["age"]
    ledger.charge_zcdp("dp_effects_statistics", RHO / 4, 2e-6, study="s")
    assert ledger.spent() == pytest.approx((0.375 + zcdp_epsilon(RHO / 4, 2e-6), 3e-6), rel=1e-12)
    assert composed_cost(ledger.history()) == pytest.approx(ledger.spent(), rel=1e-12)
    assert PrivacyLedger(path, epsilon=1.0, delta=1e-5, dataset="d").history()[-1].rho == RHO / 4


def test_a_replayed_request_key_gets_the_recorded_reply_of_a_zcdp_charge_without_a_new_charge(ledger):
    from collabcausal.messages import Message

    reply = Message("dp_effects_scores", {"rho": RHO / 4}, {"values": [1.5, -2.0]})
    with ledger.request("z-1", "fingerprint"):
        ledger.charge_zcdp("dp_effects_scores", RHO / 4, 2e-6, study="s")
        ledger.record_outcome(reply)
    spent = ledger.spent()
    again = ledger.recorded_outcome("z-1", "fingerprint")
    assert again.operation == reply.operation and dict(again.params) == dict(reply.params)
    assert again.array("values").tolist() == [1.5, -2.0]
    with ledger.request("z-1", "fingerprint"), pytest.raises(ProtocolError, match="another execution"):
        ledger.charge_zcdp("dp_effects_scores", RHO / 4, 2e-6, study="s")
    with pytest.raises(ProtocolError, match="different request"):
        ledger.recorded_outcome("z-1", "another fingerprint")
    assert ledger.spent() == spent and [c.request_id for c in ledger.history()] == ["z-1"]
