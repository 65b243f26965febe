"""Privacy audits through Party.handle: every party DP operation on its worst-case neighbours.

False-failure rate of the audit tests: each asserts that a Clopper-Pearson lower bound at
confidence 1 - 1e-6 does not exceed the claimed epsilon. If the operation is epsilon-DP under
substitution, one such test fails with probability at most 1e-6 (the threshold is chosen on an
independent calibration half; see :mod:`collabcausal.attacks.privacy_audit`), so the 10 fast ones together
fail by chance with probability below 1e-5 < 1e-4. The noise is OpenDP's (unseeded by design).
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from collabcausal.attacks.privacy_audit import (
    ADD_REMOVE,
    SUBSTITUTION,
    audit,
    clopper_pearson,
    distinguish,
    epsilon_lower_bound,
    party_cases,
)
from collabcausal.messages import Message

CONFIDENCE = 1.0 - 1e-6
CASES = {case.name: case for case in party_cases()}
SLOW_CASES = ("dp_discover margin",)  # about 5 s at 2000 releases; its planted bug is caught in under 2 s below
FAST = [pytest.param(name, marks=pytest.mark.slow) if name in SLOW_CASES else name for name in CASES]


def test_clopper_pearson_matches_its_closed_forms():
    # k = 0: upper = 1 - alpha^(1/n); k = n: lower = alpha^(1/n).
    assert clopper_pearson(0, 50, 0.01) == pytest.approx((0.0, 1 - 0.01 ** (1 / 50)))
    assert clopper_pearson(50, 50, 0.01) == pytest.approx((0.01 ** (1 / 50), 1.0))
    lo, hi = clopper_pearson(500, 1000, 1e-3)
    assert lo < 0.5 < hi and hi - lo < 0.11


def test_the_attack_finds_twice_the_claim_when_noise_is_calibrated_for_half_the_change():
    # Laplace(1) noise and a shift of 2 (a sensitivity-1 calibration facing a change of 2): eps = 2.
    rng = np.random.default_rng(0)
    first, second = rng.laplace(0, 1, (2000, 1)), rng.laplace(2, 1, (2000, 1))
    eps_hat, eps_lower, _, _ = distinguish(first, second, CONFIDENCE)
    assert 1.0 < eps_lower <= eps_hat
    same = distinguish(rng.laplace(0, 1, (2000, 1)), rng.laplace(0, 1, (2000, 1)), CONFIDENCE)
    assert same[1] == 0.0
    assert epsilon_lower_bound(0, 0, 100, CONFIDENCE) == 0.0


@pytest.mark.parametrize("name", FAST)
def test_no_party_dp_operation_is_distinguishable_beyond_its_epsilon_under_substitution(name):
    result = audit(CASES[name], SUBSTITUTION, 2000, confidence=CONFIDENCE)
    assert result.epsilon_lower <= result.claimed_epsilon, result


@pytest.mark.slow
@pytest.mark.parametrize("name", list(CASES))
def test_full_audit_20000_releases_per_neighbour(name):
    result = audit(CASES[name], SUBSTITUTION, 20000, confidence=CONFIDENCE)
    assert result.epsilon_lower <= result.claimed_epsilon, result


def test_discover_is_not_dp_under_add_remove_since_its_reply_carries_n():
    # The other relation: removing a row changes n_train, which the reply states exactly.
    result = audit(CASES["dp_discover hsic"], ADD_REMOVE, 200, confidence=CONFIDENCE)
    assert math.isinf(result.epsilon_hat) and result.epsilon_lower > result.claimed_epsilon


def test_a_vote_release_with_a_hundredth_of_its_noise_is_caught(monkeypatch):
    # The planted bug: noise for a sensitivity of 0.01 instead of 1. On the audit's neighbours the count
    # reaches 2 (both groups vote) only on the substituted side, with probability about 0.13; with the
    # bug the event "released count >= 1.75" almost never happens on the other side, and the audit's
    # lower bound at confidence 1 - 1e-6 is about 1.8 > 1.
    from collabcausal.party import discovery_vote

    real = discovery_vote.release_votes
    monkeypatch.setattr(discovery_vote, "release_votes", lambda votes, epsilon: real(votes, 100.0 * epsilon))
    result = audit(CASES["dp_discover_vote"], SUBSTITUTION, 2000, confidence=CONFIDENCE)
    assert result.epsilon_lower > result.claimed_epsilon, result


def test_a_margin_release_with_a_thousandth_of_its_noise_is_caught(monkeypatch):
    # The planted bug: dp_discover release = "margin" with Laplace noise for 1/1000 of the sensitivity (scale 0.008
    # instead of 8 at eps 1: at n = 40 the training-split bound 8 / (n_train lam^1.5 h_r) = 4 per score dominates).
    # On the audit's neighbours the exact margin is about -0.095 or +0.095 (row 0 in the test split, probability
    # 1/2; 4 (m-1)/m^2 = 0.19 apart) and about 0 otherwise, so "released margin >= 0.05" almost never happens on the
    # first neighbour and about half the time on the second: measured lower bound about 2 > 1 with 600 releases.
    # A bug of "half the noise" is invisible on any neighbours: no pair of data sets moves this margin by more
    # than a small share of the training bound (docs/causal-discovery.md, "A margin-only release").
    from collabcausal.estimators.discovery import private_scores

    real = private_scores.laplace
    monkeypatch.setattr(private_scores, "laplace", lambda values, sensitivity, epsilon, rng=None: real(
        values, sensitivity / 1000, epsilon, rng=rng))
    result = audit(CASES["dp_discover margin"], SUBSTITUTION, 600, confidence=CONFIDENCE)
    assert result.epsilon_lower > result.claimed_epsilon, result


@pytest.mark.slow
def test_the_vote_with_auto_groups_is_no_more_distinguishable_than_its_epsilon():
    # group_size "auto" (a public function of n and eps): on the audit's 40 rows at eps 1 one group of 40,
    # whose single vote (0, 1/2 or 1) the substituted row can move by up to 1. Fails by chance with
    # probability at most 1e-6 (module docstring).
    case = CASES["dp_discover_vote"]
    request = Message(case.request.operation, {**case.request.params, "group_size": "auto"})
    result = audit(replace(case, name="dp_discover_vote auto", request=request), SUBSTITUTION, 2000,
                   confidence=CONFIDENCE)
    assert result.epsilon_lower <= result.claimed_epsilon, result
