"""The report document of a simulation and of a served study."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np

from collabcausal.estimators.balance import smd
from collabcausal.reporting.document import overlap_histogram, simulation_document, study_document
from collabcausal.simulations.dcqe_experiment import ExperimentResult


def test_simulation_document_has_every_section_and_is_json_ready(small_result) -> None:
    doc = simulation_document(small_result, {"n_boot": 6}, argv=["collabcausal", "simulate"])
    json.dumps(doc, allow_nan=False)
    assert set(doc["balance"]) == set(doc["overlap"]) == {"L-IA", "W-clb", "CA"}
    assert doc["provenance"]["seed"] == 0 and doc["provenance"]["versions"]["numpy"] == np.__version__
    assert doc["provenance"]["timestamp"].endswith("+00:00")
    assert {r["setting"] for r in doc["estimates"]} == {"L-IA", "W-clb", "CA"}
    assert all(r["ci_low"] <= r["boot_mean"] <= r["ci_high"] and np.isfinite(r["estimate"]) for r in doc["estimates"])
    assert set(doc["bootstrap"]) == {"psm", "ipw", "aipw"} and len(doc["bootstrap"]["ipw"]["CA"]) == 6
    assert doc["privacy"] is None and "not DP" in doc["privacy_note"]


def test_balance_before_weighting_is_the_raw_smd_and_the_federated_one_matches(small_result) -> None:
    data = small_result.config.dataset
    X, t, _ = data.arrays
    doc = simulation_document(small_result, {})
    ca, w = doc["balance"]["CA"], doc["balance"]["W-clb"]
    np.testing.assert_allclose(ca["unweighted"], smd(X, t), rtol=1e-9)
    # W-clb uses every subject too: its federated unweighted SMD is the same, by covariate name
    by_name = dict(zip(w["covariates"], w["unweighted"], strict=True))
    np.testing.assert_allclose([by_name[c] for c in ca["covariates"]], ca["unweighted"], rtol=1e-9)
    assert set(ca["weighted"]) == set(w["weighted"]) == {"psm", "ipw"}  # AIPW defines no balanced sample


def test_overlap_counts_every_subject_once_per_arm() -> None:
    e = np.array([0.0, 0.05, 0.5, 0.99, 1.0, 0.3])
    t = np.array([0, 0, 1, 1, 1, 0])
    h = overlap_histogram(e, t, bins=4)
    assert h["edges"] == [0.0, 0.25, 0.5, 0.75, 1.0]
    assert h["control"] == [2, 1, 0, 0] and h["treated"] == [0, 0, 1, 2]


def _with_estimates(result: ExperimentResult, w: np.ndarray, ca: np.ndarray) -> ExperimentResult:
    replicates = {key: dict(value) for key, value in result.replicates.items()}
    for estimator in result.config.estimators:
        replicates[("W-clb", estimator)]["estimate"] = w
        replicates[("CA", estimator)]["estimate"] = ca
    return replace(result, replicates=replicates)


def test_warnings_name_failed_replicates_and_w_clb_drift_from_ca(small_result) -> None:
    ca = np.array([1.0, 1.1, 0.9, 1.0, 1.05, 0.95])  # bootstrap SE about 0.07
    def estimate_drift(warnings):  # the fixture's reduced W-clb also carries a (true) propensity-drift warning
        return [w for w in warnings if "differs from CA by" in w]

    assert estimate_drift(simulation_document(_with_estimates(small_result, ca + 0.05, ca), {})["warnings"]) == []
    drifted = estimate_drift(simulation_document(_with_estimates(small_result, ca + 0.5, ca), {})["warnings"])
    assert len(drifted) == 3 and all(w.startswith("W-clb") and "differs from CA by 0.5" in w for w in drifted)
    failed = ca.copy()
    failed[[1, 4]] = np.nan
    warnings = simulation_document(_with_estimates(small_result, ca, failed), {})["warnings"]
    assert any(w.startswith("CA PSM: 2 of 6 bootstrap replicates failed") for w in warnings)


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


def test_propensity_drift_of_a_reduced_collaboration_is_warned_about_and_full_rank_is_not():
    from collabcausal.reporting.document import simulation_warnings
    from collabcausal.simulations.datasets import load_lalonde
    from collabcausal.simulations.dcqe_experiment import ExperimentConfig, run_experiment
    from collabcausal.simulations.partition import partition_grid
    from collabcausal.simulations.settings import parse_settings

    data = load_lalonde()
    part = partition_grid(data, 2, seed=0)

    def warnings(components):
        config = ExperimentConfig(
            data, part, parse_settings(["W", "CA"], part), n_boot=2, party_components=components, estimators=("ipw",)
        )
        return simulation_warnings(run_experiment(config, progress=False))

    reduced = warnings(1)  # one component of four per party: seeded, drift 0.036
    assert any(w.startswith("W-clb propensities differ from CA's by 0.036") for w in reduced)
    assert not any("propensities differ" in w for w in warnings(4))  # full rank: drift ~1e-15


def test_a_replicate_that_truly_cannot_be_estimated_is_named_in_the_warning():
    """Two treated among 80: some seeded resamples of the one row group draw no treated subject."""
    import numpy as np
    import pandas as pd

    from collabcausal.reporting.document import simulation_warnings
    from collabcausal.simulations.datasets import CausalDataset
    from collabcausal.simulations.dcqe_experiment import ExperimentConfig, run_experiment
    from collabcausal.simulations.partition import partition_grid
    from collabcausal.simulations.settings import parse_settings

    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"a": rng.normal(size=80), "b": rng.normal(size=80), "t": [1, 1] + [0] * 78,
                          "y": rng.normal(size=80)})
    data = CausalDataset("tiny", frame, ("a", "b"), "t", "y", column_groups=(("a",), ("b",)))
    part = partition_grid(data, 1, seed=0)
    config = ExperimentConfig(data, part, parse_settings(["CA"], part), n_boot=20, estimators=("ipw",))
    result = run_experiment(config, progress=False)
    failed = int(np.isnan(result.replicates[("CA", "ipw")]["estimate"]).sum())
    reasons = result.failures[("CA", "ipw")]
    assert failed > 0 and sum(reasons.values()) == failed
    missing = reasons["the resample draws no treated subject in row group 1"]
    warning = " ".join(simulation_warnings(result))
    head = f"CA IPW: {failed} of 20 bootstrap replicates failed and are left out of the mean, SE and interval: "
    assert head in warning
    assert f"{missing} x the resample draws no treated subject in row group 1" in warning
