"""The ``dp_discover_vote`` party operation: refusals before the charge, the charge, a public-shaped reply."""

import numpy as np
import pandas as pd
import pytest

from collabcausal.errors import BudgetExceededError, InputError, PolicyError
from collabcausal.ledger import PrivacyLedger
from collabcausal.messages import Message
from collabcausal.party import Party, PartyTable

PARAMS = {"columns": ["dose", "response"], "epsilon": 1.0, "rule": "krr", "study": "s1"}


def table(n=300):
    rng = np.random.default_rng(0)
    dose = rng.uniform(-3, 3, n)
    frame = pd.DataFrame({"dose": dose, "response": np.tanh(dose) + 0.2 * rng.normal(size=n)})
    return PartyTable.from_frame(frame, ["dose", "response"])


def party(tmp_path, budget=2.0):
    return Party("hospital-a", table(), ledger=PrivacyLedger(tmp_path / "ledger.sqlite", epsilon=budget, dataset="t"))


def test_reply_is_the_noisy_vote_count_and_the_ledger_is_charged_once(tmp_path):
    p = party(tmp_path)
    reply = p.handle(Message("dp_discover_vote", PARAMS))
    assert reply.params["n_groups"] == 3 and reply.params["noise_scale"] == 1.0  # 300 rows, groups of 100
    assert reply.params["direction"] in ("x->y", "y->x") and 0.5 <= reply.params["probability"] <= 1.0
    (charge,) = p.ledger.history()
    assert (charge.operation, charge.epsilon, charge.study) == ("dp_discover_vote", 1.0, "s1")
    assert charge.details == {"columns": ["dose", "response"], "rule": "krr", "group_size": 100}


def test_auto_groups_follow_n_and_epsilon_and_the_charge_records_them(tmp_path):
    # 300 rows: at eps 1 the rule asks for 8 groups, capped at 3 of 100; at eps 10 one group of all 300.
    p = party(tmp_path, budget=20.0)
    assert p.handle(Message("dp_discover_vote", {**PARAMS, "group_size": "auto"})).params["n_groups"] == 3
    reply = p.handle(Message("dp_discover_vote", {**PARAMS, "epsilon": 10.0}))
    assert reply.params["n_groups"] == 1 and reply.params["noise_scale"] == 0.1
    assert [c.details["group_size"] for c in p.ledger.history()] == [100, 300]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"epsilon": 0.0}, "epsilon of dp_discover_vote must be finite and > 0"),
        ({"epsilon": "1"}, "epsilon"),
        ({"columns": ["dose", "dose"]}, "two different covariates"),
        ({"columns": ["dose", "weight"]}, "no covariate column 'weight'"),
        ({"group_size": 10}, "below 20"),
        ({"group_size": 2.5}, "must be an integer"),
        ({"group_size": "big"}, "must be an integer or 'auto'"),
        ({"group_size": True}, "must be an integer or 'auto'"),
        ({"group_size": 400}, "make no group"),
        ({"rule": "median"}, "rule of dp_discover_vote"),
    ],
)
def test_bad_requests_are_refused_without_charging(tmp_path, change, message):
    p = party(tmp_path)
    with pytest.raises(InputError, match=message):
        p.handle(Message("dp_discover_vote", {**PARAMS, **change}))
    assert p.ledger.history() == []


def test_over_budget_and_ledgerless_requests_are_refused(tmp_path, monkeypatch):
    p = party(tmp_path, budget=1.5)
    p.handle(Message("dp_discover_vote", PARAMS))
    voted = []
    monkeypatch.setattr("collabcausal.party.discovery_vote.group_votes", lambda *a, **k: voted.append(1))
    with pytest.raises(BudgetExceededError):
        p.handle(Message("dp_discover_vote", PARAMS))
    assert voted == [] and len(p.ledger.history()) == 1
    with pytest.raises(PolicyError, match="ledger"):
        Party("h", table()).handle(Message("dp_discover_vote", PARAMS))
