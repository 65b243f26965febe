"""Empirical DP audit of dp_effects' two releases through Party.handle (issue 21, item 5).

Real parties (ledgers, OpenDP's sampler) answer worst-case neighbouring tables
(collabcausal/attacks/dp_effects_audit.py); the claim audited is the one each reply reports.

False-failure rates. A correct release: the Clopper-Pearson bound exceeds the claim with
probability <= 1 - confidence = 1e-6 (collabcausal/attacks/dp_audit.py), whatever the number of
releases. A planted bug (the sensitivity halved): the chance the audit misses it is computed
exactly by :func:`miss_probability` from the party's own sigma, and asserted below 1e-4 in the test
itself (statistics: 1.2e-6 at 1,200 releases per table, where 1,100 gave 1.2e-5; scores: 2.5e-6 at
1,000; at a given epsilon the zCDP calibration adds a little more noise than an analytic Gaussian, so
the statistics need more releases than the 850 they needed before). The seeded numpy audits (power checks) have a fixed
outcome. The parties' ledgers live on /dev/shm when it exists: a ledger commits with
synchronous=FULL, and a disk's fsync (about 20 ms) would make 2,000 releases take a minute instead
of a few seconds.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy.stats import binom, norm

import collabcausal.party.dp_effects as dp_effects
from collabcausal.attacks.dp_audit import audit_gaussian_release, release_audit
from collabcausal.attacks.dp_effects_audit import (
    audit_table,
    audit_through_parties,
    audit_verdict,
    background_frame,
    exact_values,
    miss_probability,
    scores_neighbours,
    statistics_neighbours,
)
from collabcausal.estimators.dp.effects.design import FeatureMap
from collabcausal.estimators.dp.effects.nuisances import NuisanceModel
from collabcausal.estimators.dp.effects.scores import components, release_sensitivity, replicate_components
from collabcausal.estimators.dp.effects.statistics import fold_statistics, statistics_sensitivity, statistics_weights
from collabcausal.estimators.dp.zcdp import gaussian_zcdp_sigma, zcdp_rho
from collabcausal.messages import Message
from collabcausal.party.dp_effects import SCORES, STATISTICS

COLUMNS = ["a"]
FM = FeatureMap(((0.0, 10.0),), (0.0, 5.0), n_sites=1)
DELTA, TRIM = 1e-6, 0.1
# Hostile nuisances (a prior release, the same for both neighbours): the propensity jumps from the
# trim to 1 - trim across the box, both outcome models sit at the bottom of the range.
MODEL = NuisanceModel(np.array([0.0, 40.0]), (np.array([-0.5, 0.0]), np.array([-0.5, 0.0])))
PARTS = components(["aipw"], ["ate"], FM.outcome_width, TRIM)
BACKGROUND = background_frame(FM, COLUMNS, 40, seed=3)


def _request(op: str, epsilon: float) -> Message:
    """The request both neighbours get: a release that costs ``epsilon`` alone at DELTA (as zCDP)."""
    params = {"study": "audit", "rho": zcdp_rho(epsilon, DELTA), "delta": DELTA, "columns": COLUMNS,
              "design": FM.to_spec(), "site": 0, "n_folds": 1}
    if op == SCORES:
        params |= {"models": [MODEL.to_spec()], "estimators": ["aipw"], "estimands": ["ate"], "trim": TRIM}
    return Message(op, params)


def _neighbours(op: str, w: float = 1.0):
    if op == STATISTICS:
        return statistics_neighbours(FM, COLUMNS, BACKGROUND, w)
    return scores_neighbours(FM, COLUMNS, BACKGROUND, 0, MODEL, PARTS, TRIM)


# Hostile noise replicates (the default release carries them): the propensity flipped, the outcome models at the top.
REPLICAS = [NuisanceModel(np.array([0.0, -40.0]), MODEL.outcome_coef),
            NuisanceModel(MODEL.propensity_coef, (np.array([0.5, 0.0]), np.array([0.5, 0.0])))]


def _replicated_request(epsilon: float) -> Message:
    request = _request(SCORES, epsilon)
    return Message(SCORES, request.params | {"replicates": [[m.to_spec()] for m in REPLICAS]})



@pytest.mark.parametrize("op", [STATISTICS, SCORES])
@pytest.mark.parametrize("epsilon", [0.5, 1.0, 2.0, 4.0])
def test_the_party_releases_no_more_than_the_claimed_epsilon(op, epsilon, ledger_dir):
    audit, params = audit_through_parties(_neighbours(op), COLUMNS, _request(op, epsilon), 150, ledger_dir)
    expected = statistics_sensitivity(FM) if op == STATISTICS else release_sensitivity(PARTS)
    assert params["sensitivity"] == pytest.approx(expected)
    assert audit.mu_lower <= audit.claimed_mu and audit.epsilon_lower <= epsilon, audit
    assert audit.epsilon_lower_event <= epsilon, audit


@pytest.mark.parametrize("epsilon", [1.0, 4.0])
def test_the_release_with_noise_replicates_stays_within_its_claim(epsilon, ledger_dir):
    frames = scores_neighbours(FM, COLUMNS, BACKGROUND, 0, MODEL, PARTS, TRIM, replicates=REPLICAS)
    first, second = (exact_values(audit_table(f, COLUMNS), _replicated_request(1.0)) for f in frames)
    copies = slice(len(PARTS), None)
    assert np.abs(second[copies] - first[copies]).max() > 0.0  # the neighbours move the replicate sums too
    audit, params = audit_through_parties(frames, COLUMNS, _replicated_request(epsilon), 150, ledger_dir)
    assert params["sensitivity"] == pytest.approx(release_sensitivity(PARTS + replicate_components(PARTS, 2)))
    assert audit.distance <= params["sensitivity"] + 1e-12
    assert audit.mu_lower <= audit.claimed_mu and audit.epsilon_lower <= epsilon, audit


@pytest.mark.parametrize(("op", "n_releases"), [pytest.param(STATISTICS, 1200, marks=pytest.mark.slow), (SCORES, 1000)])
def test_a_halved_sensitivity_is_caught(op, n_releases, ledger_dir, monkeypatch):
    name = "statistics_sensitivity" if op == STATISTICS else "release_sensitivity"
    correct = getattr(dp_effects, name)
    monkeypatch.setattr(dp_effects, name, lambda *a: correct(*a) / 2.0)  # the planted bug
    audit, params = audit_through_parties(_neighbours(op), COLUMNS, _request(op, 4.0), n_releases, ledger_dir)
    correct_sensitivity = statistics_sensitivity(FM) if op == STATISTICS else release_sensitivity(PARTS)
    assert params["sigma"] == pytest.approx(gaussian_zcdp_sigma(correct_sensitivity, zcdp_rho(4.0, DELTA)) / 2.0)
    assert miss_probability(n_releases, audit.distance, params["sigma"], audit.claimed_mu) < 1e-4  # the power
    assert audit.mu_lower > audit.claimed_mu and audit.epsilon_lower > 4.0, audit


@pytest.mark.parametrize("w", [1.0, 2.0, 8.0])
def test_the_statistics_neighbours_are_the_worst_pair_and_no_corner_substitution_exceeds_delta(w):
    # The all-ones corner: top outcome, arm 0 -> 1 at sqrt(B^4 + B^2 + w^2 B^2 / 2) with B^2 = 1 + m and the cross
    # sums' weight w, or (w = 8 here) the outcome's two ends in arm 1 at w B; every substitution between corners of
    # the box (both arms, both outcome ends) stays within Delta.
    request = _weighted_request(1.0, w)
    first, second = (exact_values(audit_table(f, COLUMNS), request) for f in _neighbours(STATISTICS, w))
    b2 = FM.squared_norm_bound
    assert np.linalg.norm(second - first) == pytest.approx(
        max(math.sqrt(b2 * b2 + b2 + w * w * b2 / 2), w * math.sqrt(b2)), rel=1e-12)
    fm = FeatureMap(((0.0, 1.0), (0.0, 1.0), (0.0, 1.0)), (0.0, 1.0), n_sites=2)
    corners = list(itertools.product(*[[0.0, 0.5, 1.0]] * 3, (0, 1), (0.0, 1.0)))
    stats = [fold_statistics(fm.design(np.array([c[:3]]), 1), np.array([c[3]]), fm.centred_outcome([c[4]]),
                             fm.outcome_width) * statistics_weights(fm.dim, w) for c in corners]
    worst = max(np.linalg.norm(a - b) for a, b in itertools.combinations(stats, 2))
    # the arm flip, or (w > 2.6 here) the outcome's two ends at the corner in one arm: w B, only b moving
    assert worst == pytest.approx(max(math.sqrt(16 + 4 + w * w * 4 / 2), 2 * w))
    assert worst <= statistics_sensitivity(fm, w)


def _weighted_request(epsilon: float, w: float) -> Message:
    request = _request(STATISTICS, epsilon)
    return Message(STATISTICS, request.params | {"cross_weight": w})


@pytest.mark.parametrize("epsilon", [1.0, 4.0])
def test_a_weighted_statistics_release_stays_within_its_claim(epsilon, ledger_dir):
    audit, params = audit_through_parties(_neighbours(STATISTICS, 2.0), COLUMNS, _weighted_request(epsilon, 2.0), 150,
                                          ledger_dir)
    assert params["sensitivity"] == pytest.approx(statistics_sensitivity(FM, 2.0))
    assert audit.distance <= params["sensitivity"] + 1e-12
    assert audit.mu_lower <= audit.claimed_mu and audit.epsilon_lower <= epsilon, audit


@pytest.mark.slow
def test_a_weighted_release_calibrated_without_its_weight_is_caught(ledger_dir, monkeypatch):
    # The planted bug: a party that weights the cross sums but calibrates for the unweighted vector (the harness's
    # neighbours at w = 8: the outcome swap).
    correct = dp_effects.statistics_sensitivity
    monkeypatch.setattr(dp_effects, "statistics_sensitivity", lambda fm, w=1.0: correct(fm))
    n_releases = 1200
    audit, params = audit_through_parties(_neighbours(STATISTICS, 8.0), COLUMNS, _weighted_request(4.0, 8.0),
                                          n_releases, ledger_dir)
    assert params["sensitivity"] == pytest.approx(statistics_sensitivity(FM))  # the bug: w = 8 not counted
    assert miss_probability(n_releases, audit.distance, params["sigma"], audit.claimed_mu) < 1e-4  # the power
    assert audit.mu_lower > audit.claimed_mu and audit.epsilon_lower > 4.0, audit


def test_the_scores_neighbours_move_the_score_across_its_whole_range():
    # Under the hostile models one record's AIPW score goes from R/t to -R/t: the aipw_ate sum moves
    # by its full width (scaled: 1), its square not at all; Delta = sqrt(1 + 1/4).
    first, second = (exact_values(audit_table(f, COLUMNS), _request(SCORES, 1.0)) for f in _neighbours(SCORES))
    assert np.abs(second - first) == pytest.approx([1.0, 0.0], abs=1e-12)


@pytest.mark.parametrize("op", [STATISTICS, SCORES])
def test_a_seeded_audit_of_the_same_neighbours_comes_close_to_the_claim(op):
    # Power of the method (numpy noise, seed fixed): 200,000 releases see most of what the
    # neighbours' distance allows (distance / Delta = 0.94 for statistics, 0.89 for scores).
    first, second = (exact_values(audit_table(f, COLUMNS), _request(op, 1.0)) for f in _neighbours(op))
    sensitivity = statistics_sensitivity(FM) if op == STATISTICS else release_sensitivity(PARTS)
    audit = audit_gaussian_release(first, second, sensitivity, 1.0, DELTA, 200_000, rng=np.random.default_rng(5))
    assert audit.epsilon_lower <= 1.0 and audit.mu_lower <= audit.claimed_mu
    assert audit.mu_lower >= 0.8 * audit.claimed_mu * audit.distance / sensitivity, audit



def test_miss_probability_is_the_exact_binomial_sum_and_a_correct_release_is_never_flagged():
    # Brute force with release_audit itself over 40 releases: mu_lower falls with either count, and
    # is already below mu at FP = 5 with FN = 0, so counts above 8 are never caught.
    n, distance, sigma, mu = 40, 1.0, 0.244, 0.6
    assert release_audit(5, 0, n, distance, 1.0, 1.0, DELTA).mu_lower < mu
    p = binom.pmf(np.arange(n + 1), n, norm.cdf(-distance / (2 * sigma)))
    caught = sum(p[i] * p[j] for i in range(9) for j in range(9)
                 if release_audit(i, j, n, distance, 1.0, 1.0, DELTA).mu_lower > mu)
    assert 0.05 < caught < 0.95
    assert miss_probability(n, distance, sigma, mu) == pytest.approx(1.0 - caught, abs=1e-12)
    assert miss_probability(2000, 1.0, 1.0 / 0.8, 0.8) > 1.0 - 1e-6  # as calibrated: flagged w.p. <= 1e-6


def test_an_audit_rows_verdict_fails_a_correct_release_over_its_claim_and_a_planted_bug_the_audit_should_see(
) -> None:
    """A correct release fails only when it exceeds its claim; a planted bug is caught when it exceeds, and an
    audit that misses it fails only when its miss probability is below MISS_LEVEL (else: no power)."""
    assert audit_verdict(False, False, 1000, 1.0, 1.0, 1.0)[1:] == ("ok", False)
    assert audit_verdict(True, False, 1000, 1.0, 1.0, 1.0)[1:] == ("EXCEEDS CLAIM", True)
    powerful = audit_verdict(False, True, 2000, 1.0, 0.1, 1.0)  # noise a tenth of the distance: always seen
    assert powerful[0] < 1e-4 and powerful[1:] == ("MISSED", True)
    assert audit_verdict(True, True, 2000, 1.0, 0.1, 1.0)[1:] == ("caught", False)
    weak = audit_verdict(False, True, 10, 1.0, 1.0, 1.0)  # ten releases: no power
    assert weak[0] > 0.5 and weak[1:] == ("not seen (no power)", False)


# --- The weighted audit's neighbours against the worst pair (29 Nov 2026 review) ---


@pytest.mark.parametrize("w", [2.0, 2.4, 2.5, 8.0])
def test_the_harness_takes_the_outcome_swap_above_the_crossover(w):
    """The arm flip sits at sqrt(B^4 + B^2 + w^2 B^2 / 2), the same-arm outcome swap at w B. Here (B^2 = 2) they cross
    at w = sqrt(2 (B^2 + 1)) = 2.45: the harness takes the flip below it (0.845 of Delta at w = 2) and the swap above
    (0.977 of Delta at w = 8, where the flip would show 0.723)."""
    request = _weighted_request(1.0, w)

    def distance(pair):
        return np.linalg.norm(np.subtract(*[exact_values(audit_table(f, COLUMNS), request) for f in pair]))

    flip, swap, chosen = (distance(_neighbours(STATISTICS, v)) for v in (1.0, 8.0, w))
    b2, delta = FM.squared_norm_bound, statistics_sensitivity(FM, w)
    assert swap == pytest.approx(w * math.sqrt(b2), rel=1e-12) and max(flip, swap) <= delta
    assert chosen == max(flip, swap) and (swap > flip) == (w > math.sqrt(2 * (b2 + 1)))
    if w in (2.0, 8.0):
        assert chosen / delta == pytest.approx({2.0: 0.845, 8.0: 0.977}[w], abs=1e-3)


@pytest.mark.parametrize("epsilon", [pytest.param(1.0, marks=pytest.mark.slow), 4.0])
def test_the_largest_weight_stays_within_its_claim_on_its_worst_neighbours(epsilon, ledger_dir):
    """Real parties at w = 8 on the outcome swap (0.977 of Delta): no more than the claimed epsilon."""
    audit, params = audit_through_parties(_neighbours(STATISTICS, 8.0), COLUMNS, _weighted_request(epsilon, 8.0), 150,
                                          ledger_dir)
    assert params["sensitivity"] == pytest.approx(statistics_sensitivity(FM, 8.0))
    assert audit.distance == pytest.approx(8.0 * math.sqrt(FM.squared_norm_bound), rel=1e-9)
    assert audit.mu_lower <= audit.claimed_mu and audit.epsilon_lower <= epsilon, audit


def test_a_seeded_audit_at_the_largest_weight_on_the_outcome_swap_comes_close_to_the_claim():
    """The method's power on the worst pair at w = 8 (numpy noise, seed fixed): it sees most of what 0.977 of Delta
    allows, where the arm flip would show at most 0.723 of it."""
    request = _weighted_request(1.0, 8.0)
    first, second = (exact_values(audit_table(f, COLUMNS), request) for f in _neighbours(STATISTICS, 8.0))
    sensitivity = statistics_sensitivity(FM, 8.0)
    audit = audit_gaussian_release(first, second, sensitivity, 1.0, DELTA, 200_000, rng=np.random.default_rng(5))
    assert audit.epsilon_lower <= 1.0 and audit.mu_lower <= audit.claimed_mu
    assert audit.mu_lower >= 0.8 * audit.claimed_mu * audit.distance / sensitivity, audit
    assert audit.mu_lower > audit.claimed_mu * 0.723  # beyond anything the arm flip could show
