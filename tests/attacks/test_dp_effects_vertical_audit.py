"""Empirical DP audit of vertical dp_effects' statistics release through Party.handle (issue 36, item 3).

The auditor is the coordinator colluding with one party of the row group (collabcausal/attacks/
dp_effects_vertical_audit.py): it sees the honest party's release under that party's noise share alone.

False-failure rates. A correct release: the Clopper-Pearson bound exceeds the claim with probability
<= 1 - confidence = 1e-6, whatever the number of releases. A planted bug (the party's share calibrated to
a sensitivity 50 times too small): the chance the audit misses it is computed exactly by
:func:`~collabcausal.attacks.dp_effects_audit.miss_probability` and asserted below 1e-4 in the test.
"""

from __future__ import annotations

import pytest

import collabcausal.party.vertical.statistics as statistics
from collabcausal.attacks.dp_effects_audit import background_frame, miss_probability, statistics_neighbours
from collabcausal.attacks.dp_effects_vertical_audit import AuditSetup, audit_evaluator, audit_label_holder
from collabcausal.estimators.dp.effects.design import FeatureMap
from collabcausal.estimators.dp.effects.vertical_program import statistics_sigma
from collabcausal.estimators.dp.zcdp import zcdp_rho

FM = FeatureMap(((0.0, 10.0), (0.0, 10.0)), (0.0, 5.0), n_sites=1)
COLUMNS = ("a", "b")
DELTA = 1e-6
BUG = 50.0
RELEASES = 30


def _setup(epsilon: float) -> AuditSetup:
    frames = statistics_neighbours(FM, list(COLUMNS), background_frame(FM, list(COLUMNS), 20, seed=7))
    return AuditSetup(frames, ("a",), ("b",), FM, zcdp_rho(epsilon, DELTA), DELTA)


@pytest.mark.parametrize(("audit", "epsilon"), [
    (audit_evaluator, 1.0),
    *[pytest.param(audit, eps, marks=pytest.mark.slow) for audit in (audit_evaluator, audit_label_holder)
      for eps in (0.5, 1.0, 2.0, 4.0) if (audit, eps) != (audit_evaluator, 1.0)],
])
def test_each_partys_share_alone_holds_its_claim_against_the_coordinator_colluding_with_the_other(tmp_path, audit,
                                                                                                 epsilon):
    """The measured lower bound stays at or below the claim (false failure <= 1e-6 each)."""
    result = audit(_setup(epsilon), RELEASES, tmp_path)
    assert result.mu_lower <= result.claimed_mu
    assert result.epsilon_lower <= result.claimed_epsilon


@pytest.mark.parametrize("audit", [audit_evaluator, pytest.param(audit_label_holder, marks=pytest.mark.slow)])
def test_a_share_calibrated_to_too_small_a_sensitivity_is_caught(tmp_path, monkeypatch, audit):
    """The planted bug: each party's sigma 50 times too small. The audit catches it; its chance of missing it, from
    the buggy sigma and the neighbours' distance, is below 1e-4."""
    setup = _setup(1.0)
    buggy = statistics_sigma(FM, setup.rho) / BUG
    monkeypatch.setattr(statistics, "statistics_sigma", lambda fm, rho: statistics_sigma(fm, rho) / BUG)
    result = audit(setup, RELEASES, tmp_path)
    assert miss_probability(RELEASES, result.distance, buggy, result.claimed_mu) < 1e-4
    assert result.mu_lower > result.claimed_mu
