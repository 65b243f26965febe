"""A hostile coordinator against the zCDP charges of ``dp_effects`` (the party's ledger is the only defence).

The party promises (epsilon, delta)-DP under substitution of one record over every release it
makes. Each test plays one attack through a real :class:`Party` (or its ledger) and asserts the
defence: what the ledger claims is a valid guarantee, within the budget, and equals the
definition (:func:`composed_cost`) of its history.

False-failure rates: every assertion is deterministic (charges, totals, sigmas, closed-form
privacy profiles) except the replay test, which compares equal numbers (the recorded reply).
"""

from __future__ import annotations

import math
import sqlite3
from pathlib import Path

import numpy as np
import pytest
from dp_effects_requests import COLUMNS, DELTA, RHO, hostile_frame, hostile_request
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy.special import log_ndtr

from collabcausal.analyst.dp_effects import DPEffectsSpec, checked_values
from collabcausal.errors import BudgetExceededError, InputError, ProtocolError, StudyFailedError
from collabcausal.estimators.dp.zcdp import zcdp_epsilon, zcdp_rho
from collabcausal.ledger import Charge, PrivacyLedger, composed_cost
from collabcausal.messages import Message
from collabcausal.party import Party, PartyTable
from collabcausal.party.dp_effects import SCORES, STATISTICS
from collabcausal.secagg import SCALE_BITS, integer_sensitivity
from collabcausal.secagg.noise import sum_rho
from collabcausal.secagg.release import share_calibration

REL = 1e-9  # the ledger's relative tolerance (float rounding of the running totals)


def _party(tmp_path: Path, epsilon: float = 1e6, delta: float = 0.5) -> Party:
    table = PartyTable.from_frame(hostile_frame(), COLUMNS, treatment="t", outcome="y")
    return Party("p", table, ledger=PrivacyLedger(tmp_path / "ledger.sqlite", epsilon=epsilon, delta=delta))


def gaussian_delta(epsilon: float, rho: float) -> float:
    """Exact delta(epsilon) of a Gaussian of sensitivity 1 and sd 1/sqrt(2 rho) (Balle & Wang 2018, Thm 8).

    Adaptive compositions of Gaussian releases with rhos summing to ``rho`` have exactly this
    profile, so it checks the (epsilon, delta) the ledger claims independently of OpenDP.
    """
    mu = math.sqrt(2.0 * rho)
    return math.exp(log_ndtr(-epsilon / mu + mu / 2)) - math.exp(epsilon + log_ndtr(-epsilon / mu - mu / 2))


# --- 1. the delta budget is a promise: a pure-DP party must never make a Gaussian release ------------


def test_a_pure_dp_party_refuses_a_gaussian_release_with_a_tiny_delta(tmp_path):
    # HOLE on main: the ledger allowed an absolute 1e-15 of delta over the budget, so a party
    # configured for (10, 0)-DP answered dp_effects_statistics at delta = 1e-15 (< 1/n): a Gaussian
    # release, which is (epsilon, 0)-DP for no epsilon.
    party = _party(tmp_path, epsilon=10.0, delta=0.0)
    with pytest.raises(BudgetExceededError):
        party.handle(hostile_request(STATISTICS, rho=1e-4, delta=1e-15))
    assert party.ledger.history() == [] and party.ledger.spent() == (0.0, 0.0)


def test_a_pure_dp_ledger_refuses_any_positive_delta(tmp_path):
    ledger = PrivacyLedger(tmp_path / "l.sqlite", epsilon=10.0, delta=0.0)
    for charge in (lambda: ledger.charge("dp_count", 0.1, 1e-16), lambda: ledger.charge_zcdp("g", 1e-6, 1e-300)):
        with pytest.raises(BudgetExceededError):
            charge()
    assert ledger.spent() == (0.0, 0.0)


