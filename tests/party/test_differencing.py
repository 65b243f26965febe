"""Differencing: two (or more) weighted requests whose difference singles out a subject are refused."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import collabcausal.party  # noqa: F401  (registers the operations)
from collabcausal.errors import PolicyError
from collabcausal.messages import Message
from collabcausal.party import Party, PartyTable
from collabcausal.party.differencing import differing_subjects, isolated_subjects
from collabcausal.party.policy import PartyPolicy
from collabcausal.party.request_limits import RequestLimits

N = 60
K = 7  # the targeted subject, in arm 1
ARMS = np.arange(N) % 2


def _party(*, policy: bool = True, max_moment_requests: int = 32) -> Party:
    rng = np.random.default_rng(3)
    frame = pd.DataFrame({"a": rng.normal(size=N), "b": rng.normal(size=N)})
    rules = PartyPolicy(
        ("weighted_moments", "align"),
        ["a", "b"],
        min_subjects=10,
        limits=RequestLimits(max_moment_requests=max_moment_requests),
    )
    return Party("h", PartyTable.from_frame(frame, ["a", "b"], min_subjects=1), policy=rules if policy else None)


def _ask(party: Party, weights, arms=None, rows=None) -> Message:
    weights = np.asarray(weights, float)
    arrays = {"arms": ARMS[: weights.shape[-1]] if arms is None else arms, "weights": weights}
    if rows is not None:
        arrays = {**arrays, "rows": rows}
    return party.handle(Message("weighted_moments", {"study": "s"}, arrays))


def _without_k() -> np.ndarray:
    w = np.ones(N)
    w[K] = 0.0
    return w


def test_the_attack_is_real_without_the_policy():
    party = _party(policy=False)
    difference = _ask(party, np.ones(N)).array("sum_wx")[1] - _ask(party, _without_k()).array("sum_wx")[1]
    np.testing.assert_allclose(difference, party.table.covariates[K], rtol=1e-9)


def _refused(party: Party, weights, **kwargs) -> str:
    with pytest.raises(PolicyError, match="below its min_subjects of 10") as info:
        _ask(party, weights, **kwargs)
    assert "\n" not in str(info.value)
    return str(info.value)


def test_two_requests_that_differ_in_one_subject_are_refused():
    party = _party()
    _ask(party, np.ones(N))
    assert "on only 1 subjects" in _refused(party, _without_k())


def test_two_resamples_that_differ_in_one_subject_are_refused():
    party = _party()
    rows = np.arange(N)
    _ask(party, np.ones(N), rows=rows)
    _refused(party, np.ones(N - 1), arms=np.delete(ARMS, K), rows=np.delete(rows, K))


@pytest.mark.parametrize("change", [1e-12, 0.5, 5.0])
def test_changing_one_subjects_weight_by_any_amount_is_refused(change):
    party = _party()
    _ask(party, np.ones(N))
    w = np.ones(N)
    w[K] += change
    _refused(party, w)


def test_a_scaled_request_plus_one_subject_is_refused():
    party = _party()
    w = np.random.default_rng(1).uniform(1, 2, N)
    w[K] = 0.0
    _ask(party, w)
    scaled = 3.7 * w
    scaled[K] = 1.0
    assert "scaled" in _refused(party, scaled)


def test_moving_one_subject_to_the_other_arm_is_refused():
    party = _party()
    _ask(party, np.ones(N))
    flipped = ARMS.copy()
    flipped[K] = 1 - flipped[K]
    assert "arm" in _refused(party, np.ones(N), arms=flipped)


def test_a_combination_of_two_earlier_requests_plus_one_subject_is_refused():
    party = _party()
    first, second = np.zeros(N), np.zeros(N)
    first[: N // 2], second[N // 2 :] = 1.0, 1.0
    first[K] = 0.0
    _ask(party, first)
    _ask(party, second)
    combined = 2.0 * first + 0.5 * second
    combined[K] = 1.0
    assert "combination of earlier requests" in _refused(party, combined)


def test_three_requests_hiding_one_subject_behind_a_decoy_spread_are_refused():
    """Red team: R1 = 1, R2 = 1 + e_k + d, R3 = 1 + e_k - d with d = 0.5 on 10 other subjects of k's arm.
    Each pair differs on 11 subjects and R3's least-squares residual on (R1, R2) spreads over 11, so rules
    1 and 2 answered all three, and (R2 + R3) / 2 - R1 returned subject k's covariates exactly (1e-15).
    Rule 3: no subject's indicator may lie in the span of the answered requests."""
    party = _party()
    decoy = np.zeros(N)
    decoy[[j for j in range(N) if ARMS[j] == ARMS[K] and j != K][:10]] = 0.5
    spike = np.eye(N)[K]
    _ask(party, np.ones(N))
    _ask(party, np.ones(N) + spike + decoy)
    message = _refused(party, np.ones(N) + spike - decoy)
    assert "isolates subject" in message


