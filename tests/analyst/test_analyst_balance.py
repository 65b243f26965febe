"""Federated balance from DP moments (dp_weighted_moments) over an in-process grid.

False-failure rates: at both epsilons (1e6 and 2) the check allows 8 first-order sds of the OpenDP
noise per covariate (the delta method is checked against a seeded Monte Carlo in
tests/estimators/test_balance.py to 5%): a two-sided normal tail of 8 / 1.05 sd is 2.6e-14 per
covariate, 4 covariates: 1.0e-13 per run. The other tests check sigmas, shapes and rounds only.
"""

from __future__ import annotations

import tracemalloc

import numpy as np
import pandas as pd
import pytest

from collabcausal.analyst.balance import DPBalance, federated_smd, federated_smds
from collabcausal.analyst.replies import weight_sums
from collabcausal.errors import StudyFailedError
from collabcausal.ledger import PrivacyLedger
from collabcausal.messages import Message
from collabcausal.party import Party, PartyTable
from collabcausal.protocol.inprocess import InProcessGrid

N = 1000
BOUNDS = {"a": (-3.0, 3.0), "b": (0.0, 10.0), "c": (-3.0, 3.0), "d": (0.0, 1.0)}


def _grid(tmp_path, *extra: Party):
    rng = np.random.default_rng(1)
    # Inside the public bounds: the DP moments are those of the clipped covariates.
    frame = pd.DataFrame({"a": np.clip(rng.normal(size=N), -3, 3), "b": rng.uniform(0, 10, N),
                          "c": np.clip(rng.normal(size=N), -3, 3), "d": rng.integers(0, 2, N).astype(float)})
    parties = []
    for name, cols in (("p1", ["a", "b"]), ("p2", ["c", "d"])):
        ledger = PrivacyLedger(tmp_path / f"{name}.sqlite", epsilon=1e7, delta=1e-3, dataset="d")
        parties.append(Party(name, PartyTable.from_frame(frame, cols), ledger=ledger))
    t = (rng.random(N) < 0.4).astype(np.int8)
    weights = rng.uniform(0.5, 2.0, N)
    return InProcessGrid([*parties, *extra]), t, weights


def _dp(epsilon):
    return DPBalance(epsilon, 1e-6, BOUNDS, {"p1": ["a", "b"], "p2": ["c", "d"]})


@pytest.mark.parametrize(("epsilon", "tolerance_sds"), [(1e6, 8.0), (2.0, 8.0)])
def test_dp_smd_is_the_exact_smd_up_to_its_stated_noise(tmp_path, epsilon, tolerance_sds):
    grid, t, weights = _grid(tmp_path)
    rows = [np.arange(N)]
    exact = federated_smd(grid, [["p1", "p2"]], rows, t, weights)
    assert exact.noise_sd is None
    result = federated_smd(grid, [["p1", "p2"]], rows, t, weights, dp=_dp(epsilon))
    assert result.covariates == exact.covariates == ("p1:a", "p1:b", "p2:c", "p2:d")
    assert (result.noise_sd > 0).all()
    assert np.all(np.abs(result.smd - exact.smd) <= tolerance_sds * result.noise_sd)


def test_a_row_count_asks_for_every_row_without_sending_positions(tmp_path, monkeypatch):
    grid, t, weights = _grid(tmp_path)
    sent: list[Message] = []
    send = grid.send_and_receive

    def recording(messages, timeout=None):
        sent.extend(messages.values())
        return send(messages, timeout=timeout)

    monkeypatch.setattr(grid, "send_and_receive", recording)
    counted = federated_smd(grid, [["p1", "p2"]], [N], t, weights)
    listed = federated_smd(grid, [["p1", "p2"]], [np.arange(N)], t, weights)
    assert ["rows" in m.arrays for m in sent] == [False, False, True, True]
    np.testing.assert_array_equal(counted.smd, listed.smd)
    # the analyst's expected sigma of a DP reply is that of every row once
    assert (federated_smd(grid, [["p1", "p2"]], [N], t, weights, dp=_dp(1e6)).noise_sd > 0).all()


@pytest.mark.parametrize(
    ("sigma", "message"),
    [
        (lambda s: None, "without a finite sigma"),
        # red team: an evil party understating its noise made the reported SMD noise sd, and so the
        # diagnosis's apparent precision, wrong; sigma follows from the analyst's own request
        (lambda s: s / 100, "whose sigma .* is not the one its request implies"),
    ],
)
def test_a_dp_reply_with_a_wrong_sigma_fails_the_study_naming_the_party(tmp_path, sigma, message):
    grid, t, weights = _grid(tmp_path)

    class Tampered(InProcessGrid):
        def send_and_receive(self, requests, *, timeout=None):
            replies = super().send_and_receive(requests, timeout=timeout)
            reply = replies["p2"]
            replies["p2"] = Message(reply.operation, {**reply.params, "sigma": sigma(reply.params["sigma"])},
                                    reply.arrays)
            return replies

    tampered = Tampered(grid._parties.values())
    with pytest.raises(StudyFailedError, match=f"party 'p2' sent a dp_weighted_moments reply {message}"):
        federated_smd(tampered, [["p1", "p2"]], [np.arange(N)], t, weights, dp=_dp(1.0))


def test_the_analyst_computes_each_partys_sigma_from_its_own_request(tmp_path):
    grid, t, weights = _grid(tmp_path)
    rows = np.r_[np.arange(N), np.zeros(5, dtype=np.int64)]  # subject 0 six times: its total weight counts
    w = np.r_[weights, np.full(5, 2.0)]
    replies = grid.send_and_receive({"p1": Message("dp_weighted_moments", {"study": "s", **_dp(1.0).params("p1")},
                                                   {"arms": np.r_[t, np.zeros(5, np.int8)], "weights": w,
                                                    "rows": rows})})
    from collabcausal.analyst.balance import expected_sigma

    assert expected_sigma(_dp(1.0), "p1", w, rows) == replies["p1"].params["sigma"]



