"""Every attack of the suite, run on DP representations, stays within the correlation the guarantee allows."""

from __future__ import annotations

import math

import numpy as np
import pytest

from collabcausal.anchor_key import simulation_anchor_key
from collabcausal.attacks.collusion import colluding_reconstruction
from collabcausal.attacks.dp_bound import correlation_bound
from collabcausal.attacks.many_requests import ica_on_requests
from collabcausal.attacks.representation_ica import ica_on_representation
from collabcausal.attacks.secret_anchor import secret_anchor_attack
from collabcausal.ledger import PrivacyLedger
from collabcausal.messages import Message
from collabcausal.party.dp_representation import release_order

EPSILON, DELTA = 1.0, 1e-5
# The DP noise comes from the OpenDP sampler (not seedable), so the scores are random. Each
# empirical |corr| of a (true, guessed) column pair exceeds the bound on its population |corr| by
# more than 5.5 / sqrt(n) with probability below 2 Phi(-5.5) = 3.8e-8 (sd of r <= 1 / sqrt(n); either
# sign of r can leave the band); 5 attacks x 2 parties x 16 pairs = 160 pairs: false-failure rate
# < 6.1e-6 (at Z = 5 it was 160 x 5.7e-7 = 9.2e-5).
Z = 5.5

ATTACKS = {
    "b-ica": lambda x, a, public, anchor: secret_anchor_attack(a, x, public, method="ica"),
    "b-moments": lambda x, a, public, anchor: secret_anchor_attack(a, x, public, method="moments"),
    "c": lambda x, a, public, anchor: ica_on_representation(x, public),
    "d": lambda x, a, public, anchor: ica_on_requests([(None, x)], public),
    "e": lambda x, a, public, anchor: colluding_reconstruction(anchor, a, x, public),
}


@pytest.fixture(scope="module")
def dp_releases(lalonde, tmp_path_factory):
    folder = tmp_path_factory.mktemp("dp-ledgers")
    out = {}
    for name in ("p11", "p12"):
        party = lalonde.parties[name]
        party.ledger = PrivacyLedger(folder / f"{name}.sqlite", epsilon=10.0, delta=1e-3, dataset=name)
        params = {"study": "lalonde-2x2", "epsilon": EPSILON, "delta": DELTA, "n_components": 4,
                  "n_anchors": 2675, "anchor_ranges": lalonde.ranges}
        out[name] = party.handle(Message("dp_representation", params))
        party.ledger = None
    return out


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_each_attack_stays_under_the_dp_bound(lalonde, dp_releases, attack):
    bound = correlation_bound([r.params["sensitivity"] / r.params["sigma"] for r in dp_releases.values()])
    assert bound < 0.3  # eps = 1 per party: an informative guarantee
    for name, reply in dp_releases.items():
        # scored against the subject each released row describes (the key holder's knowledge: worst case)
        truth = lalonde.truth(name)
        truth = truth[release_order(simulation_anchor_key(0), "lalonde-2x2", truth.shape[0])]
        result = ATTACKS[attack](reply.arrays["x_tilde"], reply.arrays["a_tilde"], lalonde.public(name),
                                 lalonde.anchor(name))
        guess = result.reconstruction
        assert guess.shape == truth.shape and np.all(np.isfinite(guess))
        tz = (truth - truth.mean(0)) / truth.std(0)
        gz = (guess - guess.mean(0)) / np.where(guess.std(0) > 0, guess.std(0), 1.0)
        pairs = np.abs(tz.T @ gz / truth.shape[0])  # every (true, guessed) pair, not only the assigned ones
        assert np.max(pairs) <= bound + Z / math.sqrt(truth.shape[0]), (attack, name, pairs.max(), bound)
