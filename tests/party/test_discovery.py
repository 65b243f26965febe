"""The ``dp_discover`` party operation: policy, ledger charged before computing, reply."""

import numpy as np
import pandas as pd
import pytest

from collabcausal.errors import BudgetExceededError, InputError, NoAnswerError, PolicyError
from collabcausal.messages import Message
from collabcausal.party import Party, PartyTable
from collabcausal.party.discovery import DiscoveryRequest, discover
from collabcausal.party.ledger import PrivacyLedger
from collabcausal.party.policy import PartyPolicy

PARAMS = {
    "columns": ["dose", "response"],
    "epsilon": 1.0,
    "x_bounds": [-3.0, 3.0],
    "y_bounds": [-1.5, 1.5],
    "study": "s1",
}


def table(n=300):
    rng = np.random.default_rng(0)
    dose = rng.uniform(-3, 3, n)
    frame = pd.DataFrame(
        {"dose": dose, "response": np.tanh(dose) + 0.2 * rng.normal(size=n), "age": rng.normal(size=n)}
    )
    return PartyTable.from_frame(frame, ["dose", "response", "age"])


def party(tmp_path, budget=2.0, policy=None):
    ledger = PrivacyLedger(tmp_path / "ledger.sqlite", epsilon=budget, dataset="t")
    return Party("hospital-a", table(), ledger=ledger, policy=policy)


def test_reply_carries_a_private_direction_and_the_ledger_is_charged(tmp_path):
    p = party(tmp_path)
    reply = p.handle(Message("dp_discover", PARAMS))
    assert reply.params["direction"] in ("x->y", "y->x")
    assert reply.params["score"] == "hsic" and reply.params["protect"] == "both"
    assert 0.5 <= reply.params["agreement"] <= 1.0
    (charge,) = p.ledger.history()
    assert (charge.operation, charge.epsilon, charge.study) == ("dp_discover", 1.0, "s1")
    assert charge.details["columns"] == ["dose", "response"]


def test_over_budget_request_is_refused_before_anything_is_computed(tmp_path, monkeypatch):
    p = party(tmp_path, budget=1.5)
    p.handle(Message("dp_discover", PARAMS))
    fitted = []
    monkeypatch.setattr("collabcausal.party.discovery.AdditiveNoiseModel.fit", lambda *a: fitted.append(1))
    with pytest.raises(BudgetExceededError):
        p.handle(Message("dp_discover", PARAMS))
    assert fitted == [] and len(p.ledger.history()) == 1


def test_party_without_ledger_refuses(tmp_path):
    with pytest.raises(PolicyError, match="ledger"):
        Party("h", table()).handle(Message("dp_discover", PARAMS))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"protect": "test"}, "protect every row"),
        ({"score": "spearman", "protect": "train", "delta": 1e-6}, "protect every row"),
    ],
)
def test_partially_protected_releases_are_refused_by_the_party(tmp_path, change, message):
    p = party(tmp_path)
    with pytest.raises(PolicyError, match=message):
        p.handle(Message("dp_discover", {**PARAMS, **change}))
    assert p.ledger.history() == []


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"epsilon": 0.0}, "epsilon must be a finite number > 0"),
        ({"columns": ["dose"]}, "two different covariates"),
        ({"columns": ["dose", "weight"]}, "no covariate column 'weight'"),
        ({"y_bounds": None}, "needs public bounds"),
        ({"score": "variance"}, "no private release"),
    ],
)
def test_bad_requests_are_refused_without_charging(tmp_path, change, message):
    p = party(tmp_path)
    with pytest.raises(InputError, match=message):
        p.handle(Message("dp_discover", {**PARAMS, **change}))
    assert p.ledger.history() == []


def test_policy_restricting_columns_applies(tmp_path):
    policy = PartyPolicy(operations=["dp_discover"], columns=["dose", "response", "age"], min_subjects=10)
    p = party(tmp_path, policy=policy)
    assert p.handle(Message("dp_discover", PARAMS)).params["answered"]
    strict = PartyPolicy(operations=["dp_count"], columns=["dose", "response", "age"])
    with pytest.raises(PolicyError, match="does not allow the operation 'dp_discover'"):
        party(tmp_path, policy=strict).handle(Message("dp_discover", PARAMS))


def test_no_answer_from_propose_test_release_is_an_error_after_charging(tmp_path):
    ledger = PrivacyLedger(tmp_path / "l.sqlite", epsilon=5.0, delta=1e-3)
    rng = np.random.default_rng(1)
    x = rng.normal(size=60)
    request = DiscoveryRequest(epsilon=0.5, score="iqr", protect="test", delta=1e-6)
    with pytest.raises(NoAnswerError, match="declined"):
        discover(ledger, x, x**2 + 0.1 * rng.normal(size=60), request)
    assert ledger.spent() == pytest.approx((0.5, 1e-6))


def test_constant_column_is_refused_before_charging(tmp_path):
    ledger = PrivacyLedger(tmp_path / "l.sqlite", epsilon=5.0)
    with pytest.raises(InputError, match="constant"):
        discover(ledger, np.arange(50.0), np.ones(50), DiscoveryRequest(epsilon=1.0, protect="test"))
    assert ledger.history() == []
