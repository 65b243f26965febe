"""Empirical DP audit of vertical dp_effects' statistics and scores releases through Party.handle (issue 36, item 3).

The auditor is the coordinator colluding with one party of the row group (collabcausal/attacks/
dp_effects_vertical_audit.py): it sees the honest party's release under that party's noise share alone.

False-failure rates. A correct release: the Clopper-Pearson bound exceeds the claim with probability
<= 1 - confidence = 1e-6, whatever the number of releases. A planted bug (the party's share calibrated to
a sensitivity 50 times too small): the chance the audit misses it is computed exactly by
:func:`~collabcausal.attacks.dp_effects_audit.miss_probability` and asserted below 1e-4 in the test.
The scores view's size check (chi-square) fails a correct share with probability 1e-5 and misses the
planted bug with a probability computed in the test.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import chi2

import collabcausal.party.vertical.scores as scores
import collabcausal.party.vertical.statistics as statistics
from collabcausal.attacks.dp_effects_audit import background_frame, miss_probability, statistics_neighbours
from collabcausal.attacks.dp_effects_vertical_audit import (
    AuditSetup,
    ThreePartySetup,
    audit_evaluator,
    audit_label_holder,
    audit_scores_label_holder,
    audit_three_party_evaluator,
    hostile_scores_setup,
    label_holder_score_releases,
)
from collabcausal.estimators.dp.effects.design import FeatureMap
from collabcausal.estimators.dp.effects.vertical import share_variance
from collabcausal.estimators.dp.effects.vertical_program import (
    ScoreProgram,
    scores_bound,
    scores_sigma,
    statistics_sigma,
)
from collabcausal.estimators.dp.zcdp import zcdp_rho

FM = FeatureMap(((0.0, 10.0), (0.0, 10.0)), (0.0, 5.0), n_sites=1)
COLUMNS = ("a", "b")
DELTA = 1e-6
BUG = 50.0
RELEASES = 30


def _setup(epsilon: float) -> AuditSetup:
    frames = statistics_neighbours(FM, list(COLUMNS), background_frame(FM, list(COLUMNS), 20, seed=7))
    return AuditSetup(frames, ("a",), ("b",), FM, zcdp_rho(epsilon, DELTA), DELTA)


@pytest.mark.slow  # no power against an honest claim at these release counts; the planted bugs below are the fast check
@pytest.mark.parametrize(("audit", "epsilon"), [(audit, eps) for audit in (audit_evaluator, audit_label_holder)
                                                for eps in (0.5, 1.0, 2.0, 4.0)])
def test_each_partys_share_alone_holds_its_claim_against_the_coordinator_colluding_with_the_other(tmp_path, audit,
                                                                                                 epsilon):
    """The measured lower bound stays at or below the claim (false failure <= 1e-6 each)."""
    result = audit(_setup(epsilon), RELEASES, tmp_path)
    assert result.mu_lower <= result.claimed_mu
    assert result.epsilon_lower <= result.claimed_epsilon


@pytest.mark.parametrize(("audit", "setup"), [
    (audit_evaluator, "two"), pytest.param(audit_label_holder, "two", marks=pytest.mark.slow),
    pytest.param(audit_three_party_evaluator, "three", marks=pytest.mark.slow)])
def test_a_share_calibrated_to_too_small_a_sensitivity_is_caught(tmp_path, monkeypatch, audit, setup):
    """The planted bug: each party's sigma 50 times too small (with three column groups, the third party's). The
    audit catches it; its chance of missing it, from the buggy sigma and the neighbours' distance, is below 1e-4."""
    setup = _setup(1.0) if setup == "two" else _three_party_setup(1.0)
    buggy = statistics_sigma(setup.feature_map, setup.rho, setup.groups) / BUG
    monkeypatch.setattr(statistics, "statistics_sigma", lambda *args: statistics_sigma(*args) / BUG)
    result = audit(setup, RELEASES, tmp_path)
    assert miss_probability(RELEASES, result.distance, buggy, result.claimed_mu) < 1e-4
    assert result.mu_lower > result.claimed_mu


FM3 = FeatureMap(((0.0, 10.0),) * 3, (0.0, 5.0), n_sites=1)


def _three_party_setup(epsilon: float) -> ThreePartySetup:
    frames = statistics_neighbours(FM3, ["a", "b", "c"], background_frame(FM3, ["a", "b", "c"], 20, seed=7))
    return ThreePartySetup(frames, (("a",), ("b",), ("c",)), FM3, zcdp_rho(epsilon, DELTA), DELTA)


