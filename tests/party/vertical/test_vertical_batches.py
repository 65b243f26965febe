"""Vertical rounds in batches of subjects through Party.handle: the study over batches is the twin's, each party is
charged once per release, and a coordinator that reorders, repeats, skips, mixes or re-terms batches is refused."""

from __future__ import annotations

import math

import numpy as np
import pytest
from vertical_parties import STUDY, spent, world

from collabcausal.analyst.dp_effects_vertical import vertical_effects_results
from collabcausal.errors import IdentityError, InputError, PolicyError, ProtocolError
from collabcausal.estimators.dp.effects.design import FeatureMap
from collabcausal.estimators.dp.effects.vertical import ColumnGroups
from collabcausal.estimators.dp.zcdp import zcdp_epsilon
from collabcausal.messages import Message
from collabcausal.party.vertical.request import MAX_BATCH_ROWS
from collabcausal.protocol.inprocess import InProcessGrid
from collabcausal.simulations.vertical_simulation import RowGroup, vertical_study

GROUPS = ColumnGroups(((0, 1, 2), (3, 4, 5)))
BATCH = 600
"""Three batches of the 1,500 subjects of a world (the last one short)."""


def test_the_study_in_batches_is_the_twins(tmp_path) -> None:
    """At eps 1000 the study whose columns travel in two batches (the second short) agrees with the plaintext twin
    as the one-batch study does (tests/party/vertical/test_vertical_operations.py: 5 sd of their noise difference);
    each party is charged the study's epsilon once."""
    w = world(tmp_path, epsilon=1000.0)
    report = vertical_effects_results(InProcessGrid([w.label, w.other]), w.spec, STUDY, [("hospital", "registry")],
                                      ["hospital"], batch_rows=1000)
    row = report["estimates"]["aipw-ate"]
    twin = vertical_study([RowGroup((w.X[:, :3], w.X[:, 3:]), w.T, w.Y)], GROUPS, w.spec, rng=np.random.default_rng(0))
    assert abs(row["estimate"] - twin.effect.estimate) < 5 * math.sqrt(2) * row["dp_floor"]
    assert row["se"] == pytest.approx(twin.effect.se, rel=0.2)
    for party in (w.label, w.other):
        assert spent(party) == pytest.approx(1000.0, rel=1e-6)
    assert not [r for r, s in w.other.vertical_evaluations.items() if s is not None]


def _request(w, **changes) -> Message:
    (rho, delta), _ = w.spec.budgets
    fm = FeatureMap(w.spec.bounds, w.spec.outcome_range, 1)
    params = {"study": STUDY, "round": f"{STUDY}/statistics/0", "rho": rho, "delta": delta, "design": fm.to_spec(),
              "site": 0, "column_groups": [["a0", "a1", "a2"], ["b0", "b1", "b2"]], "parties": ["hospital", "registry"],
              "n_subjects": w.label.table.n_subjects, "batch_rows": BATCH}
    return Message("vertical_statistics_columns", params | changes)


def _relay(request: Message, columns: Message) -> Message:
    relayed = {k: columns.params[k] for k in ("chunks", "context_advertisement", "columns_advertisement")
               if k in columns.params}
    return Message("vertical_statistics_totals", dict(request.params) | relayed, dict(columns.arrays))


def _open(request: Message, totals: Message) -> Message:
    return Message("vertical_statistics_open", {"study": STUDY, "round": request.params["round"],
                                                "totals_advertisement": totals.params["totals_advertisement"]},
                   dict(totals.arrays))


def test_each_party_is_charged_at_batch_zero_only_and_the_totals_come_after_the_last(tmp_path) -> None:
    """The key owner pays when it encrypts batch 0, the evaluator when batch 0 verifies; later batches cost nothing,
    the evaluator answers them without a value until the last, and the released vector is whole."""
    w = world(tmp_path)
    rho, delta = w.spec.budgets[0]
    replies = []
    for batch in range(3):
        request = _request(w, batch=batch)
        columns = w.label.handle(request)
        assert ("ckks_context" in columns.arrays) == (batch == 0)
        replies.append(w.other.handle(_relay(request, columns)))
        for party in (w.label, w.other):
            assert spent(party) == pytest.approx(zcdp_epsilon(rho, delta))
    assert [bool(r.arrays) for r in replies] == [False, False, True]
    values = w.label.handle(_open(_request(w), replies[-1])).array("values")
    assert values.shape == (2 * 28 + 2 * 7,) and np.isfinite(values).all()