def test_many_tiny_delta_requests_cannot_add_up_past_the_delta_budget(tmp_path):
    party = _party(tmp_path, epsilon=1e6, delta=1e-5)
    answered = 0
    with pytest.raises(BudgetExceededError):
        for _ in range(200):
            party.handle(hostile_request(STATISTICS, rho=1e-3, delta=1e-7))
            answered += 1
    assert answered == 100  # 100 x 1e-7 = the budget, exactly
    assert party.ledger.spent()[1] <= 1e-5 * (1 + REL)


# --- 2. huge delta then tiny delta: the converted epsilon drops; is the claim still true? -----------


def test_epsilon_freed_by_a_large_delta_charge_is_spent_once_and_the_claim_stays_valid(tmp_path):
    ledger = PrivacyLedger(tmp_path / "l.sqlite", epsilon=2.0, delta=1e-3)
    big = zcdp_rho(1.9, 1e-10)
    ledger.charge_zcdp("dp_effects_statistics", big, 1e-10)
    with pytest.raises(BudgetExceededError):
        ledger.charge("dp_count", 0.2)
    before = ledger.spent()[0]
    ledger.charge_zcdp("dp_effects_scores", 1e-12, 9e-4)  # adds little rho and much delta
    assert ledger.spent()[0] < before  # the conversion at the larger delta is smaller...
    freed = 2.0 - ledger.spent()[0]
    ledger.charge("dp_count", freed)  # ...and the difference can be spent, once
    with pytest.raises(BudgetExceededError):
        ledger.charge("dp_count", 1e-3)
    eps, delta = ledger.spent()
    assert (eps, delta) == pytest.approx(composed_cost(ledger.history()), rel=REL)
    assert eps <= 2.0 * (1 + REL) and delta <= 1e-3 * (1 + REL)
    # the claim: pure (freed, 0) plus the Gaussian part at (eps - freed, its delta), basic composition
    zcdp_delta = sum(c.delta for c in ledger.history() if c.rho is not None)
    assert gaussian_delta(eps - freed, big + 1e-12) <= zcdp_delta * (1 + 1e-6)


@pytest.mark.parametrize("rho", [1e-6, 1e-3, 0.05, 1.0, 30.0])
@pytest.mark.parametrize("delta", [1e-12, 1e-7, 1e-3, 0.2])
def test_the_converted_epsilon_is_a_valid_gaussian_guarantee(rho, delta):
    # independent of OpenDP: the exact privacy profile of the composed Gaussian at the claimed epsilon
    assert gaussian_delta(zcdp_epsilon(rho, delta), rho) <= delta * (1 + 1e-6)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(log_rho=st.floats(-8.0, 2.0), log_delta=st.floats(-15.0, math.log10(0.5)))
def test_the_converted_epsilon_is_valid_for_random_rho_and_delta(log_rho, log_delta):
    rho, delta = 10.0**log_rho, 10.0**log_delta
    assert gaussian_delta(zcdp_epsilon(rho, delta), rho) <= delta * (1 + 1e-6)


_STEP = st.one_of(
    st.tuples(st.just("approx"), st.floats(1e-4, 0.5), st.sampled_from([0.0, 1e-8, 1e-6])),
    st.tuples(st.just("part"), st.floats(1e-4, 0.5), st.sampled_from([0.0, 1e-7]), st.sampled_from("ab"),
              st.sampled_from("xyz")),
    st.tuples(st.just("zcdp"), st.floats(1e-6, 0.2), st.sampled_from([1e-12, 1e-8, 1e-6, 5e-6])),
)


