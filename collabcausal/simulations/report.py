"""Write a DC-QE experiment's results: printed table, table.csv, results.json, bootstrap figure, report.html.

The report document of a simulation (:func:`simulation_document`: its estimates, balance, overlap,
bootstrap replicates and warnings) is built here from the pieces of
:mod:`collabcausal.reporting.document`, which knows nothing of simulations. Files are written to a
temporary folder and moved into place only when all are complete, so a failed run leaves no
half-written results behind.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike

from collabcausal.estimators.intervals import interval_caveat
from collabcausal.reporting.document import DC_QE_PRIVACY_NOTE, balance_entry, overlap_histogram, provenance
from collabcausal.reporting.figures import bootstrap_plot
from collabcausal.reporting.html import REPORT_HTML, write_html
from collabcausal.reporting.out_folder import check_out_folder
from collabcausal.simulations.dcqe_experiment import BalanceDiagnostics, ExperimentResult
from collabcausal.strict_json import write_json

TABLE_COLUMNS = (
    "estimator",
    "setting",
    "estimate",
    "se",
    "ci",
    "boot_mean",
    "n_failed",
    "gap",
    "inconsistency_true",
    "inconsistency_ca",
    "masmd",
)


def format_table(rows: Sequence[dict[str, object]], title: str = "") -> str:
    """The paper 003 Table 2/3 layout: value (bootstrap SE) per column.

    The first number is the full-sample estimate with the SE of the row's ``interval`` kind, then
    its 95% interval; ``Boot mean`` is the mean of the replicates (what the paper's tables print),
    ``Failed`` the replicates left out.
    """

    def cell(row: dict[str, object], key: str) -> str:
        if key == "ci":
            lo, hi = row.get("ci_low"), row.get("ci_high")
            return "-" if lo is None or hi is None else f"[{lo:.4f}, {hi:.4f}]"
        value = row.get(key)
        if value is None:
            return "-"
        if key in ("boot_mean", "n_failed"):
            return f"{value:.4f}" if key == "boot_mean" else str(value)
        se_key = "se" if key == "estimate" else f"{key}_se"
        se = row.get(se_key)
        return f"{value:.4f}" + (f" ({se:.4f})" if isinstance(se, float) else "")

    header = [
        "Estimator",
        "Setting",
        f"{str(rows[0]['estimand']).upper()} (SE)",
        f"95% CI ({rows[0].get('interval', 'percentile')})",
        "Boot mean",
        "Failed",
        "Gap",
        "Incons. true",
        "Incons. CA",
        "MASMD",
    ]
    body = [
        [str(r["estimator"]), str(r["setting"])] + [cell(r, k) for k in TABLE_COLUMNS[2:] if k != "se"] for r in rows
    ]
    widths = [max(len(x) for x in col) for col in zip(header, *body, strict=True)]
    lines = [title] if title else []
    lines.append("  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)))
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)) for line in body]
    return "\n".join(lines)


def write_results(result: ExperimentResult, out_dir: str | os.PathLike[str]) -> list[Path]:
    """Write table.csv, results.json, bootstrap.png and report.html into ``out_dir`` atomically.

    Returns the written paths. Existing files of the same names are replaced only once every new
    file is complete.
    """
    out = check_out_folder(out_dir, "--out")
    rows = result.rows()
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out.parent, prefix=f".{out.name}.tmp-") as tmp:
        staging = Path(tmp)
        pd.DataFrame(rows).to_csv(staging / "table.csv", index=False)
        meta = _metadata(result)
        write_json(staging / "results.json", {"config": meta, "rows": rows})
        plot_bootstrap(result, staging / "bootstrap.png")
        write_html(simulation_document(result, meta), staging / REPORT_HTML)
        out.mkdir(exist_ok=True)
        written = []
        for f in sorted(staging.iterdir()):
            os.replace(f, out / f.name)
            written.append(out / f.name)
    return written


def plot_bootstrap(result: ExperimentResult, path: Path) -> None:
    """Bootstrap distributions per setting, one panel per estimator (paper 003, Figs. 3-4)."""
    import matplotlib.pyplot as plt

    fig = bootstrap_figure(result)
    fig.savefig(path, dpi=120)
    plt.close(fig)


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


def _metadata(result: ExperimentResult) -> dict[str, object]:
    cfg = result.config
    return {
        "dataset": cfg.dataset.name,
        "grid": list(cfg.partition.shape),
        "column_groups": [list(g) for g in cfg.partition.column_groups],
        "settings": [
            {"name": s.name, "kind": s.kind, "parties": list(s.parties), "n_components": s.n_components}
            for s in cfg.settings
        ],
        "estimators": list(cfg.estimators),
        "estimand": cfg.estimand,
        "n_boot": cfg.n_boot,
        "interval": cfg.interval,
        "seed": cfg.seed,
        "party_components": cfg.party_components,
        "n_anchors": cfg.n_anchors or cfg.dataset.n_subjects,
        "benchmark": cfg.dataset.benchmark,
    }


def _finite(values: ArrayLike) -> list[float]:
    a = np.asarray(values, dtype=float)
    return a[np.isfinite(a)].tolist()
