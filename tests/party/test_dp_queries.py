"""Party DP operations: charged before computed, correct at large epsilon, refusals."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from unread_rows import refused_unread

import collabcausal.party.dp_queries as dq
from collabcausal.errors import BudgetExceededError, InputError, PolicyError
from collabcausal.estimators.dp.aggregates import OUTCOME
from collabcausal.estimators.dp.partitions import CentersPartition, regular_cut
from collabcausal.ledger import PrivacyLedger
from collabcausal.messages import Message
from collabcausal.party import Party, PartyTable
from collabcausal.party.operations import lookup
from collabcausal.party.policy import PartyPolicy

BIG = 1e7


@pytest.fixture()
def frame():
    rng = np.random.default_rng(0)
    n = 400
    columns = {"age": rng.uniform(20, 80, n), "score": rng.normal(0, 1, n)}
    return pd.DataFrame({**columns, "t": rng.binomial(1, 0.5, n), "y": rng.normal(5, 1, n)})


@pytest.fixture()
def party(frame, tmp_path):
    table = PartyTable.from_frame(frame, ["age", "score"], treatment="t", outcome="y")
    return Party("h1", table, ledger=PrivacyLedger(tmp_path / "l.sqlite", epsilon=100.0 * BIG, dataset="h1.csv"))


def _ask(party, op, **params):
    """Send a request that declares the columns it reads (as the analyst's helpers do)."""
    request = Message(op, {"study": "s1", **params})
    if "columns" not in params:
        request = Message(op, {**request.params, "columns": dq.referenced_columns(request)})
    return party.handle(request)


def test_operations_are_registered_as_differentially_private():
    for name in ("dp_count", "dp_sum", "dp_mean", "dp_histogram", "dp_range"):
        assert lookup(name).differentially_private


def test_dp_count_by_arm_is_exact_at_huge_epsilon_and_charged(party, frame):
    reply = _ask(party, "dp_count", epsilon=BIG, by_arm=True)
    assert reply.array("counts").tolist() == [[(frame.t == 0).sum(), (frame.t == 1).sum()]]
    (charge,) = party.ledger.history()
    assert (charge.operation, charge.study, charge.epsilon) == ("dp_count", "s1", BIG)


def test_dp_sum_and_mean_clip_to_bounds_and_keep_clip_counts_local(party, frame):
    sums = [{"column": "age", "bounds": [0, 50]}, {"column": OUTCOME, "bounds": [0, 10]}]
    reply = _ask(party, "dp_sum", epsilon=BIG, sums=sums)
    assert reply.array("sums") == pytest.approx([frame.age.clip(0, 50).sum(), frame.y.clip(0, 10).sum()], abs=1e-3)
    assert "n_clipped" not in reply.params and set(reply.arrays) == {"sums"}
    assert party.ledger.history()[0].details["n_clipped"]["age"] == int((frame.age > 50).sum())
    mean = _ask(party, "dp_mean", epsilon=BIG, sums=sums).array("means")
    assert mean == pytest.approx([frame.age.clip(0, 50).mean(), frame.y.mean()], abs=1e-3)


def test_dp_histogram_counts_and_sums_per_cell_and_arm(party, frame):
    cut = regular_cut("age", (20, 80), 3)
    reply = _ask(party, "dp_histogram", epsilon=BIG, partition=cut.to_spec(), by_arm=True,
                 sums=[{"column": OUTCOME, "bounds": [0, 10]}])
    cells = cut.assign(frame.age.to_numpy())
    expected = [[((cells == k) & (frame.t == a)).sum() for a in (0, 1)] for k in range(3)]
    assert reply.array("counts").tolist() == expected
    assert reply.array("sums").shape == (3, 2, 1)
    assert party.ledger.history()[0].details["columns"] == ["age"]


def test_dp_range_brackets_the_data(party):
    # OpenDP's quantile mechanism (unseeded) picks candidate c with probability <= exp(-(s_c - s_min) / scale),
    # s_c = |0.99 #(x < c) - 0.01 #(x > c)| for the 1% quantile. With n = 400 every candidate outside
    # (15, 30) scores >= 4: at epsilon 20 (scale 0.396 per quantile) the summed bound was 5e-3 + 1.2e-2 and
    # 0.8% of 20,000 draws fell outside; at epsilon 200 (scale 0.0396) it is 6e-42.
    reply = _ask(party, "dp_range", epsilon=200.0, columns=["age"], bounds=[[0, 120]], quantiles=[0.01, 0.99])
    lo, hi = reply.array("ranges")[0]
    assert 15 < lo < 30 and 70 < hi < 85


def test_over_budget_request_is_refused_before_any_computation(party, monkeypatch):
    def must_not_run(*args, **kwargs):
        raise AssertionError("computed before charging")

    monkeypatch.setattr(dq, "noisy_aggregates", must_not_run)
    with pytest.raises(BudgetExceededError):
        _ask(party, "dp_count", epsilon=1000.0 * BIG)
    assert party.ledger.history() == []


def test_party_without_ledger_refuses_dp_queries(frame):
    party = Party("h2", PartyTable.from_frame(frame, ["age"], treatment="t", outcome="y"))
    with pytest.raises(PolicyError, match="no privacy ledger"):
        _ask(party, "dp_count", epsilon=1.0)


@pytest.mark.parametrize(
    ("op", "params", "match"),
    [
        ("dp_count", {}, "no epsilon"),
        ("dp_count", {"epsilon": 0.0}, "epsilon"),
        ("dp_count", {"epsilon": -1.0}, "epsilon"),
        ("dp_sum", {"epsilon": 1.0, "sums": [{"column": "salary", "bounds": [0, 1]}]}, "salary"),
        ("dp_sum", {"epsilon": 1.0, "sums": [{"column": "age", "bounds": [5, 1]}]}, "low < high"),
        ("dp_sum", {"epsilon": 1.0}, "no sums"),
        ("dp_histogram", {"epsilon": 1.0}, "no partition"),
        ("dp_histogram", {"epsilon": 1.0, "partition": regular_cut("weight", (0, 1), 2).to_spec()}, "weight"),
        ("dp_range", {"epsilon": 1.0, "columns": ["age"]}, "one \\(low, high\\)"),
        ("dp_range", {"epsilon": 1.0, "columns": ["age"], "bounds": [[0, 99]], "quantiles": [1.5]}, "quantiles"),
        # red team: bounds whose width (hence the sensitivity) overflows, or whose quantile candidates
        # collapse, were charged and then failed (InputError, OpenDPException): budget spent, nothing released
        ("dp_sum", {"epsilon": 1.0, "sums": [{"column": "age", "bounds": [-1e308, 1e308]}]}, "sensitivity"),
        ("dp_mean", {"epsilon": 1.0, "sums": [{"column": "age", "bounds": [-1e308, 1e308]}]}, "sensitivity"),
        ("dp_histogram", {"epsilon": 1.0, "partition": regular_cut("age", (0, 99), 2).to_spec(),
                          "sums": [{"column": OUTCOME, "bounds": [0, 1e308]}]}, "sensitivity"),
        ("dp_range", {"epsilon": 1.0, "columns": ["age"], "bounds": [[-1e308, 1e308]]}, "candidates"),
        ("dp_range", {"epsilon": 1.0, "columns": ["age"], "bounds": [[0, 5e-324]]}, "candidates"),
        ("dp_histogram", {"epsilon": 1.0, "partition": {**regular_cut("age", (0, 99), 2).to_spec(), "n_cells": [1e6]}},
         "positive integer"),
        ("dp_histogram", {"epsilon": 1.0, "partition": regular_cut(OUTCOME, (0, 10), 4).to_spec()},
         "no covariate column '@outcome'"),  # passed the check, charged, then failed at the table
        ("dp_range", {"epsilon": 1.0, "columns": [OUTCOME], "bounds": [[0, 10]]}, "no covariate column"),
        # fuzzing, a party without a policy: an int64 overflow after the charge
        ("dp_histogram", {"epsilon": 1.0, "partition": {**regular_cut("age", (0, 99), 2).to_spec(),
                                                        "n_cells": [2**63]}}, "overflows the cell index"),
        ("dp_count", {"epsilon": "1"}, "must be a number"),
        ("dp_count", {"epsilon": True}, "must be a number"),
    ],
)
def test_bad_requests_are_input_errors_and_charge_nothing(party, op, params, match):
    with pytest.raises(InputError, match=match):
        _ask(party, op, **params)
    assert party.ledger.history() == []


AGE = {"column": "age", "bounds": [0, 99]}
CUT = regular_cut("age", (20, 80), 3).to_spec()
CENTERS = CentersPartition(["age", "score"], [[30.0, 0.0], [60.0, 0.0]]).to_spec()
NESTED = {  # a key the party does not apply, in each nested specification of a DP query
    "grid partition": ("dp_histogram", "grid partition", "closed", lambda x: {"partition": CUT | x}),
    "centers partition": ("dp_histogram", "centers partition", "n_cells", lambda x: {"partition": CENTERS | x}),
    "histogram sum": ("dp_histogram", "dp_histogram sum", "weight", lambda x: {
        "partition": CUT, "by_arm": True, "sums": [AGE, {"column": OUTCOME, "bounds": [0, 10]} | x]}),
    "sum": ("dp_sum", "dp_sum sum", "clip", lambda x: {"sums": [AGE, {"column": "score", "bounds": [-5, 5]} | x]}),
    "mean": ("dp_mean", "dp_mean sum", "sensitivity", lambda x: {"sums": [AGE | x]}),
}


@pytest.mark.parametrize("case", sorted(NESTED))
def test_a_nested_specification_key_the_party_does_not_apply_is_refused_unread_and_uncharged(party, case):
    """A misspelling, another partition kind's key or a claimed bound inside the partition or a summed column: refused
    in one line naming it, before the charge and before any column is read (every specification of the request
    first); the same request without it is answered, charged once."""
    op, what, key, change = NESTED[case]
    request = Message(op, {"study": "s1", "epsilon": BIG, **change({key: 1.0})})
    request = Message(op, request.params | {"columns": dq.referenced_columns(request)})
    refused_unread(party, request, f"^{what} option '{key}' is not one this party applies")
    assert party.ledger.history() == []
    reply = _ask(party, op, epsilon=BIG, **change({}))
    assert reply.arrays and len(party.ledger.history()) == 1


def test_a_request_reading_an_undeclared_column_is_refused(party):
    request = Message("dp_sum", {"epsilon": 1.0, "columns": [], "sums": [{"column": "score", "bounds": [0, 1]}]})
    with pytest.raises(InputError, match="does not declare"):
        party.handle(request)
    assert party.ledger.history() == []


def test_a_column_outside_the_policy_is_refused_by_the_party_policy(frame, tmp_path):
    table = PartyTable.from_frame(frame, ["age", "score"], treatment="t", outcome="y")
    policy = PartyPolicy(operations=["dp_sum"], columns=["age", "score"])
    ledger = PrivacyLedger(tmp_path / "l.sqlite", epsilon=5.0)
    party = Party("h4", table, policy=policy, ledger=ledger)
    narrow = Party("h5", PartyTable.from_frame(frame, ["age"]), policy=PartyPolicy(["dp_sum"], ["age"]), ledger=ledger)
    sums = [{"column": "score", "bounds": [-3, 3]}]
    assert _ask(party, "dp_sum", epsilon=1.0, sums=sums).array("sums").shape == (1,)
    with pytest.raises(PolicyError, match="score"):
        _ask(narrow, "dp_sum", epsilon=1.0, sums=sums)
    assert len(ledger.history()) == 1


def test_outcome_and_arms_need_a_label_holder(frame, tmp_path):
    table = PartyTable.from_frame(frame, ["age"])
    party = Party("h3", table, ledger=PrivacyLedger(tmp_path / "l.sqlite", epsilon=5.0))
    with pytest.raises(InputError, match="no outcome"):
        _ask(party, "dp_sum", epsilon=1.0, sums=[{"column": OUTCOME, "bounds": [0, 1]}])
    with pytest.raises(InputError, match="no treatment"):
        _ask(party, "dp_count", epsilon=1.0, by_arm=True)
    assert party.ledger.history() == []


def test_referenced_columns_lists_every_covariate_a_request_reads():
    request = Message(
        "dp_histogram",
        {"partition": regular_cut("age", (0, 1), 2).to_spec(),
         "sums": [{"column": "score", "bounds": [0, 1]}, {"column": OUTCOME, "bounds": [0, 1]}]},
    )
    assert dq.referenced_columns(request) == ["age", "score"]
