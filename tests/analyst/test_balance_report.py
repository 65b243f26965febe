"""The report's balance part: DP noise beside each SMD, the parties' spend, and honest warnings."""

from __future__ import annotations

import numpy as np

from collabcausal.analyst.balance_report import balance_warnings


def test_the_warning_states_the_per_request_guarantee_and_the_charges_per_party():
    (only,) = balance_warnings(0.5, 1e-6, ["a", "b"], 3, {"unweighted": np.array([0.01, 0.1])})
    assert "(eps = 0.5, delta = 1e-06)-DP per request" in only
    assert "each of the 2 parties (a, b) was charged 3 requests, eps 1.5 and delta 3e-06" in only
    assert "the DC-QE representations are not DP" in only


def test_a_noise_sd_above_the_balance_threshold_makes_the_diagnosis_uninformative():
    noise = {"psm": np.array([0.05, 0.4, np.inf]), "ipw": np.array([0.02, 0.03, 0.04]),
             "unweighted": np.array([np.nan])}
    warning = balance_warnings(1.0, 1e-6, ["a"], 3, noise)[1]
    # a non-finite sd (a noisy variance at or below zero) is as uninformative as a large one
    assert "exceeds 0.1 (the usual balance threshold) for psm 2 of 3, unweighted 1 of 1 covariates" in warning
    assert "(largest inf)" in warning and "the balance diagnosis is uninformative" in warning
    assert "ipw" not in warning