def test_the_key_owner_encrypts_batches_in_order_once_under_the_rounds_terms(tmp_path) -> None:
    """A skipped, repeated or re-termed batch is refused and costs nothing; a batch of a round never started too."""
    w = world(tmp_path)
    with pytest.raises(PolicyError, match="no open statistics round"):
        w.label.handle(_request(w, batch=1))
    assert spent(w.label) == 0.0
    w.label.handle(_request(w))
    charged = spent(w.label)
    for change, error, match in (({"batch": 2}, ProtocolError, "batch 1 is next"),
                                 ({"batch": 1, "rho": w.spec.budgets[0][0] / 2}, ProtocolError, "other terms"),
                                 ({"batch": 3}, InputError, "not one of the round's 3")):
        with pytest.raises(error, match=match):
            w.label.handle(_request(w, **change))
    w.label.handle(_request(w, batch=1))
    with pytest.raises(ProtocolError, match="batch 2 is next"):
        w.label.handle(_request(w, batch=1))
    assert spent(w.label) == charged


def test_the_evaluator_adds_each_batch_once_in_order_from_the_key_owner_of_batch_zero(tmp_path) -> None:
    """The coordinator cannot skip, repeat or swap batches, relay a batch under other terms, or start the round
    twice: each is refused, and the evaluator is charged once."""
    w = world(tmp_path)
    requests = [_request(w, batch=b) for b in range(3)]
    columns = [w.label.handle(r) for r in requests]
    with pytest.raises(PolicyError, match="no open statistics evaluation"):
        w.other.handle(_relay(requests[1], columns[1]))
    assert spent(w.other) == 0.0
    w.other.handle(_relay(requests[0], columns[0]))
    charged = spent(w.other)
    with pytest.raises(PolicyError, match="already evaluated"):
        w.other.handle(_relay(requests[0], columns[0]))
    with pytest.raises(ProtocolError, match="batch 1 is next"):
        w.other.handle(_relay(requests[2], columns[2]))
    swapped = Message("vertical_statistics_totals", dict(requests[1].params) | {
        k: columns[2].params[k] for k in ("chunks", "columns_advertisement")}, dict(columns[2].arrays))
    with pytest.raises(IdentityError, match="not what it signed"):  # batch 2's columns are signed for batch 2
        w.other.handle(swapped)
    relayed = _relay(requests[1], columns[1])
    retermed = Message(relayed.operation, dict(relayed.params) | {"rho": relayed.params["rho"] / 2},
                       dict(relayed.arrays))
    with pytest.raises(ProtocolError, match="other terms"):
        w.other.handle(retermed)
    assert w.other.handle(_relay(requests[1], columns[1])).arrays == {}
    assert w.other.handle(_relay(requests[2], columns[2])).arrays
    assert spent(w.other) == charged


def test_totals_opened_before_every_batch_was_encrypted_are_refused(tmp_path) -> None:
    """The key owner opens only a round whose every batch it encrypted (and the round is closed by the attempt)."""
    w = world(tmp_path, n=1500)
    one = _request(w, batch_rows=1000)
    columns = w.label.handle(one)
    w.other.handle(_relay(one, columns))
    with pytest.raises(ProtocolError, match="after 1 of its 2 batches"):
        w.label.handle(Message("vertical_statistics_open", {"study": STUDY, "round": one.params["round"],
                                                            "totals_advertisement": {}}, {}))
    with pytest.raises(PolicyError, match="no open statistics round"):
        w.label.handle(_request(w, batch=1, batch_rows=1000))


@pytest.mark.parametrize(("change", "match"), [
    ({"batch_rows": 0}, "not a positive number"),
    ({"batch_rows": True}, "not a positive number"),
    ({"batch": -1}, "not one of"),
    ({"batch": "0"}, "not one of"),
])
def test_malformed_batches_are_refused_before_any_charge(tmp_path, change, match) -> None:
    w = world(tmp_path)
    with pytest.raises(InputError, match=match):
        w.label.handle(_request(w, **change))
    assert spent(w.label) == 0.0


def test_batches_over_the_message_limit_are_refused_before_any_charge(tmp_path, monkeypatch) -> None:
    """A batch of more than MAX_BATCH_ROWS subjects would hold the party's whole memory in one message."""
    w = world(tmp_path)
    monkeypatch.setattr("collabcausal.party.vertical.request.MAX_BATCH_ROWS", 1000)
    with pytest.raises(InputError, match="over 1000 a message"):
        w.label.handle(_request(w, batch_rows=1500))
    assert spent(w.label) == 0.0 and MAX_BATCH_ROWS > 1000
