"""The row order of a DP representation must not tell the analyst what the noise hides.

The LaLonde 2x2 parties hold their subjects as the data set ships them: treated first. Released in
table order, the noisy treatments ``t_noisy`` of one release gave the treatment away by a
change-point attack (cumulative sum, measured before the fix at eps = 1: |corr| 0.44-0.78 with the
true treatment over three runs, against the DP bound 0.19): the Gaussian noise protects a value at
a position, and the position itself carried the value. The party now releases its rows in a keyed
order shared by its row group (:func:`collabcausal.party.dp_representation.release_order`).
"""

from __future__ import annotations

import math

import numpy as np

from collabcausal.anchor_key import simulation_anchor_key
from collabcausal.attacks.dp_bound import correlation_bound
from collabcausal.ledger import PrivacyLedger
from collabcausal.messages import Message
from collabcausal.party.dp_representation import release_order

STUDY = "lalonde-2x2"
# The DP noise comes from OpenDP (not seedable). The empirical |corr| of the guess with the truth
# exceeds the bound on its population |corr| by more than 5 / sqrt(n) with probability below
# 2 Phi(-5) = 5.7e-7 (sd of r <= 1 / sqrt(n); either sign of r), one check: false-failure rate < 1e-6.
Z = 5.0


def change_point_guess(t_noisy: np.ndarray) -> np.ndarray:
    """Guess 'treated' for the rows before the CUSUM change point of the noisy treatments."""
    k = int(np.argmax(np.cumsum(t_noisy - t_noisy.mean()))) + 1
    return (np.arange(t_noisy.size) < k).astype(np.float64)


def test_the_change_point_attack_on_a_sorted_table_stays_under_the_dp_bound(lalonde, tmp_path):
    party = lalonde.parties["p11"]
    truth = party.table.treatment.astype(np.float64)
    assert np.all(np.diff(truth) <= 0)  # the attack's premise: the table is sorted, treated first
    party.ledger = PrivacyLedger(tmp_path / "p11.sqlite", epsilon=10.0, delta=1e-3, dataset="p11")
    try:
        reply = party.handle(Message("dp_representation", {
            "study": STUDY, "epsilon": 1.0, "delta": 1e-5, "n_components": 4, "n_anchors": 100,
            "anchor_ranges": lalonde.ranges, "labels": True, "outcome_range": [0.0, 125.0]}))
    finally:
        party.ledger = None
    guess = change_point_guess(reply.arrays["t_noisy"])
    # Row i of the release describes subject order[i] (what the evaluator, holding the key, knows).
    released_truth = truth[release_order(simulation_anchor_key(0), STUDY, truth.size)]
    corr = abs(np.corrcoef(guess, released_truth)[0, 1]) if 0 < guess.sum() < guess.size else 0.0
    bound = correlation_bound([reply.params["sensitivity"] / reply.params["sigma"]])
    assert corr <= bound + Z / math.sqrt(truth.size), (corr, bound)
