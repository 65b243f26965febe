"""A hostile analyst against the ``dp_representation`` protocol (red team of issue 9).

Every attack is a request a coordinator could send through :meth:`Party.handle` (what the gRPC
servicer calls): parameters that fail only after the charge, second releases, retries, and what the
reply carries besides the noisy rows.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from collabcausal.anchor_key import simulation_anchor_key
from collabcausal.errors import CollabCausalError, ConfigError, ProtocolError
from collabcausal.ledger import PrivacyLedger
from collabcausal.messages import Message
from collabcausal.party import Party, PartyTable
from collabcausal.party.dp_representation import release_order
from collabcausal.party.policy import PartyPolicy

KEY = simulation_anchor_key(11)
RANGES = {"a": [0.0, 10.0], "b": [-1.0, 1.0], "c": [0.0, 1.0]}


def _table(seed: int, n: int = 40) -> PartyTable:
    """Uniform covariates on RANGES, alternating treatment, normal outcome."""
    rng = np.random.default_rng(seed)
    low, high = np.array(list(RANGES.values())).T
    frame = pd.DataFrame(rng.uniform(low, high, size=(n, 3)), columns=list(RANGES))
    return PartyTable.from_frame(frame.assign(t=np.arange(n) % 2, y=rng.normal(size=n)), list(RANGES),
                                 treatment="t", outcome="y")


def _party(tmp_path, *, seed: int = 0, policy=None, name: str = "ledger") -> Party:
    ledger = PrivacyLedger(tmp_path / f"{name}-{seed}.sqlite", epsilon=100.0, delta=1e-2, dataset="d")
    return Party("p", _table(seed), ledger=ledger, anchor_key=KEY, policy=policy)


def _request(**changes) -> Message:
    params = {"study": "s", "epsilon": 1.0, "delta": 1e-6, "n_components": 3, "n_anchors": 50,
              "anchor_ranges": RANGES, "labels": True, "outcome_range": [-3.0, 3.0], **changes}
    return Message("dp_representation", {k: v for k, v in params.items() if v is not ...})


# Each of these failed AFTER the charge before the red team's fix (charge without release), or was
# silently replaced (clip_norm = 0 became sqrt(m)), or escaped the error hierarchy (ValueError,
# OverflowError). A party without a policy (simulations) runs only the operation's own checks.
BAD = {
    "n_anchors -1": _request(n_anchors=-1),
    "n_anchors 0": _request(n_anchors=0),
    "n_anchors text": _request(n_anchors="x"),
    "n_anchors float": _request(n_anchors=2.5),
    "n_anchors bool": _request(n_anchors=True),
    "range overflows": _request(anchor_ranges={**RANGES, "a": [-1e308, 1e308]}),
    "range underflows": _request(anchor_ranges={**RANGES, "a": [0.0, 5e-324]}),
    "range not a mapping": _request(anchor_ranges=[[0, 1]] * 3),
    "outcome range overflows": _request(outcome_range=[-1e308, 1e308]),
    "clip_norm 0": _request(clip_norm=0),
    "clip_norm huge": _request(clip_norm=1e200),
    "clip_norm text": _request(clip_norm="x"),
    "clip_norm bool": _request(clip_norm=True),
    "epsilon text": _request(epsilon="abc"),
    "epsilon bool": _request(epsilon=True),
    "epsilon overflows the calibration": _request(epsilon=1e300),
    "delta bool": _request(delta=True),
    "labels text": _request(labels="no"),
    "study not text": _request(study=["s"]),
    "no study": _request(study=...),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_a_bad_parameter_is_refused_in_the_hierarchy_and_never_charged(tmp_path, name):
    party = _party(tmp_path)
    with pytest.raises(CollabCausalError):
        party.handle(BAD[name])
    assert party.ledger.spent() == (0.0, 0.0) and party.ledger.history() == []


def test_every_release_is_charged_however_it_is_asked_for(tmp_path):
    # Same study again, another study, after a refusal, through a second Party on the same ledger
    # file (a second connection or a restarted server): four releases, four charges.
    party = _party(tmp_path)
    party.handle(_request())
    party.handle(_request())
    party.handle(_request(study="another"))
    with pytest.raises(CollabCausalError):
        party.handle(_request(n_components=4))
    second = Party("p", party.table, ledger=PrivacyLedger(party.ledger.path, epsilon=100.0, delta=1e-2,
                                                          dataset="d"), anchor_key=KEY)
    second.handle(_request(study="third"))
    assert party.ledger.spent() == pytest.approx((4.0, 4e-6))
    assert [c.operation for c in party.ledger.history()] == ["dp_representation"] * 4


def test_a_retry_gets_the_same_release_and_another_request_cannot_reuse_its_key(tmp_path):
    party = _party(tmp_path)
    first = party.handle(_request(request_id="r-1"))
    again = party.handle(_request(request_id="r-1"))
    np.testing.assert_array_equal(first.arrays["x_tilde"], again.arrays["x_tilde"])
    assert party.ledger.spent() == (1.0, 1e-6)
    with pytest.raises(ProtocolError):  # same key, other parameters: no free second release
        party.handle(_request(request_id="r-1", epsilon=2.0))
    assert party.ledger.spent() == (1.0, 1e-6)


def test_the_reply_carries_nothing_but_noisy_rows_and_public_facts(tmp_path):
    # Two parties with different rows: every param and the exact anchor image are identical, so
    # they are functions of the request and the key only (no clip count, no exact label, no n_treated).
    replies = [_party(tmp_path, seed=s).handle(_request()) for s in (0, 1)]
    assert replies[0].params == replies[1].params
    assert set(replies[0].params) == {"n_components", "sigma", "sensitivity", "clip_norm", "epsilon", "delta"}
    assert set(replies[0].arrays) == {"x_tilde", "a_tilde", "t_noisy", "y_noisy"}
    np.testing.assert_array_equal(replies[0].arrays["a_tilde"], replies[1].arrays["a_tilde"])
    # The labels are noised like the rows: t_noisy - (2t - 1) has sd sigma. 39 df chi-square: the
    # sample sd leaves (0.5, 2) sigma with probability < 1e-6.
    table, reply = _table(0), replies[0]
    error = reply.arrays["t_noisy"] - (2.0 * table.treatment[release_order(KEY, "s", 40)] - 1.0)
    assert 0.5 < np.std(error, ddof=1) / reply.params["sigma"] < 2.0


def test_the_release_order_is_a_keyed_permutation_shared_by_the_row_group():
    order = release_order(KEY, "s", 40)
    assert sorted(order.tolist()) == list(range(40))
    np.testing.assert_array_equal(order, release_order(KEY, "s", 40))  # same for every party of the group
    assert not np.array_equal(order, release_order(simulation_anchor_key(12), "s", 40))


@pytest.mark.parametrize("plain", ["dc_representation", "weighted_moments"])
def test_a_policy_cannot_answer_dp_representations_and_plain_row_operations(plain):
    # The DP guarantee covers the dp_representation only: the exact replies of a plain operation on
    # the same rows would undo it (docs/threat-model.md), so the combination is a configuration error.
    with pytest.raises(ConfigError, match=plain):
        PartyPolicy(["describe", "dp_representation", plain], ["a", "b", "c"])
    PartyPolicy(["describe", "aligned_ids", "align", "dp_representation", "dp_count"], ["a"])
    PartyPolicy(["dp_representation", plain], ["a"], allow_plain_with_dp=True)  # explicit opt-out only



def test_a_delta_that_allows_releasing_a_subject_in_the_clear_is_refused_uncharged(tmp_path):
    # (0, 1/n)-DP allows publishing one random subject's row exactly; the budget alone (here 0.5)
    # would let delta = 0.05 through for n = 40.
    ledger = PrivacyLedger(tmp_path / "wide.sqlite", epsilon=100.0, delta=0.5, dataset="d")
    party = Party("p", _table(0), ledger=ledger, anchor_key=KEY)
    with pytest.raises(CollabCausalError, match="1/n"):
        party.handle(_request(delta=0.05))
    assert ledger.spent() == (0.0, 0.0)