def test_a_study_with_dp_balance_refuses_a_delta_above_one_over_n_before_any_request(tmp_path):
    from collabcausal.analyst.balance import DPBalanceSpec
    from collabcausal.analyst.dcqe import DCQEPlan, run_dcqe
    from collabcausal.anchor_key import simulation_anchor_key
    from collabcausal.errors import InputError

    rng = np.random.default_rng(2)
    frame = pd.DataFrame(rng.uniform(0, 1, (N, 4)), columns=list("abcd")).assign(
        t=rng.integers(0, 2, N), y=rng.normal(size=N)
    )
    parties = [
        Party(name, PartyTable.from_frame(frame, cols, treatment="t", outcome="y"), anchor_key=simulation_anchor_key(0))
        for name, cols in (("p1", ["a", "b"]), ("p2", ["c", "d"]))
    ]
    asked = []

    class Recording(InProcessGrid):
        def send_and_receive(self, requests, *, timeout=None):
            asked.extend(m.operation for m in requests.values())
            return super().send_and_receive(requests, timeout=timeout)

    def plan(ranges, delta):
        return DCQEPlan([["p1", "p2"]], ranges, n_anchors=50, party_components=1,
                        dp_balance=DPBalanceSpec(1.0, delta))

    with pytest.raises(InputError, match=r"\[balance\] delta 0.001 is not below 1/n = 1/1000 of party 'p1'"):
        run_dcqe(Recording(parties), plan(BOUNDS, 1e-3))
    narrow = {k: v for k, v in BOUNDS.items() if k != "d"}
    with pytest.raises(InputError, match="covariate 'd' of party 'p2' has no public range"):
        run_dcqe(Recording(parties), plan(narrow, 1e-6))
    assert set(asked) == {"describe"}  # refused after describe, before any representation or moment


def test_several_samples_take_one_round_exact_and_one_charged_round_each_with_dp(tmp_path, monkeypatch):
    grid, t, weights = _grid(tmp_path)
    samples = [weights, np.ones(N), weights[::-1].copy()]
    rounds: list[dict[str, Message]] = []
    send = grid.send_and_receive

    def recording(messages, timeout=None):
        rounds.append(messages)
        return send(messages, timeout=timeout)

    halves = [np.arange(N // 2), np.arange(N // 2, N)]
    alone = [federated_smd(grid, [["p1"], ["p2"]], halves, t, w).smd for w in samples]
    monkeypatch.setattr(grid, "send_and_receive", recording)
    together = federated_smds(grid, [["p1"], ["p2"]], halves, t, samples)
    assert len(rounds) == 1 and rounds[0]["p1"].array("weights").shape == (3, N // 2)
    for one, many in zip(alone, together, strict=True):
        np.testing.assert_allclose(many.smd, one, rtol=1e-12)
    rounds.clear()
    noisy = federated_smds(grid, [["p1", "p2"]], [N], t, samples[:2], dp=_dp(1e6))
    assert [m["p1"].array("weights").shape for m in rounds] == [(N,), (N,)]  # each release charged on its own
    assert len(noisy) == 2 and all((s.noise_sd > 0).all() for s in noisy)
    assert federated_smds(grid, [["p1", "p2"]], [N], t, []) == []


def test_row_groups_whose_parties_send_different_column_counts_fail_the_study(tmp_path):
    narrow = Party("p3", PartyTable.from_frame(pd.DataFrame({"c": np.linspace(0, 1, N)}), ["c"]))
    grid, t, weights = _grid(tmp_path, narrow)
    halves = [np.arange(N // 2), np.arange(N // 2, N)]
    with pytest.raises(StudyFailedError, match="parties p3 sent moments of 1 covariates, the first row group 2"):
        federated_smds(grid, [["p1"], ["p3"]], halves, t, [weights, np.ones(N)])


def test_the_weight_sums_a_reply_is_checked_against_take_no_temporary_of_the_samples_size():
    """At 10^7 subjects and 3 samples, the sums taken as one (6, n) array added 0.48 GB to the study's peak."""
    rng = np.random.default_rng(2)
    n = 1_000_000
    arms, weights = (rng.random(n) < 0.3).astype(np.int8), rng.uniform(0.0, 2.0, (3, n))
    tracemalloc.start()
    try:
        sum_w, sum_w2 = weight_sums(arms, weights)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 * 2**20  # blocks of 65,536 rows; the samples are 24 MB
    treated = arms == 1
    np.testing.assert_allclose(sum_w[:, 1], weights[:, treated].sum(axis=1), rtol=1e-12)
    np.testing.assert_allclose(sum_w2[:, 0], (weights[:, ~treated] ** 2).sum(axis=1), rtol=1e-12)


def test_a_k_by_n_array_of_samples_is_sent_without_a_stacked_copy(tmp_path, monkeypatch):
    grid, t, weights = _grid(tmp_path)
    samples = np.stack([weights, np.ones(N)])
    sent: list[dict[str, Message]] = []
    send = grid.send_and_receive
    monkeypatch.setattr(grid, "send_and_receive", lambda m, timeout=None: sent.append(m) or send(m, timeout=timeout))
    federated_smds(grid, [["p1", "p2"]], [N], t, samples)
    assert np.shares_memory(sent[0]["p1"].array("weights"), samples)
