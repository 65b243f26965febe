"""Empirical DP audit of dp_effects' score release with modifiers and subgroups, through Party.handle.

The added sums of docs/dp-cate-projection.md (modifier-weighted scores, the sandwich's meat, subgroup
counts and sums, their noise replicates) ride in the one score release; real parties (ledgers,
OpenDP's sampler) answer worst-case neighbours (collabcausal/attacks/dp_effects_audit.py, with the
projection's sums in the search). False-failure rates as in tests/attacks/test_dp_effects_audit.py:
a correct release is flagged with probability <= 1e-6; a planted bug (here: the added sums left out of it) is
missed with the probability :func:`miss_probability` computes from the party's own sigma, asserted
below 1e-4 in the test itself.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

import collabcausal.estimators.dp.effects.projection as projection_module
import collabcausal.party.dp_effects as dp_effects
from collabcausal.attacks.dp_effects_audit import (
    audit_table,
    audit_through_parties,
    background_frame,
    exact_values,
    miss_probability,
    scores_neighbours,
)
from collabcausal.estimators.dp.effects.design import FeatureMap
from collabcausal.estimators.dp.effects.nuisances import NuisanceModel
from collabcausal.estimators.dp.effects.projection import (
    Partition,
    Projection,
    projection_layout,
    scores_sensitivity,
)
from collabcausal.estimators.dp.effects.scores import components, release_sensitivity, replicate_components
from collabcausal.estimators.dp.zcdp import gaussian_zcdp_sigma, zcdp_rho
from collabcausal.messages import Message
from collabcausal.party.dp_effects import SCORES

COLUMNS = ["a", "b"]
FM = FeatureMap(((0.0, 10.0), (0.0, 1.0)), (0.0, 5.0), n_sites=1)
DELTA, TRIM = 1e-6, 0.1
# hostile models (a prior release): the propensity jumps from the trim to 1 - trim along a, outcomes at the bottom
MODEL = NuisanceModel(np.array([0.0, 40.0, 0.0]), (np.array([-0.5, 0.0, 0.0]), np.array([-0.5, 0.0, 0.0])))
REPLICAS = [NuisanceModel(np.array([0.0, -40.0, 0.0]), MODEL.outcome_coef)]
PROJECTION = Projection((0,), (Partition(1, (0.0, 0.5, 1.0)), Partition(0, (0.0, 2.5, 5.0, 10.0))))
PARTS = components(["aipw"], ["ate"], FM.outcome_width, TRIM)
ALL_PARTS = PARTS + replicate_components(PARTS, len(REPLICAS))
LAYOUT = projection_layout(PROJECTION, FM.outcome_width, TRIM, len(REPLICAS))
BACKGROUND = background_frame(FM, COLUMNS, 200, seed=3)  # every bin holds >= 10 per arm


def _request(epsilon: float) -> Message:
    return Message(SCORES, {
        "study": "audit", "rho": zcdp_rho(epsilon, DELTA), "delta": DELTA, "columns": COLUMNS, "design": FM.to_spec(),
        "site": 0, "n_folds": 1, "models": [MODEL.to_spec()], "estimators": ["aipw"], "estimands": ["ate"],
        "trim": TRIM, "replicates": [[m.to_spec()] for m in REPLICAS], "projection": PROJECTION.to_spec()})


def _neighbours():
    return scores_neighbours(FM, COLUMNS, BACKGROUND, 0, MODEL, PARTS, TRIM, replicates=REPLICAS,
                             projection=PROJECTION)



def test_the_worst_neighbours_stay_within_the_derived_sensitivity_and_come_close_to_it():
    first, second = (exact_values(audit_table(f, COLUMNS), _request(1.0)) for f in _neighbours())
    distance, bound = float(np.linalg.norm(second - first)), scores_sensitivity(ALL_PARTS, LAYOUT)
    assert first.size == len(ALL_PARTS) + len(LAYOUT.parts)
    assert distance <= bound + 1e-12
    assert distance >= 0.75 * bound  # the grid search reaches most of the bound (tight enough for the bug test)


@pytest.mark.parametrize("epsilon", [0.5, 1.0, 2.0, 4.0])
def test_the_party_releases_no_more_than_the_claimed_epsilon(epsilon, ledger_dir):
    audit, params = audit_through_parties(_neighbours(), COLUMNS, _request(epsilon), 100, ledger_dir)
    assert params["sensitivity"] == pytest.approx(scores_sensitivity(ALL_PARTS, LAYOUT))
    assert audit.mu_lower <= audit.claimed_mu and audit.epsilon_lower <= epsilon, audit
    assert audit.epsilon_lower_event <= epsilon, audit


@pytest.mark.slow  # 14 s; in make test the centred release's planted bug shows the audit's power on this release
def test_a_release_that_forgets_the_added_sums_in_its_sensitivity_is_caught(ledger_dir, monkeypatch):
    # the planted bug: the party calibrates for today's sums only (sensitivity 1.08 instead of 2.4); at eps 16
    # 600 releases per table miss it with probability 1e-5 (miss_probability, asserted below)
    monkeypatch.setattr(dp_effects, "scores_sensitivity", lambda parts, layout: release_sensitivity(parts))
    n_releases = 600
    audit, params = audit_through_parties(_neighbours(), COLUMNS, _request(16.0), n_releases, ledger_dir)
    assert params["sigma"] == pytest.approx(gaussian_zcdp_sigma(release_sensitivity(ALL_PARTS), zcdp_rho(16.0, DELTA)))
    assert miss_probability(n_releases, audit.distance, params["sigma"], audit.claimed_mu) < 1e-4  # the power
    assert audit.mu_lower > audit.claimed_mu, audit


CENTRED = {"centre": 0.2, "pilot": (1.0, -3.0), "replicate_pilots": ((-2.0, 4.0),)}
"""A centre (docs/dp-cate-projection.md): the blp sums add m_q (phi - m^T gamma) within 0.2 widths (1, A = 50), and
the one replicate's copies centre on a line far from the study's (the most a copy's difference can reach)."""


@pytest.mark.parametrize("shaping", [{}, {"weights": (0.6, 1.28), "modifier_clips": (0.5,), "gram_weight": 0.25},
                                     CENTRED | {"weights": (0.6, 1.28), "modifier_clips": (0.5,)},
                                     {"clip_compensation": 0.05}])
def test_with_a_projection_clip_the_worst_neighbours_stay_within_the_sensitivity_and_the_party_within_eps(
        ledger_dir, shaping):
    # projection_clip 1 (a = R = 5 against A = R / t = 50): the intercept row's own sums join, every added range
    # narrows; the same derivation bounds the move, and the party's release stays within its claim at eps 1; also
    # with the analyst's shaping (projection_budget): weights sharing two unit sums' budget, the modifier's
    # products clipped at half the bound, the modifiers' Gram entries again; with the blp sums centred on a line; and
    # with each clip's loss under the model added back (the point ranges 0.05 R wider)
    clipped = Projection(PROJECTION.modifiers, PROJECTION.partitions, 1.0, **shaping)
    layout = projection_layout(clipped, FM.outcome_width, TRIM, len(REPLICAS))
    request = Message(SCORES, _request(1.0).params | {"projection": clipped.to_spec()})
    neighbours = scores_neighbours(FM, COLUMNS, BACKGROUND, 0, MODEL, PARTS, TRIM, replicates=REPLICAS,
                                   projection=clipped)
    first, second = (exact_values(audit_table(f, COLUMNS), request) for f in neighbours)
    distance, bound = float(np.linalg.norm(second - first)), scores_sensitivity(ALL_PARTS, layout)
    assert "blp_0" in {c.name for c in layout.parts} and distance <= bound + 1e-12
    assert distance >= 0.75 * bound
    audit, params = audit_through_parties(neighbours, COLUMNS, request, 100, ledger_dir)
    assert params["sensitivity"] == pytest.approx(bound)
    assert audit.mu_lower <= audit.claimed_mu and audit.epsilon_lower <= 1.0, audit
    assert audit.epsilon_lower_event <= 1.0, audit


def test_a_centred_release_that_clips_at_the_scores_bound_is_caught(ledger_dir, monkeypatch):
    # the planted bug: the party calibrates for the centred sums' narrow range (1, not 50) but clips their values at
    # the score's bound, so a substitution moves blp_q by up to 50 w_q instead of w_q. The neighbours are the
    # correct release's worst; at eps 1, 100 releases per table miss the bug with the probability asserted below
    centred = Projection(PROJECTION.modifiers, PROJECTION.partitions, None, **CENTRED)
    request = Message(SCORES, _request(1.0).params | {"projection": centred.to_spec()})
    neighbours = scores_neighbours(FM, COLUMNS, BACKGROUND, 0, MODEL, PARTS, TRIM, replicates=REPLICAS,
                                   projection=centred)
    correct = [exact_values(audit_table(f, COLUMNS), request) for f in neighbours]
    wide = FM.outcome_width / TRIM
    honest = projection_module.subject_projection_values

    def clipped_at_the_bound(parts, phi, modifiers, bins, centre=None, losses=None):
        widened = [replace(c, low=-wide, high=wide) if c.point and c.name.startswith("blp_") else c for c in parts]
        return honest(widened, phi, modifiers, bins, centre, losses)

    monkeypatch.setattr(projection_module, "subject_projection_values", clipped_at_the_bound)
    bound = scores_sensitivity(ALL_PARTS, projection_layout(centred, FM.outcome_width, TRIM, len(REPLICAS)))
    _assert_the_planted_bug_is_caught(neighbours, request, correct, bound, ledger_dir)


def _assert_the_planted_bug_is_caught(neighbours, request: Message, correct, bound: float, ledger_dir) -> None:
    """The patched party moves the release beyond ``bound`` between the ``neighbours`` (the correct release within it),
    and 100 releases per table through ``Party.handle`` catch it, missing with the probability asserted."""
    buggy = [exact_values(audit_table(f, COLUMNS), request) for f in neighbours]
    assert np.linalg.norm(correct[1] - correct[0]) <= bound + 1e-12 < np.linalg.norm(buggy[1] - buggy[0])
    n_releases = 100
    audit, params = audit_through_parties(neighbours, COLUMNS, request, n_releases, ledger_dir)
    assert params["sensitivity"] == pytest.approx(bound)
    assert miss_probability(n_releases, audit.distance, params["sigma"], audit.claimed_mu) < 1e-4  # the power
    assert audit.mu_lower > audit.claimed_mu, audit


RESIDUAL = {"residual_clip": 0.2}
"""Residuals clipped at 0.2 widths (rho = 1): the added sums score the unclipped outcome, |phi| <= R + rho / t = 15."""
# the models' effect mu1 - mu0 is -R at b = 0 and R at b = 1, the propensity jumps from the trim to 1 - trim along a:
# at a = 0 the score reaches both ends of +-(R + rho / t) for outcomes beyond the range (docs/dp-cate-projection.md)
SPREAD = NuisanceModel(MODEL.propensity_coef, (np.array([0.0, 0.0, -1.0]), np.array([0.0, 0.0, 1.0])))
SPREAD_REPLICAS = [NuisanceModel(-MODEL.propensity_coef, SPREAD.outcome_coef)]


def _residual_request(projection: Projection, epsilon: float) -> Message:
    return Message(SCORES, _request(epsilon).params | {
        "models": [SPREAD.to_spec()], "replicates": [[m.to_spec()] for m in SPREAD_REPLICAS],
        "projection": projection.to_spec()})


def _residual_neighbours(projection: Projection):
    return scores_neighbours(FM, COLUMNS, BACKGROUND, 0, SPREAD, PARTS, TRIM, replicates=SPREAD_REPLICAS,
                             projection=projection)


RESIDUAL_CASES = [(None, RESIDUAL), (1.0, RESIDUAL | CENTRED | {"weights": (0.6, 1.28), "modifier_clips": (0.5,)}),
                  (None, {"residual_clip": 1e-3}), (None, {"residual_clip": 1})]  # and the two ends accepted


@pytest.mark.parametrize(("clip", "shaping"), RESIDUAL_CASES)
def test_with_clipped_residuals_the_worst_neighbours_stay_within_the_derived_sensitivity_and_come_close(clip, shaping):
    # the search now includes outcomes ten widths beyond the range (scores_neighbours); alone, and as the benchmark
    # runs it (a projection clip, a centre, the analyst's weights and modifier clips)
    projection = Projection(PROJECTION.modifiers, PROJECTION.partitions, clip, **shaping)
    layout = projection_layout(projection, FM.outcome_width, TRIM, len(SPREAD_REPLICAS))
    request = _residual_request(projection, 1.0)
    first, second = (exact_values(audit_table(f, COLUMNS), request) for f in _residual_neighbours(projection))
    distance, bound = float(np.linalg.norm(second - first)), scores_sensitivity(ALL_PARTS, layout)
    assert "blp_0" in {c.name for c in layout.parts} and distance <= bound + 1e-12
    assert distance >= 0.75 * bound


@pytest.mark.slow  # 4-5 s each
@pytest.mark.parametrize(("epsilon", "residual"), [(0.5, RESIDUAL), (1.0, RESIDUAL), (2.0, RESIDUAL), (4.0, RESIDUAL),
                                                   (1.0, {"residual_clip": 1e-3}), (1.0, {"residual_clip": 1})])
def test_with_clipped_residuals_the_party_releases_no_more_than_the_claimed_epsilon(epsilon, residual, ledger_dir):
    projection = Projection(PROJECTION.modifiers, PROJECTION.partitions, None, **residual)
    layout = projection_layout(projection, FM.outcome_width, TRIM, len(SPREAD_REPLICAS))
    audit, params = audit_through_parties(_residual_neighbours(projection), COLUMNS,
                                          _residual_request(projection, epsilon), 100, ledger_dir)
    assert params["sensitivity"] == pytest.approx(scores_sensitivity(ALL_PARTS, layout))
    assert audit.mu_lower <= audit.claimed_mu and audit.epsilon_lower <= epsilon, audit
    assert audit.epsilon_lower_event <= epsilon, audit


@pytest.mark.slow  # 5 s
def test_a_release_that_calibrates_for_clipped_residuals_but_scores_without_them_is_caught(ledger_dir, monkeypatch):
    # the planted bug: the party calibrates for R + rho / t (15) and, trusting that bound, leaves the point values
    # unclipped, but scores the unclipped outcome without the residual clip: an outcome ten widths beyond the range
    # scores about 500. The neighbours are the correct release's worst; at eps 1, 100 releases per table miss the
    # bug with the probability asserted below
    projection = Projection(PROJECTION.modifiers, PROJECTION.partitions, None, **RESIDUAL)
    request = _residual_request(projection, 1.0)
    neighbours = _residual_neighbours(projection)
    correct = [exact_values(audit_table(f, COLUMNS), request) for f in neighbours]
    honest_values, honest_score = projection_module.subject_projection_values, projection_module.aipw_ate_score

    def unclipped(parts, phi, modifiers, bins, centre=None, losses=None):
        widened = [replace(c, low=-math.inf, high=math.inf) if c.point else c for c in parts]
        return honest_values(widened, phi, modifiers, bins, centre, losses)

    monkeypatch.setattr(projection_module, "subject_projection_values", unclipped)
    monkeypatch.setattr(projection_module, "aipw_ate_score", lambda *args: honest_score(*args[:5]))  # rho dropped
    bound = scores_sensitivity(ALL_PARTS, projection_layout(projection, FM.outcome_width, TRIM, len(SPREAD_REPLICAS)))
    _assert_the_planted_bug_is_caught(neighbours, request, correct, bound, ledger_dir)
