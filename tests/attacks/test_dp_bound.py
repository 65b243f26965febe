"""Against DP representations the strongest attack stays within the correlation the guarantee allows."""

from __future__ import annotations

import math

import numpy as np
import pytest

from collabcausal.anchor_key import simulation_anchor_key
from collabcausal.attacks.dp_bound import correlation_bound
from collabcausal.attacks.metrics import reconstruction_error
from collabcausal.ledger import PrivacyLedger
from collabcausal.messages import Message
from collabcausal.party.dp_representation import public_map, release_order
from collabcausal.simulations.datasets import load_lalonde
from collabcausal.simulations.partition import build_parties, partition_grid

SEED = 0
STUDY = "lalonde-2x2"
# Each empirical |corr| exceeds the bound on its population |corr| by more than 5.5 / sqrt(n) with
# probability below 2 Phi(-5.5) = 3.8e-8 (sd of r <= 1 / sqrt(n); either sign of r can leave the band).
# The Hungarian assignment may pick any of the 4 x 4 (true, guessed) pairs of a release, so the union
# runs over 2 epsilons x 2 parties x 16 pairs = 64: false-failure rate < 2.4e-6 (at Z = 5: 3.7e-5).
Z = 5.5


@pytest.fixture(scope="module")
def parties(tmp_path_factory):
    data = load_lalonde()
    part = partition_grid(data, 2, seed=SEED)
    folder = tmp_path_factory.mktemp("ledgers")
    built = {p.name: p for p in build_parties(data, part, anchor_key=simulation_anchor_key(SEED))}
    for party in built.values():
        party.ledger = PrivacyLedger(folder / f"{party.name}.sqlite", epsilon=1e7, delta=0.5, dataset=party.name)
    return data, built


def _key_holder_inversion(data, party, epsilon):
    """The strongest attacker: it holds the anchor key (collusion), so it knows the map and inverts it."""
    ranges = {k: list(v) for k, v in data.covariate_ranges().items()}
    columns = list(party.table.covariate_names)
    request = {"study": STUDY, "epsilon": epsilon, "delta": 1e-5, "n_components": len(columns), "n_anchors": 100,
               "anchor_ranges": ranges, "labels": party.name.endswith("1"), "outcome_range": [0.0, 125.0]}
    reply = party.handle(Message("dp_representation", request))
    mapping = public_map(simulation_anchor_key(SEED), STUDY, columns, ranges, len(columns))
    scaled = reply.arrays["x_tilde"] @ mapping.rotation  # R is orthogonal: R^T z = s + noise
    guess = mapping.low + (scaled + 1.0) / 2.0 * (mapping.high - mapping.low)
    # the key holder also knows which subject each released row describes
    truth = party.table.covariates[release_order(simulation_anchor_key(SEED), STUDY, party.table.n_subjects)]
    score = reconstruction_error(truth, guess, [ranges[c] for c in columns])
    mu = reply.params["sensitivity"] / reply.params["sigma"]
    return score, mu


def test_a_key_holder_inverts_the_map_exactly_without_noise(parties):
    # The attack is strong: at a negligible noise level it recovers every column.
    data, built = parties
    score, _ = _key_holder_inversion(data, built["p11"], 1e7 / 4)
    assert np.all(score.correlation > 0.999)


@pytest.mark.parametrize("epsilon", [1.0, 2.0])
def test_the_best_attack_stays_below_the_dp_correlation_bound(parties, epsilon):
    data, built = parties
    scores = [_key_holder_inversion(data, built[name], epsilon) for name in ("p11", "p12")]
    bound = correlation_bound([mu for _, mu in scores])  # the subject is in both releases
    n = data.n_subjects // 2
    for score, _ in scores:
        assert np.max(score.correlation) <= bound + Z / math.sqrt(n), (score.correlation, bound)
    assert bound < 0.5  # at these epsilons the guarantee is informative


def test_the_bound_is_the_gaussian_channel_value_for_a_gaussian_column():
    # Equality case of the bound's first step: linear Gaussian channel, corr^2 = 1 / (1 + sigma^2 / var).
    # At small mu the bound c / (2 + c) ~ mu^2 / 2 exceeds the channel's mu^2 / 4 (var = (Delta/2)^2).
    for mu in (0.1, 0.3, 1.0):
        channel = math.sqrt(1.0 / (1.0 + 4.0 / mu**2))
        assert channel <= correlation_bound([mu])