@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(_STEP, min_size=1, max_size=25))
def test_random_interleavings_never_exceed_the_budget_and_match_the_definition(tmp_path_factory, steps):
    budget = (2.0, 1e-5)
    ledger = PrivacyLedger(tmp_path_factory.mktemp("h") / "l.sqlite", epsilon=budget[0], delta=budget[1])
    for step in steps:
        before = ledger.history()
        try:
            if step[0] == "approx":
                ledger.charge("dp_count", step[1], step[2])
            elif step[0] == "part":
                ledger.charge("dp_histogram", step[1], step[2], study="s", partition=step[3], subset=step[4])
            else:
                ledger.charge_zcdp("dp_effects_statistics", step[1], step[2])
        except BudgetExceededError:
            assert ledger.history() == before  # a refusal writes nothing...
            rho = step[1] if step[0] == "zcdp" else None
            eps = zcdp_epsilon(step[1], step[2]) if rho else step[1]
            wanted = composed_cost([*before, Charge(0, "default", "x", "s", eps, step[2],
                                                    *(step[3:5] if step[0] == "part" else (None, None)), rho=rho)])
            assert wanted[0] > budget[0] or wanted[1] > budget[1]  # ...and only when the definition says so
        spent = ledger.spent()
        assert spent == pytest.approx(composed_cost(ledger.history()), rel=1e-9, abs=1e-15)
        assert spent[0] <= budget[0] * (1 + REL) and spent[1] <= budget[1] * (1 + REL)


# --- hostile rho values: refused before any charge or release -------------------------------------


@pytest.mark.parametrize("rho", ["0.01", True, float("nan"), -0.0, 0.0, -1e-3, float("inf"), [], {"v": 1}])
def test_a_malformed_rho_is_an_input_error_and_charges_nothing(tmp_path, rho):
    party = _party(tmp_path)
    with pytest.raises(InputError):
        party.handle(hostile_request(STATISTICS, rho=rho))
    assert party.ledger.history() == []


@pytest.mark.parametrize("rho", [1e308, 1e200, 1e155, 5e-324])
def test_a_rho_at_the_float_edges_is_refused_before_anything_is_released(tmp_path, rho):
    # 2 rho overflows to inf at 1e308 (sigma 0) and OpenDP's conversion overflows at 1e155 and at
    # subnormal rho: the charge fails inside its transaction, so nothing is recorded or released,
    # and the error says so (it is a function of public parameters, not of the rows).
    party = _party(tmp_path)
    with pytest.raises((InputError, BudgetExceededError)):
        party.handle(hostile_request(STATISTICS, rho=rho))
    assert party.ledger.history() == []


@pytest.mark.parametrize("delta", [1.0 / 60, 0.5, 1.0, 0.0, -0.0, -1e-9, float("nan"), True, "1e-6"])
def test_a_delta_outside_zero_to_one_over_n_is_refused(tmp_path, delta):
    party = _party(tmp_path)  # 60 subjects
    with pytest.raises(InputError):
        party.handle(hostile_request(STATISTICS, delta=delta))
    assert party.ledger.history() == []


@pytest.mark.parametrize("share", [0.5, 0.9])
def test_an_honest_study_at_the_party_budget_fits_exactly_and_nothing_more_does(tmp_path, share):
    spec = DPEffectsSpec(1.0, 1e-6, (0.0, 5.0), 0.1, tuple(COLUMNS), ((0.0, 10.0), (-1.0, 1.0)),
                         nuisance_share=share)
    party = _party(tmp_path, epsilon=1.0, delta=1e-6)
    for op, (rho, delta) in zip((STATISTICS, SCORES), spec.budgets, strict=True):
        party.handle(hostile_request(op, rho=rho, delta=delta))
    eps, delta = party.ledger.spent()
    assert eps <= 1.0 and eps == pytest.approx(1.0, rel=1e-6) and delta == pytest.approx(1e-6, rel=1e-12)
    with pytest.raises(BudgetExceededError):
        party.handle(hostile_request(STATISTICS, rho=1e-9, delta=1e-15))


# --- 3. idempotent replay -----------------------------------------------------------------------------


def test_a_replayed_zcdp_release_is_the_same_numbers_and_another_rho_under_its_id_is_refused(tmp_path):
    party = _party(tmp_path)
    first = party.handle(hostile_request(STATISTICS, request_id="k"))
    again = party.handle(hostile_request(STATISTICS, request_id="k"))
    np.testing.assert_array_equal(first.arrays["values"], again.arrays["values"])
    for change in ({"rho": RHO * 1e6}, {"rho": RHO / 2}, {"delta": DELTA / 2}):
        with pytest.raises(ProtocolError):
            party.handle(hostile_request(STATISTICS, request_id="k", **change))
    assert len(party.ledger.history()) == 1
    assert party.ledger.spent() == pytest.approx((zcdp_epsilon(RHO, DELTA), DELTA))


