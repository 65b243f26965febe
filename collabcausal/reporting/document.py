"""The report document: what a simulation or a served study reports, as a JSON-ready dict.

Keys (all present; empty where a study has nothing to say):

- ``title``, ``kind`` ("simulation" or "study"), ``estimand``, ``unit`` (the outcome's unit);
- ``provenance``: UTC timestamp, seed, command line, Python, platform and package versions;
- ``config``: the configuration echoed as run;
- ``estimates``: rows with setting, estimator, estimate, se, ci_low, ci_high (and more);
- ``balance``: per setting, covariates, unweighted SMD and SMD per estimator's balanced sample, and
  with DP balance moments (study.toml ``[balance]``) each SMD's DP noise sd (else None);
- ``overlap``: per setting, propensity histogram counts by arm (aggregates only, no subject's score);
- ``bootstrap``: per estimator and setting, the replicate estimates;
- ``privacy``: per party, the (epsilon, delta) spent (None for a party whose releases are not DP), or
  None; ``privacy_note`` says what is not DP;
- ``warnings``: one sentence each (failed replicates, clipping, W-clb vs CA drift, missing parties).
"""

from __future__ import annotations

import datetime as _dt
import platform
import sys
from collections.abc import Mapping, Sequence
from importlib import metadata
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from collabcausal.estimators.intervals import interval_caveat
from collabcausal.reporting.figures import bootstrap_plot
from collabcausal.simulations.dcqe_experiment import BalanceDiagnostics, ExperimentResult

PACKAGES = (
    "collabcausal",
    "numpy",
    "scipy",
    "scikit-learn",
    "pandas",
    "matplotlib",
    "grpcio",
    "protobuf",
    "cryptography",
    "opendp",
    "interpret-core",
)
OVERLAP_BINS = 20
DC_QE_PRIVACY_NOTE = (
    "No differentially private release: DC-QE intermediate representations and balance moments are "
    "not DP (their protection is that each party's reducer stays with the party, paper 003, section 4.2)."
)


