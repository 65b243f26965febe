"""The report's balance part: DP noise beside each SMD, the parties' spend, and honest warnings."""

from __future__ import annotations

import numpy as np
import pytest

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
    # an undefined SMD (NaN: an arm's noisy spread <= 0) is as uninformative as a large noise sd
    assert "exceeds 0.1 (the usual balance threshold) or the SMD is undefined for psm 2 of 3, unweighted 1 of 1" \
        in warning
    assert "(largest 0.4; 1 undefined: an arm's noisy spread <= 0" in warning
    assert "the balance diagnosis is uninformative" in warning and "ipw" not in warning


def test_undefined_dp_smds_are_listed_with_their_reason_and_written_as_null():
    import json
    from types import SimpleNamespace

    from collabcausal.analyst.balance import DPBalanceSpec
    from collabcausal.analyst.balance_report import UNDEFINED_SMD, balance_report
    from collabcausal.strict_json import dumps

    result = SimpleNamespace(
        covariates=("p1:a", "p1:b"),
        smd={"psm": np.array([0.2, np.nan])},
        smd_unweighted=np.array([0.1, 0.3]),
        smd_noise_sd={"psm": np.array([0.05, np.nan])},
        smd_unweighted_noise_sd=np.array([0.01, 0.02]),
        balance_requests=2,
    )
    plan = SimpleNamespace(dp_balance=DPBalanceSpec(1.0, 1e-6), balance_parties=(("p1",),))
    report = balance_report(result, plan)
    assert report["undefined"] == {"smd/psm/p1:b": UNDEFINED_SMD, "smd_noise_sd/psm/p1:b": UNDEFINED_SMD}
    written = json.loads(dumps(report), parse_constant=lambda name: pytest.fail(f"{name} in strict JSON"))
    assert written["smd"]["psm"] == {"p1:a": 0.2, "p1:b": None}
    assert written["undefined"]["smd/psm/p1:b"].startswith("undefined: an arm's noisy spread")
