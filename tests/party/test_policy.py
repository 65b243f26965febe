"""A party's policy refuses whatever it does not allow, in process as over gRPC."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import collabcausal.party  # noqa: F401  (registers the operations)
from collabcausal.errors import ConfigError, PolicyError
from collabcausal.messages import Message
from collabcausal.party import Party, PartyTable
from collabcausal.party.policy import PartyPolicy

OPS = ("describe", "weighted_moments")


def _party(policy: PartyPolicy, n: int = 40, columns=("a", "b")) -> Party:
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"a": rng.normal(size=n), "b": rng.normal(size=n), "c": rng.normal(size=n)})
    return Party("h", PartyTable.from_frame(frame, list(columns), min_subjects=1), policy=policy)


def _moments(arms, weights) -> Message:
    return Message("weighted_moments", {}, {"arms": np.asarray(arms), "weights": np.asarray(weights, dtype=float)})


def test_allowed_operation_runs():
    party = _party(PartyPolicy(OPS, ["a", "b"], min_subjects=10))
    assert party.handle(Message("describe")).params["n_subjects"] == 40


def test_operation_not_listed_is_refused():
    party = _party(PartyPolicy(["describe"], ["a", "b"]))
    with pytest.raises(PolicyError, match="does not allow the operation 'weighted_moments'"):
        party.handle(_moments(np.arange(40) % 2, np.ones(40)))


def test_table_with_a_column_outside_the_policy_is_refused():
    party = _party(PartyPolicy(OPS, ["a"]))
    with pytest.raises(PolicyError, match="does not allow the column 'b'"):
        party.handle(Message("describe"))


def test_request_naming_a_forbidden_column_is_refused():
    party = _party(PartyPolicy(OPS, ["a", "b"]))
    with pytest.raises(PolicyError, match="column 'c'"):
        party.handle(Message("describe", {"columns": ["a", "c"]}))


def test_table_below_the_minimum_subjects_is_refused():
    party = _party(PartyPolicy(OPS, ["a", "b"], min_subjects=50))
    with pytest.raises(PolicyError, match="cover only 40 subjects, below its minimum of 50"):
        party.handle(Message("describe"))


def test_one_hot_weights_that_would_reveal_a_subject_are_refused():
    party = _party(PartyPolicy(OPS, ["a", "b"], min_subjects=5))
    weights = np.zeros(40)
    weights[[0, 1]] = 1.0
    with pytest.raises(PolicyError, match="arm 0 of the weights cover only 1 subjects"):
        party.handle(_moments(np.arange(40) % 2, weights))
    reply = party.handle(_moments(np.arange(40) % 2, np.ones(40)))
    assert reply.operation == "weighted_moments"


def test_resample_with_too_few_distinct_subjects_is_refused():
    party = _party(PartyPolicy(OPS, ["a", "b"], min_subjects=5))
    rows = np.array([3, 3, 3, 4, 4] * 8, dtype=np.int64)
    with pytest.raises(PolicyError, match="the requested rows cover only 2 subjects"):
        party.handle(Message("weighted_moments", {}, {"rows": rows, "arms": np.arange(40) % 2, "weights": np.ones(40)}))


def test_dp_operation_without_a_ledger_is_refused():
    party = _party(PartyPolicy([*OPS, "dp_count"], ["a", "b"]))
    with pytest.raises(PolicyError, match="no privacy budget for 'dp_count'"):
        party.handle(Message("dp_count", {"epsilon": 1.0}))


@pytest.mark.parametrize("bad", [0, -3, 2.5, True])
def test_min_subjects_must_be_a_positive_integer(bad):
    with pytest.raises(ConfigError, match="min_subjects"):
        PartyPolicy(OPS, ["a"], min_subjects=bad)