def provenance(seed: int | None, argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Timestamp (UTC), seed, command line, Python, platform and installed package versions."""
    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return {
        "timestamp": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "seed": seed,
        "command": list(sys.argv if argv is None else argv),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "versions": versions,
    }


def overlap_histogram(propensity: ArrayLike, treatment: ArrayLike, bins: int = OVERLAP_BINS) -> dict[str, list]:
    """Counts of subjects per propensity bin on [0, 1], by arm."""
    e, t = np.asarray(propensity, dtype=float), np.asarray(treatment)
    edges = np.linspace(0.0, 1.0, bins + 1)
    return {
        "edges": edges.tolist(),
        "treated": np.histogram(e[t == 1], edges)[0].tolist(),
        "control": np.histogram(e[t == 0], edges)[0].tolist(),
    }


def balance_entry(
    covariates: Sequence[str],
    unweighted: ArrayLike | None,
    weighted: Mapping[str, ArrayLike],
    noise_sd: Mapping[str, ArrayLike | None] | None = None,
) -> dict:
    """One setting's SMDs, JSON-ready (non-finite values become None).

    ``noise_sd`` maps ``"unweighted"`` and estimators to the DP noise sd of their SMDs (DP balance
    moments); None for exact moments.
    """

    def clean(values: ArrayLike) -> list[float | None]:
        return [float(v) if np.isfinite(v) else None for v in np.asarray(values, dtype=float)]

    return {
        "covariates": list(covariates),
        "unweighted": None if unweighted is None else clean(unweighted),
        "weighted": {k: clean(v) for k, v in weighted.items()},
        "noise_sd": None if noise_sd is None else {k: None if v is None else clean(v) for k, v in noise_sd.items()},
    }


def simulation_document(
    result: ExperimentResult, config: Mapping[str, Any], *, argv: Sequence[str] | None = None
) -> dict[str, Any]:
    """The report of one ``collabcausal simulate`` run (paper 003's settings on a grid)."""
    cfg = result.config
    diagnostics: dict[str, BalanceDiagnostics] = result.diagnostics
    return {
        "title": f"Simulation: {cfg.dataset.name}, {cfg.partition.shape[0]}x{cfg.partition.shape[1]} grid of parties",
        "kind": "simulation",
        "estimand": cfg.estimand,
        "unit": cfg.dataset.outcome_unit or f"units of {cfg.dataset.outcome}",
        "benchmark": cfg.dataset.benchmark,
        "provenance": provenance(cfg.seed, argv),
        "config": dict(config),
        "estimates": result.rows(),
        "balance": {name: balance_entry(d.covariates, d.unweighted, d.weighted) for name, d in diagnostics.items()},
        "overlap": {name: overlap_histogram(d.propensity, d.treatment) for name, d in diagnostics.items()},
        "bootstrap": bootstrap_replicates(result) if cfg.n_boot else {},
        "privacy": None,
        "privacy_note": DC_QE_PRIVACY_NOTE,
        "warnings": simulation_warnings(result),
    }


def bootstrap_replicates(result: ExperimentResult) -> dict[str, dict[str, list[float]]]:
    """Finite replicate estimates per estimator and setting (the full-sample estimate if B = 0)."""
    cfg = result.config
    out: dict[str, dict[str, list[float]]] = {}
    for estimator in cfg.estimators:
        out[estimator] = {}
        for s in cfg.settings:
            reps = _finite(result.replicates[(s.name, estimator)]["estimate"])
            out[estimator][s.name] = reps or _finite([result.point[(s.name, estimator)]["estimate"]])
    return out


def bootstrap_figure(result: ExperimentResult):
    """The bootstrap figure of a simulation (bootstrap.png and the report), as a matplotlib Figure."""
    cfg = result.config
    return bootstrap_plot(
        bootstrap_replicates(result),
        estimand=cfg.estimand,
        unit=cfg.dataset.outcome_unit or f"units of {cfg.dataset.outcome}",
        benchmark=cfg.dataset.benchmark,
        n_boot=cfg.n_boot,
    )


PROPENSITY_DRIFT_WARNING = 0.02


def simulation_warnings(result: ExperimentResult) -> list[str]:
    """Failed replicates, collaborations whose propensities drift from CA's, intervals not valid for
    an estimator (:func:`~collabcausal.estimators.intervals.interval_caveat`), and W-clb estimates
    further than one bootstrap SE of CA from CA.

    The drift is the mean absolute difference between a collaboration's propensities and CA's
    (the "Incons. CA" column); above :data:`PROPENSITY_DRIFT_WARNING` the reduction (m~ below the
    party's covariates) or the row split loses information the centralized analysis uses.
    """
    cfg = result.config
    out = []
    seen = set()
    for row in result.rows():
        drift, setting = row.get("inconsistency_ca"), str(row["setting"])
        if setting.endswith("-clb") and drift is not None and np.isfinite(drift) and setting not in seen:
            seen.add(setting)
            if drift > PROPENSITY_DRIFT_WARNING:
                out.append(
                    f"{setting} propensities differ from CA's by {drift:.3g} on average (more than "
                    f"{PROPENSITY_DRIFT_WARNING:g}): the reduction m~ or the row split loses information; "
                    "compare with more components per party."
                )
    for (setting, estimator), reps in result.replicates.items():
        failed = int(np.isnan(reps["estimate"]).sum())
        if failed:
            reasons = result.failures.get((setting, estimator), {})
            why = "; ".join(f"{count} x {reason}" for reason, count in sorted(reasons.items(), key=lambda i: -i[1]))
            out.append(
                f"{setting} {estimator.upper()}: {failed} of {len(reps['estimate'])} bootstrap replicates failed "
                f"and are left out of the mean, SE and interval: {why or 'numerical error'}."
            )
    out += [w for w in (interval_caveat(k, cfg.interval) for k in cfg.estimators) if w]
    names = {s.name for s in cfg.settings}
    if {"W-clb", "CA"} <= names and cfg.n_boot > 1:
        for estimator in cfg.estimators:
            w = _finite(result.replicates[("W-clb", estimator)]["estimate"])
            ca = _finite(result.replicates[("CA", estimator)]["estimate"])
            if len(w) > 1 and len(ca) > 1:
                drift, se = abs(np.mean(w) - np.mean(ca)), float(np.std(ca, ddof=1))
                if drift > se:
                    out.append(
                        f"W-clb {estimator.upper()} differs from CA by {drift:.3g}, more than one bootstrap SE of "
                        f"CA ({se:.3g}): the collaboration does not reproduce the centralized analysis here."
                    )
    return out


def study_document(
    report: Mapping[str, Any],
    config: Mapping[str, Any],
    *,
    seed: int | None,
    argv: Sequence[str] | None = None,
) -> dict[str, Any]:
    """The report of one study served by ``collabcausal analyst serve``.

    Parameters
    ----------
    report : mapping
        The study's report.json: estimates, weighted ``smd`` per estimator, ``smd_unweighted``
        and ``propensity_overlap`` (histogram counts), ``missing_parties``, ``alignment`` and,
        where parties report it, ``privacy`` (spend per party) with its ``privacy_note``; with
        DP balance moments ``smd_noise_sd`` (per estimator) and ``smd_unweighted_noise_sd``.
    config : mapping
        The study configuration to echo (study.toml as read).
    seed : int or None
    """
    estimand = str(report["estimand"])
    rows = [
        {"setting": "all parties", "estimator": name, "estimand": estimand, **row}
        for name, row in report["estimates"].items()
    ]
    warnings = [f"party {p} did not join; the study ran without it." for p in report.get("missing_parties", [])]
    for group, outcome in report.get("alignment", {}).items():
        if outcome.get("unmatched"):
            warnings.append(f"alignment of {group}: unmatched subjects left out: {outcome['unmatched']}.")
    warnings += list(report.get("warnings", []))
    spend = report.get("privacy")
    smd = report.get("smd", {})
    covariates = list(report.get("smd_unweighted") or next(iter(smd.values()), {}))
    balance = {}
    if covariates:
        unweighted = report.get("smd_unweighted")
        before = None if unweighted is None else [unweighted[c] for c in covariates]
        noise = report.get("smd_noise_sd")
        noise_before = report.get("smd_unweighted_noise_sd")
        sds = None if noise is None and noise_before is None else {
            "unweighted": None if noise_before is None else [noise_before[c] for c in covariates],
            **{k: [v[c] for c in covariates] for k, v in (noise or {}).items()},
        }
        balance["all parties"] = balance_entry(
            covariates, before, {k: [v[c] for c in covariates] for k, v in smd.items()}, sds
        )
    overlap = {"all parties": report["propensity_overlap"]} if report.get("propensity_overlap") else {}
    return {
        "title": f"Study {report['study']}",
        "kind": "study",
        "estimand": estimand,
        "unit": "outcome units",
        "benchmark": None,
        "provenance": provenance(seed, argv),
        "config": dict(config),
        "estimates": rows,
        "balance": balance,
        "overlap": overlap,
        "bootstrap": {},
        "privacy": spend,
        "dp_effects": report.get("dp_effects"),
        "privacy_note": report.get("privacy_note")
        or (DC_QE_PRIVACY_NOTE if not spend or any(s["epsilon"] is None for s in spend.values()) else ""),
        "warnings": warnings,
    }


def _finite(values: ArrayLike) -> list[float]:
    a = np.asarray(values, dtype=float)
    return a[np.isfinite(a)].tolist()