@pytest.mark.slow  # three parties' rounds at N = 16384: about a second a release
@pytest.mark.parametrize("epsilon", [0.5, 1.0, 2.0, 4.0])
def test_a_third_partys_share_alone_holds_its_claim_against_the_coordinator_colluding_with_the_label_holder(
        tmp_path, epsilon):
    """Three column groups: the third party's totals (the three-party Gram entries among them, the second party's
    products relayed sealed) under its share alone; the measured lower bound stays at or below the claim."""
    result = audit_three_party_evaluator(_three_party_setup(epsilon), RELEASES, tmp_path)
    assert result.mu_lower <= result.claimed_mu
    assert result.epsilon_lower <= result.claimed_epsilon


# The scores release: the label holder evaluates, so its share is what the coordinator colluding with the key
# owner sees. A depth-7 round costs seconds, so the normal suite checks the share's size (a chi-square test with
# its false-failure rate computed) and the likelihood-ratio audit runs in the slow suite.
SCORE_RELEASES = 30
SCORE_SWEEP_RELEASES = 15
VARIANCE_RELEASES = 3
TAIL = 5e-6
"""Each tail of the chi-square test: a correct share fails it with probability <= 2 * TAIL = 1e-5."""


def _scores_setup(epsilon: float) -> tuple[AuditSetup, ScoreProgram]:
    """A hostile program (the propensity crosses the trim across the box) and its worst neighbours."""
    return hostile_scores_setup(_setup(epsilon), background_frame(FM, list(COLUMNS), 20, seed=7))


def _standardized_square_sum(setup: AuditSetup, program: ScoreProgram, folder) -> tuple[float, int]:
    """Sum over both row groups' releases of ((release - exact) / L's share sd)^2, and how many terms."""
    sd = scores_sigma(program, setup.rho) * float(np.sqrt(share_variance(2)))
    residuals = [label_holder_score_releases(setup, program, frame, VARIANCE_RELEASES, folder, tag)
                 - setup.exact_scores(program, frame)
                 for tag, frame in zip(("first", "second"), setup.frames, strict=True)]
    z = np.concatenate([r.ravel() for r in residuals]) / sd
    return float(z @ z), int(z.size)


def test_the_worst_score_neighbours_are_far_apart() -> None:
    """The lattice search finds records whose scaled scores move by more than half the proved sensitivity."""
    setup, program = _scores_setup(1.0)
    first, second = (setup.exact_scores(program, f) for f in setup.frames)
    assert np.linalg.norm(second - first) > 0.5 * scores_bound(program)


def test_the_label_holders_score_share_alone_has_its_claimed_size(tmp_path) -> None:
    """What the coordinator colluding with the key owner decrypts carries L's share with sd sigma: the standardized
    residuals' square sum is a chi-square inside its two 5e-6 tails."""
    setup, program = _scores_setup(1.0)
    q, k = _standardized_square_sum(setup, program, tmp_path)
    assert chi2.ppf(TAIL, k) <= q <= chi2.isf(TAIL, k)


def test_a_score_share_calibrated_to_too_small_a_sensitivity_is_seen_in_its_size(tmp_path, monkeypatch) -> None:
    """The planted bug: L's sigma 50 times too small. The square sum falls below the lower tail; the chance it does
    not (chi-square times 1/50^2 above the tail) is computed and below 1e-4."""
    setup, program = _scores_setup(1.0)
    monkeypatch.setattr(scores, "scores_sigma", lambda p, rho: scores_sigma(p, rho) / BUG)
    q, k = _standardized_square_sum(setup, program, tmp_path)
    assert chi2.sf(chi2.ppf(TAIL, k) * BUG**2, k) < 1e-4
    assert q < chi2.ppf(TAIL, k)


@pytest.mark.slow
@pytest.mark.parametrize("epsilon", [0.5, 1.0, 2.0, 4.0])
def test_the_label_holders_score_share_alone_holds_its_claim(tmp_path, epsilon) -> None:
    """The likelihood-ratio audit of the scores release through Party.handle (false failure <= 1e-6 each)."""
    setup, program = _scores_setup(epsilon)
    result = audit_scores_label_holder(setup, program, SCORE_SWEEP_RELEASES, tmp_path)
    assert result.mu_lower <= result.claimed_mu
    assert result.epsilon_lower <= result.claimed_epsilon


@pytest.mark.slow
def test_the_likelihood_ratio_audit_catches_a_score_share_too_small(tmp_path, monkeypatch) -> None:
    """The planted bug at eps 1 with 30 releases per row group: missed with the computed probability < 1e-4."""
    setup, program = _scores_setup(1.0)
    buggy = scores_sigma(program, setup.rho) / BUG
    monkeypatch.setattr(scores, "scores_sigma", lambda p, rho: scores_sigma(p, rho) / BUG)
    result = audit_scores_label_holder(setup, program, SCORE_RELEASES, tmp_path)
    assert miss_probability(SCORE_RELEASES, result.distance, buggy, result.claimed_mu) < 1e-4
    assert result.mu_lower > result.claimed_mu
