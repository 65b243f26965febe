"""Empirical DP audit of dp_representation on worst-case neighbours (red team of issue 9).

False-failure rates. Every audit's bound exceeds its claim with probability at most
1 - confidence = 1e-6 when the release is as claimed (collabcausal/attacks/dp_audit.py); the numpy
audits are seeded, so their outcome is fixed. The power checks (the bound reaches 80% of the
claimed epsilon, and a mis-calibrated release is caught): with N = 200,000 releases the error rates
have sd sqrt(p(1 - p)/N) <= 0.0011, i.e. sd <= 0.004 on mu_lower, whose expected value sits
0.03 below mu; falling to 80% of epsilon (mu_lower < 0.22 at eps = 1) is a 5-sd event (< 3e-7).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from collabcausal.anchor_key import simulation_anchor_key
from collabcausal.attacks.dp_audit import audit_gaussian_release, corner_neighbours, gdp_epsilon
from collabcausal.estimators.dp.calibration import representation_sensitivity
from collabcausal.estimators.dp.mechanisms import analytic_gaussian_sigma
from collabcausal.ledger import PrivacyLedger
from collabcausal.messages import Message
from collabcausal.party import Party, PartyTable
from collabcausal.party.dp_representation import exact_release, public_map, release_order

KEY = simulation_anchor_key(5)
RANGES = {"a": [0.0, 10.0], "b": [-1.0, 1.0], "c": [0.0, 1.0]}
OUTCOME = (-3.0, 3.0)
BACKGROUND = pd.DataFrame({"a": [1.0, 5.0, 9.0], "b": [0.0, -0.5, 0.5], "c": [0.2, 0.5, 0.9],
                           "t": [0, 1, 0], "y": [0.0, 1.0, -1.0]})
DELTA = 1e-5
N_FAST = 200_000

# (m~, C, labels): m~ = m with the default C (corners differ by exactly Delta); a binding C with
# m~ < m (clipping makes the corners differ by 2C); no labels (a party that is not the label holder).
CASES = {"full rank, default C": (3, math.sqrt(3), True), "binding C, m~ < m": (2, 1.0, True),
         "no labels": (3, math.sqrt(3), False)}


def _neighbours(n_components, clip_norm, labels):
    background = BACKGROUND if labels else BACKGROUND[list(RANGES)]
    return corner_neighbours(KEY, "s", RANGES, n_components, clip_norm, OUTCOME if labels else None, background)


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_audit_finds_no_more_than_the_claimed_epsilon_and_comes_close(case):
    n_components, clip_norm, labels = CASES[case]
    first, second = _neighbours(n_components, clip_norm, labels)
    sensitivity = representation_sensitivity(clip_norm, labels)
    audit = audit_gaussian_release(first, second, sensitivity, 1.0, DELTA, N_FAST, rng=np.random.default_rng(1))
    assert audit.distance == pytest.approx(sensitivity, rel=1e-12)  # the neighbours are worst case
    assert audit.mu_lower <= audit.claimed_mu and audit.epsilon_lower <= 1.0
    assert audit.epsilon_lower_event <= 1.0
    assert audit.epsilon_lower >= 0.8  # the audit has power: it sees most of the claimed epsilon


def test_the_audit_catches_a_release_calibrated_without_its_labels():
    # The bug the audit must catch: labels released but the sensitivity computed without them.
    first, second = _neighbours(3, math.sqrt(3), True)
    too_small = representation_sensitivity(math.sqrt(3), labels=False)
    audit = audit_gaussian_release(first, second, too_small, 1.0, DELTA, N_FAST, rng=np.random.default_rng(2))
    assert audit.mu_lower > audit.claimed_mu and audit.epsilon_lower > 1.0


def test_the_operation_releases_exactly_the_audited_rows(tmp_path):
    # What the audit noises is what the party noises: at a huge epsilon the reply is
    # exact_release in release_order up to noise of sd sigma (6 sigma: false failure < 2e-9 per entry,
    # 20 entries).
    frame = pd.concat([BACKGROUND, pd.DataFrame([{"a": 10.0, "b": 1.0, "c": 1.0, "t": 1, "y": 3.0}])],
                      ignore_index=True)
    table = PartyTable.from_frame(frame, list(RANGES), treatment="t", outcome="y", min_subjects=1)
    party = Party("p", table, anchor_key=KEY,
                  ledger=PrivacyLedger(tmp_path / "l.sqlite", epsilon=1e7, delta=1e-3, dataset="d"))
    reply = party.handle(Message("dp_representation", {
        "study": "s", "epsilon": 1e6, "delta": DELTA, "n_components": 3, "n_anchors": 10,
        "anchor_ranges": RANGES, "labels": True, "outcome_range": list(OUTCOME)}))
    released = np.column_stack([reply.arrays["x_tilde"], reply.arrays["t_noisy"], reply.arrays["y_noisy"]])
    exact = exact_release(table, public_map(KEY, "s", list(RANGES), RANGES, 3), math.sqrt(3), OUTCOME)
    assert np.max(np.abs(released - exact[release_order(KEY, "s", 4)])) <= 6 * reply.params["sigma"]
    assert reply.params["sensitivity"] == representation_sensitivity(math.sqrt(3), True)


def test_gdp_epsilon_inverts_the_analytic_calibration():
    sensitivity = representation_sensitivity(math.sqrt(3), True)
    for eps in (0.5, 1.0, 4.0):
        mu = sensitivity / analytic_gaussian_sigma(sensitivity, eps, DELTA)
        assert gdp_epsilon(mu, DELTA) == pytest.approx(eps, rel=1e-6)


@pytest.mark.slow
@pytest.mark.parametrize("epsilon", [0.5, 1.0, 2.0, 4.0, 8.0])
def test_a_large_audit_at_every_epsilon_of_the_benchmark(epsilon):
    # 2,000,000 releases per table (seeded numpy draws): the bound gets within a few percent.
    first, second = _neighbours(3, math.sqrt(3), True)
    sensitivity = representation_sensitivity(math.sqrt(3), True)
    audit = audit_gaussian_release(first, second, sensitivity, epsilon, DELTA, 2_000_000,
                                   rng=np.random.default_rng(3))
    assert audit.epsilon_lower <= epsilon and audit.epsilon_lower_event <= epsilon
    assert audit.epsilon_lower >= 0.9 * epsilon  # 8-sd margin at N = 2e6 (see the module docstring)


@pytest.mark.slow
def test_the_audit_of_the_opendp_sampler_a_party_uses():
    # OpenDP's sampler (OS entropy, not seedable; about 50 us per value, so 20,000 releases of 20
    # entries per table, ~40-90 s): false-failure rate <= 1 - confidence = 1e-6.
    first, second = _neighbours(3, math.sqrt(3), True)
    sensitivity = representation_sensitivity(math.sqrt(3), True)
    audit = audit_gaussian_release(first, second, sensitivity, 1.0, DELTA, 20_000, rng=None)
    assert audit.epsilon_lower <= 1.0 and audit.mu_lower <= audit.claimed_mu