def test_a_full_set_of_independent_requests_on_a_small_arm_is_refused():
    # As many independent exact sums as an arm has subjects solve for every subject's covariates.
    party = _party(max_moment_requests=64)
    rng = np.random.default_rng(1)
    with pytest.raises(PolicyError, match="isolates subject"):
        for _ in range(N // 2 + 1):
            _ask(party, rng.uniform(0.5, 1.5, N))


def test_honest_balance_diagnostics_are_answered():
    party = _party()
    rng = np.random.default_rng(0)
    arms = ARMS
    e = rng.uniform(0.2, 0.8, N)
    ipw = np.where(arms == 1, 1 / e, 1 / (1 - e))
    att = np.where(arms == 1, 1.0, e / (1 - e))
    matches = rng.integers(0, 3, N).astype(float)
    matches[arms == 1] = 1.0
    for weights in (np.ones(N), ipw, att, matches, ipw, np.ones(N)):
        assert _ask(party, weights, arms=arms).array("sum_w").shape == (2,)
    boot = rng.integers(0, N, N)
    assert _ask(party, np.ones(N), arms=arms[boot], rows=boot).array("sum_w").shape == (2,)


def test_weighted_requests_are_capped_per_party_process():
    party = _party(max_moment_requests=2)
    _ask(party, np.ones(N))
    _ask(party, np.ones(N))
    with pytest.raises(PolicyError, match="answered 2 'weighted_moments' requests, its max_moment_requests"):
        _ask(party, np.ones(N))


def test_align_after_a_weighted_request_is_refused():
    party = _party()
    _ask(party, np.ones(N))
    with pytest.raises(PolicyError, match="refuses 'align' after answering 1 weighted requests"):
        party.handle(Message("align", {}, {"order": np.arange(N - 1)}))


def test_differing_subjects_counts_non_negligible_entries_only():
    assert differing_subjects(np.zeros(5), 0.01) == 0
    assert differing_subjects(np.array([1.0, 1e-3, -0.5, 0.0]), 0.01) == 2


def test_isolated_subjects_skips_unweighed_rows_without_changing_the_answer():
    rng = np.random.default_rng(5)
    requests = np.where(ARMS[:, None] == 1, rng.uniform(0.5, 1.5, (N, 3)), 0.0)  # arm 0's rows weigh nothing
    requests[:, 2] = requests[:, 0] + np.eye(N)[K]  # the third request isolates subject K
    u, singular, _ = np.linalg.svd(requests, full_matrices=False)  # the rule on every row, zero rows included
    leverage = (u[:, singular > singular[0] * N * np.finfo(np.float64).eps] ** 2).sum(axis=1)
    expected = np.flatnonzero(1.0 - leverage <= 1e-4)
    np.testing.assert_array_equal(isolated_subjects(requests, 1e-2), expected)
    np.testing.assert_array_equal(expected, [K])


def test_samples_stacked_in_one_request_are_checked_against_each_other_and_nothing_is_admitted_on_refusal():
    """k samples in one (k, rows) request are admitted in order, as k requests: w and w - e_K together are refused."""
    party = _party()
    _refused(party, np.stack([np.ones(N), _without_k()]))
    assert party.requests.weighted_count(party.study) == 0  # the first sample was not kept either
    before = _ask(party, np.ones(N))  # nor answered: the same weights alone still are
    assert before.array("sum_w").shape == (2,)
    _refused(party, np.stack([_without_k() * 2.0, np.ones(N)]))  # the later sample against the history too
    assert party.requests.weighted_count(party.study) == 1


def test_stacked_samples_count_one_request_each_against_the_cap():
    party = _party(max_moment_requests=3)
    rng = np.random.default_rng(5)
    samples = np.stack([np.ones(N), rng.uniform(0.5, 1.5, N)])
    reply = _ask(party, samples)
    assert reply.array("sum_wx").shape == (2, 2, 2)  # (samples, arms, covariates)
    with pytest.raises(PolicyError, match="answered 3 'weighted_moments' requests, its max_moment_requests"):
        _ask(party, np.stack([np.ones(N), np.ones(N)]))  # the first sample is the third: the second goes over
    assert party.requests.weighted_count(party.study) == 2


@pytest.mark.parametrize("shape", [(0, N), (2, N - 1), (2, N, 1), (17, N)])  # 17: over MAX_SAMPLES
def test_malformed_stacked_weights_are_refused_naming_the_shape(shape):
    with pytest.raises(PolicyError, match=rf"weights has shape \({shape[0]}, {shape[1]}"):
        _ask(_party(), np.ones(shape), arms=ARMS)
