"""The report document of a DC-QE simulation: every section, its balance, and the warnings it gives."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np

from collabcausal.estimators.balance import smd
from collabcausal.simulations.dcqe_experiment import ExperimentResult
from collabcausal.simulations.report import bootstrap_figure, simulation_document, simulation_warnings


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


def test_propensity_drift_of_a_reduced_collaboration_is_warned_about_and_full_rank_is_not():
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


def test_bootstrap_figure_names_the_estimand_and_the_outcome_unit(small_result) -> None:
    from collabcausal.reporting.figures import to_svg

    fig = bootstrap_figure(small_result)
    axes = [ax for ax in fig.axes if ax.get_visible()]
    assert axes and all(ax.get_title() or fig._suptitle is not None for ax in axes)
    assert all(ax.get_xlabel() and ax.get_ylabel() and ax.get_legend() is not None for ax in axes)
    assert fig.axes[0].get_ylabel() == "ATE estimate (outcome units)"
    assert to_svg(fig).startswith("<svg")
