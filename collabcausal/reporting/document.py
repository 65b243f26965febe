"""The report document: what a simulation or a served study reports, as a JSON-ready dict.

The pieces every report shares are here (:func:`provenance`, :func:`balance_entry`,
:func:`overlap_histogram`) with the document of a served study (:func:`study_document`); a
simulation's document is built from them by :func:`collabcausal.simulations.report.simulation_document`.

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
- ``warnings``: one sentence each (failed replicates, clipping, W-clb vs CA drift, missing parties);
- ``notes``: information about the method, one sentence each (what is DP, what the interval counts):
  shown, never counted as a warning.
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
        "effect_modification": report.get("effect_modification"),
        "privacy_note": report.get("privacy_note")
        or (DC_QE_PRIVACY_NOTE if not spend or any(s["epsilon"] is None for s in spend.values()) else ""),
        "warnings": warnings,
        "notes": list(report.get("notes", [])),
    }