# --- 5. a ledger written before zCDP charges ----------------------------------------------------------


def _make_old(path: Path) -> None:
    """Strip what this version added (the rho column, zcdp_totals): the file of the previous version."""
    with sqlite3.connect(path) as db:
        db.execute("ALTER TABLE charges DROP COLUMN rho")
        db.execute("DROP TABLE zcdp_totals")


def _stored_spent(path: Path) -> tuple[float, float]:
    with sqlite3.connect(path) as db:
        return db.execute("SELECT epsilon, delta FROM spent WHERE dataset = 'default'").fetchone()


def test_an_old_ledger_gains_zcdp_charges_and_its_stored_totals_stay_the_definition(tmp_path):
    path = tmp_path / "old.sqlite"
    PrivacyLedger(path, epsilon=5.0, delta=1e-4).charge("dp_count", 0.5, 1e-6)
    _make_old(path)
    ledger = PrivacyLedger(path, epsilon=5.0, delta=1e-4)
    ledger.charge_zcdp("dp_effects_statistics", RHO, DELTA)
    # a reader that ignores zcdp_totals reads `spent`: the whole composed cost
    assert _stored_spent(path) == pytest.approx(composed_cost(ledger.history()), rel=REL)
    # the previous version charges on top (it only ever adds to `spent`), then this one again
    with sqlite3.connect(path) as db:
        db.execute("INSERT INTO charges (dataset, time, operation, study, epsilon, delta, partition, subset, "
                   "details, spent_epsilon, spent_delta, relation) VALUES ('default', '', 'dp_sum', '', 0.25, "
                   "0, NULL, NULL, '{}', 0, 0, 'substitute-one')")
        db.execute("UPDATE spent SET epsilon = epsilon + 0.25 WHERE dataset = 'default'")
    ledger.charge_zcdp("dp_effects_scores", RHO, DELTA)
    assert _stored_spent(path) == pytest.approx(composed_cost(ledger.history()), rel=REL)
    assert _stored_spent(path)[0] <= 5.0 and _stored_spent(path)[0] == pytest.approx(
        0.75 + zcdp_epsilon(2 * RHO, 2 * DELTA), rel=REL)


# --- 6. secure aggregation: the honest shares carry the charged rho ------------------------------------


@pytest.mark.parametrize("n_parties", [2, 3, 10, 50])
@pytest.mark.parametrize("rho", [1e-4, RHO, 0.5, 20.0])
@pytest.mark.parametrize("length", [1, 37])
def test_the_sum_of_honest_shares_is_at_most_the_charged_rho(n_parties, rho, length):
    sigma = share_calibration(2.5, rho, n_parties=n_parties, length=length, value_bound=1e3)
    assert sum_rho(integer_sensitivity(2.5, length, SCALE_BITS), sigma, n_parties - 1, length) <= rho


# --- 7. the analyst refuses a reply whose sigma is not the one rho implies -------------------------------


@pytest.mark.parametrize("stated", [1.0 * (1 + 1e-6), 0.5, 0.0, True, "1.0", None, float("nan")])
def test_the_analyst_refuses_a_reply_stating_another_sigma(stated):
    reply = Message(STATISTICS, {} if stated is None else {"sigma": stated}, {"values": np.zeros(3)})
    with pytest.raises(StudyFailedError, match="noise sd"):
        checked_values("p", STATISTICS, reply, 1.0, 3)
    ok = Message(STATISTICS, {"sigma": 1.0}, {"values": np.zeros(3)})
    np.testing.assert_array_equal(checked_values("p", STATISTICS, ok, 1.0, 3), np.zeros(3))
