"""Write a DC-QE experiment's results: printed table, table.csv, results.json, bootstrap figure, report.html.

Files are written to a temporary folder and moved into place only when all are complete, so a
failed run leaves no half-written results behind.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from collabcausal.reporting.document import bootstrap_figure, simulation_document
from collabcausal.reporting.html import REPORT_HTML, write_html
from collabcausal.reporting.out_folder import check_out_folder
from collabcausal.simulations.dcqe_experiment import ExperimentResult
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
