"""The report's effect-modification section (collabcausal/reporting/forest.py)."""

from __future__ import annotations

from collabcausal.reporting.forest import effect_modification_section

SECTION = {
    "simultaneous": "bonferroni", "noise_growth": 2.08,
    "coefficients": [{"name": "intercept", "estimate": 0.12, "ci_low": 0.1, "ci_high": 0.14, "noise_share": 0.5},
                     {"name": "age", "estimate": 0.05, "ci_low": -0.01, "ci_high": 0.11, "noise_share": 0.9}],
    "subgroups": [{"subgroup": "sex in [0, 0.5)", "estimate": 0.2, "ci_low": 0.1, "ci_high": 0.3, "noise_share": 0.4},
                  {"subgroup": "sex in [0.5, 1]", "estimate": None, "ci_low": None, "ci_high": None,
                   "noise_share": None}],
}


def test_the_section_draws_every_estimated_row_with_its_interval_spend_and_noise_share():
    html = "".join(effect_modification_section(SECTION, {"site0": {"epsilon": 1.0, "delta": 1e-6}}))
    assert html.count("<svg") == 1
    assert "slope: age (per half range)" in html and "sex in [0, 0.5)" in html
    assert "sex in [0.5, 1]" not in html  # no estimate, no row
    assert "[-0.01, 0.11]" in html and "site0: eps 1" in html and "2.08-fold" in html and "Bonferroni" in html


def test_without_modifiers_or_subgroups_there_is_no_section():
    assert effect_modification_section(None, None) == []
    assert effect_modification_section({"coefficients": [], "subgroups": []}, None) == []
