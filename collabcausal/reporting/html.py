"""Render a report document (:mod:`collabcausal.reporting.document`) as one self-contained HTML file.

The page needs no network access: CSS is inline and figures are inline SVG. A six-line script
at the end counts the figures the browser actually laid out into ``data-figures-shown`` on
``<body>`` (``data-figures`` is how many there are), which the browser test checks; the page
writes nothing to the console.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from html import escape
from pathlib import Path
from typing import Any

from collabcausal.estimators.balance import SMD_THRESHOLD
from collabcausal.reporting.figures import bootstrap_plot, love_plot, overlap_plot, to_svg
from collabcausal.reporting.forest import effect_modification_section

REPORT_HTML = "report.html"

CSS = """
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #1d1d1f;
       max-width: 1180px; margin: 0 auto; padding: 24px 28px 60px; background: #fff; }
h1 { font-size: 26px; margin: 0 0 4px; } h2 { font-size: 20px; margin: 34px 0 10px;
     border-bottom: 1px solid #ddd; padding-bottom: 4px; }
.meta { color: #555; margin: 0 0 18px; }
table { border-collapse: collapse; margin: 8px 0 14px; font-size: 14px; }
th, td { border-bottom: 1px solid #e3e3e3; padding: 4px 12px 4px 0; text-align: left; vertical-align: top; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.warnings { background: #fff4e5; border-left: 4px solid #e08a00; padding: 8px 14px; }
.ok { background: #eef8ee; border-left: 4px solid #3a9a3a; padding: 8px 14px; }
.notes { background: #eef3fb; border-left: 4px solid #3a6ab0; padding: 8px 14px; margin-top: 8px; }
figure { margin: 14px 0 22px; } figure svg { max-width: 100%; height: auto; }
figcaption { color: #444; font-size: 13px; margin-top: 4px; }
pre { background: #f6f6f6; padding: 10px; overflow-x: auto; font-size: 12.5px; }
"""

SELF_CHECK = """<script>
(function () {
  var shown = 0;
  document.querySelectorAll("figure svg").forEach(function (svg) {
    var box = svg.getBoundingClientRect(); if (box.width > 0 && box.height > 0) { shown += 1; } });
  document.body.setAttribute("data-figures-shown", String(shown));
})();
</script>"""

ESTIMATE_COLUMNS = (
    ("setting", "setting"),
    ("estimator", "estimator"),
    ("estimate", "full-sample estimate"),
    ("se", "SE"),
    ("ci_low", "95% CI low"),
    ("ci_high", "95% CI high"),
    ("interval", "interval"),
    ("gap", "gap from benchmark"),
    ("masmd", "MASMD"),
    ("boot_mean", "bootstrap mean"),
    ("n_failed", "failed replicates"),
    ("direction", "direction"),
    ("noise_sd", "DP noise sd"),
    ("noise_share", "DP noise share of the variance"),
    ("dp_floor", "DP floor (noise sd of the estimate)"),
    ("no_interval", "no interval because"),
    ("adjustment", "what the estimate adjusts for"),
)


def render_html(doc: Mapping[str, Any]) -> str:
    """The report page as a string."""
    figures = _figures(doc)
    prov = doc["provenance"]
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{escape(doc['title'])}</title><style>{CSS}</style></head>",
        f'<body data-figures="{len(figures)}">',
        f"<h1>{escape(doc['title'])}</h1>",
        f'<p class="meta">{escape(prov["timestamp"])} &middot; seed {escape(str(prov["seed"]))}'
        + (" (the DP noise is not seeded: every run differs)" if doc.get("dp_effects") else "") + " &middot; "
        f"collabcausal {escape(prov['versions'].get('collabcausal', '?'))}</p>",
        _warnings(doc["warnings"]),
        *_notes(doc.get("notes", [])),
        "<h2>Estimates</h2>",
        f"<p>{escape(doc['estimand'].upper())} in {escape(doc['unit'])}"
        + ("" if doc.get("benchmark") is None else f"; benchmark {doc['benchmark']:.4g}")
        + f". {escape(interval_sentence(doc['estimates']))}</p>",
        _estimates_table(doc["estimates"]),
    ]
    for heading, svg, caption in figures:
        parts += [f"<h2>{escape(heading)}</h2>", f"<figure>{svg}<figcaption>{escape(caption)}</figcaption></figure>"]
    parts += _dp_balance(doc["balance"])
    parts += _dp_effects(doc.get("dp_effects"))
    parts += effect_modification_section(doc.get("effect_modification"), doc.get("privacy"))
    parts += [
        "<h2>Privacy spend per party</h2>",
        _privacy(doc.get("privacy"), doc.get("privacy_note", "")),
        "<h2>Configuration</h2>",
        _table(["key", "value"], [[key, _compact(value)] for key, value in doc["config"].items()]),
        "<h2>Software</h2>",
        _table(
            ["", ""],
            [
                ["command", " ".join(prov["command"])],
                ["python", prov["python"]],
                ["platform", prov["platform"]],
                *[[name, version] for name, version in prov["versions"].items()],
            ],
        ),
        SELF_CHECK,
        "</body></html>",
    ]
    return "\n".join(parts) + "\n"


def write_html(doc: Mapping[str, Any], path: str | os.PathLike[str]) -> Path:
    """Write the page atomically (a temporary file renamed into place); return its path."""
    path = Path(path)
    text = render_html(doc)
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(text, encoding="utf-8")
    os.replace(partial, path)
    return path


def _figures(doc: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    """(heading, inline svg, caption) of every figure the document has data for."""
    out = []
    balance = doc["balance"]
    estimators = list(dict.fromkeys(k for entry in balance.values() for k in entry["weighted"]))
    reference = "CA" if "CA" in balance else next(iter(balance), None)
    for estimator in estimators:
        ref = balance[reference]
        covariates = ref["covariates"]
        weighted = {
            f"{setting} weighted": _aligned(entry, entry["weighted"][estimator], covariates)
            for setting, entry in balance.items()
            if estimator in entry["weighted"]
        }
        noisy = {
            f"{setting} weighted": _aligned(entry, entry["noise_sd"][estimator], covariates)
            for setting, entry in balance.items()
            if (entry.get("noise_sd") or {}).get(estimator) is not None
        }
        before_sd = (ref.get("noise_sd") or {}).get("unweighted")
        fig = love_plot(
            covariates,
            _aligned(ref, ref["unweighted"] or [None] * len(covariates), covariates),
            weighted,
            title=f"Covariate balance, {estimator.upper()}: |SMD| before and after weighting",
            unweighted_sd=None if before_sd is None else _aligned(ref, before_sd, covariates),
            weighted_sd=noisy or None,
        )
        caption = (
            f"Love plot. Open circles: the unweighted sample ({reference}); filled markers: the {estimator.upper()} "
            "balanced sample of each setting (federated moments, paper 003 eqs. 42-44). Left of the dashed line "
            "is conventionally balanced."
            + (" Error bars: +- one DP noise sd of the SMD (differentially private moments)." if noisy else "")
        )
        out.append((f"Covariate balance: {estimator.upper()}", to_svg(fig), caption))
    if doc["overlap"]:
        fig = overlap_plot(doc["overlap"], title="Propensity score overlap by arm")
        caption = (
            "Share of each arm's subjects per propensity bin (bin counts only). Regions where one arm has no "
            "subjects have no overlap: estimates there rest on extrapolation."
        )
        out.append(("Propensity overlap", to_svg(fig), caption))
    if doc["bootstrap"]:
        n_boot = doc["config"].get("n_boot")
        fig = bootstrap_plot(
            doc["bootstrap"], estimand=doc["estimand"], unit=doc["unit"], benchmark=doc.get("benchmark"), n_boot=n_boot
        )
        caption = "Boxes: quartiles of the bootstrap replicates; whiskers: 1.5 IQR; dashed line: the benchmark."
        out.append(("Bootstrap distributions", to_svg(fig), caption))
    return out


def _aligned(entry: Mapping[str, Any], values: Sequence[float | None], covariates: Sequence[str]) -> list[float]:
    """``values`` (one per covariate of ``entry``), absolute, in the order of ``covariates`` (NaN where missing)."""
    by_name = dict(zip(entry["covariates"], values, strict=True))
    return [abs(by_name[c]) if by_name.get(c) is not None else float("nan") for c in covariates]


def _dp_balance(balance: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """A table of each SMD beside its DP noise sd, per setting with DP balance moments (else nothing)."""
    parts = []
    for setting, entry in balance.items():
        noise = entry.get("noise_sd")
        if not noise:
            continue
        samples = {"unweighted": entry["unweighted"], **entry["weighted"]}
        shown = [name for name in samples if samples[name] is not None]
        sds = {name: noise.get(name) or [None] * len(entry["covariates"]) for name in shown}
        header = ["covariate"] + [h for name in shown for h in (f"{name} SMD", "DP noise sd")]
        rows = [
            [covariate] + [v for name in shown for v in (samples[name][k], sds[name][k])]
            for k, covariate in enumerate(entry["covariates"])
        ]
        parts += [f"<p>{escape(setting)}: each SMD beside the DP noise sd of the SMD (first order).</p>",
                  _table(header, rows)]
    if not parts:
        return []
    intro = (
        "<p>The balance moments are differentially private (study.toml [balance]): an SMD whose noise sd "
        f"exceeds {SMD_THRESHOLD:g}, the usual balance threshold, says nothing about balance.</p>"
    )
    return ["<h2>Balance diagnostics under DP noise</h2>", intro, *parts]


def _dp_effects(release: Mapping[str, Any] | None) -> list[str]:
    """How the dp_effects estimates were released (kind dp_effects), else nothing."""
    if not release:
        return []
    secure = "yes: the coordinator saw only sums over parties" if release["secure_aggregation"] else (
        "no: each party's release was seen")
    unpinned = release.get("secure_aggregation_unpinned") or []
    if release["secure_aggregation"] and unpinned:
        secure += (f"; {', '.join(unpinned)} trust the coordinator's roster (peers = \"any\"): "
                   "protected only against an honest-but-curious coordinator")
    columns = release.get("column_groups")
    if columns:
        secure = ("column groups: each row group's label holder and other party computed both releases under "
                  "CKKS encryption, each adding a noise share; row groups " + (
                      "summed under secure aggregation" if release["secure_aggregation"] else "summed in the clear"))
    rows = [
        ["secure aggregation", secure],
        *([["covariates each party holds", _compact(columns)],
           ["weight polynomial", _compact(release["weight_polynomial"])]] if columns else []),
        ["subjects per party" if not columns else "subjects per row group (label holder)",
         _compact(release["n_subjects"])],
        ["nuisance models", f"{release['nuisance']}, {release['n_folds']} fold(s)"],
        ["propensity trimming", release["trim"]],
        ["DP noise sd of each released sum", _compact(release["scores_noise_sd"])],
    ]
    return ["<h2>Differentially private release</h2>",
            "<p>Each party released two DP aggregates of its own rows (with column groups: of the row group's "
            "joined rows, computed under encryption); the estimates, intervals and the noise share above are computed "
            "from them (docs/dp-effects.md, docs/dp-effects-vertical.md).</p>", _table(["", ""], rows)]


def _compact(value: Any) -> Any:
    """Numbers and strings as they are; lists and mappings as one-line JSON."""
    return value if isinstance(value, (str, int, float)) or value is None else json.dumps(value, default=str)


INTERVAL_NAMES = {"percentile": "bootstrap percentile", "bca": "bootstrap BCa", "analytic": "analytic"}


def interval_sentence(rows: Sequence[Mapping[str, Any]]) -> str:
    """What the intervals of ``rows`` are, from the rows themselves (each row's ``interval`` and ``alpha``)."""
    kinds = {}
    for row in rows:
        if row.get("ci_low") is not None:
            level = round(100 * (1 - row.get("alpha", 0.05)))
            kinds.setdefault(f"{level}% {INTERVAL_NAMES.get(row.get('interval'), row.get('interval'))}", None)
    without = sum(row.get("ci_low") is None for row in rows)
    parts = [", ".join(kinds)] if kinds else []
    if without:
        parts.append(f"{without} of {len(rows)} estimates without an interval")
    return "Intervals: " + ("; ".join(parts) or "none") + "."


def _notes(notes: Sequence[str]) -> list[str]:
    """What the method is and what its interval counts: information, apart from the warnings."""
    if not notes:
        return []
    return ['<div class="notes"><strong>Notes</strong><ul>' + "".join(f"<li>{escape(n)}</li>" for n in notes)
            + "</ul></div>"]


def _warnings(warnings: Sequence[str]) -> str:
    if not warnings:
        return '<div class="ok">No warnings.</div>'
    items = "".join(f"<li>{escape(w)}</li>" for w in warnings)
    return f'<div class="warnings"><strong>Warnings ({len(warnings)})</strong><ul>{items}</ul></div>'


def _estimates_table(rows: Sequence[Mapping[str, Any]]) -> str:
    columns = [(key, label) for key, label in ESTIMATE_COLUMNS if any(r.get(key) is not None for r in rows)]
    return _table([label for _, label in columns], [[r.get(key) for key, _ in columns] for r in rows])


def _privacy(spend: Mapping[str, Mapping[str, float]] | None, note: str) -> str:
    text = f"<p>{escape(note)}</p>" if note else ""
    if not spend:
        return text
    rows = [[party, s.get("epsilon"), s.get("delta")] for party, s in spend.items()]
    return _table(["party", "epsilon spent", "delta spent"], rows) + text


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    def cell(value: Any) -> str:
        if value is None:
            return "<td>-</td>"
        if isinstance(value, float):
            return f'<td class="num">{value:.4g}</td>'
        if isinstance(value, int):
            return f'<td class="num">{value}</td>'
        return f"<td>{escape(str(value))}</td>"

    head = "".join(f"<th>{escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(cell(v) for v in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
