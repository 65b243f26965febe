"""The report document's shared pieces and the document of a served study."""

from __future__ import annotations

import numpy as np

from collabcausal.reporting.document import overlap_histogram, study_document


def test_overlap_counts_every_subject_once_per_arm() -> None:
    e = np.array([0.0, 0.05, 0.5, 0.99, 1.0, 0.3])
    t = np.array([0, 0, 1, 1, 1, 0])
    h = overlap_histogram(e, t, bins=4)
    assert h["edges"] == [0.0, 0.25, 0.5, 0.75, 1.0]
    assert h["control"] == [2, 1, 0, 0] and h["treated"] == [0, 0, 1, 2]


def test_study_document_from_report_json() -> None:
    report = {
        "study": "s1",
        "seed": 3,
        "estimand": "att",
        "estimates": {"ipw": {"estimate": 1.5, "se": 0.2, "ci_low": 1.1, "ci_high": 1.9, "masmd": 0.1}},
        "smd": {"ipw": {"p11:age": 0.05, "p12:re74": -0.02}},
        "smd_unweighted": {"p11:age": 0.8, "p12:re74": -1.2},
        "propensity_overlap": overlap_histogram([0.1, 0.7], [0, 1]),
        "missing_parties": ["p22"],
        "alignment": {},
    }
    doc = study_document(report, {"study": {"id": "s1"}}, seed=3)
    assert doc["balance"]["all parties"] == {
        "covariates": ["p11:age", "p12:re74"],
        "unweighted": [0.8, -1.2],
        "weighted": {"ipw": [0.05, -0.02]},
        "noise_sd": None,
    }
    assert doc["estimates"][0]["estimator"] == "ipw" and doc["provenance"]["seed"] == 3
    assert doc["warnings"] == ["party p22 did not join; the study ran without it."]
