"""``collabcausal analyst serve --study study.toml``: run a study as its coordinator.

``serve --check`` validates study.toml, the report folder and the analyst's certificate without
listening, and prints what the study would ask of the parties; ``init`` writes a commented
study.toml.
"""

from __future__ import annotations

import argparse
import logging
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from collabcausal.errors import CollabCausalError
from collabcausal.logs import log_progress
from collabcausal.strict_json import write_json

if TYPE_CHECKING:
    from collabcausal.analyst.config import StudyConfig
    from collabcausal.analyst.grid import Grid

REPORT = "report.json"
log = logging.getLogger(__name__)

DESCRIPTION = """\
Run a study as its coordinator. The analyst listens (mutual TLS by default), waits for the
parties of the roster to dial in, aligns the subjects of vertically split row groups if the study
asks for it, runs the study's kind over the parties ([study] kind: "dcqe", DC-QE of paper 003, by
default; "adum", "cate" or "discovery" with their own section, docs/protocol.md), writes
report.json and report.html to the study's out folder, prints the estimates and tells the parties
the study is over. Progress, one line per party event, goes to stderr.

examples:
  # the study CA and the analyst's certificate, once
  collabcausal certs init --dir certs
  collabcausal certs issue --analyst --host coordinator.example.org --dir certs
  # a commented study.toml to fill in, then check it (certificates too) without listening
  collabcausal analyst init --out study.toml
  collabcausal analyst serve --study study.toml --check
  # serve the study; it ends when every party has answered
  collabcausal analyst serve --study study.toml
  # a local trial without certificates (loopback addresses only)
  collabcausal analyst serve --study study.toml --insecure

A complete study.toml: examples/lalonde-2x2/study.toml.
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``analyst serve``."""
    parser = subparsers.add_parser(
        "analyst",
        help="run the analyst node (study coordinator)",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    serve = actions.add_parser(
        "serve",
        help="serve a study from study.toml",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    serve.add_argument("--study", required=True, metavar="STUDY.TOML", help="the study's configuration")
    serve.add_argument("--insecure", action="store_true", help="plaintext, loopback only (overrides study.toml)")
    serve.add_argument(
        "--check",
        action="store_true",
        help="validate study.toml, report folder and certificates, print what the parties are asked; do not listen",
    )
    serve.set_defaults(func=run)
    init = actions.add_parser(
        "init",
        help="write a commented study.toml template",
        description="Write a commented study.toml template to fill in; an existing file is kept unless --force."
        "\n\nexamples:\n  collabcausal analyst init --out study.toml\n"
        "  collabcausal analyst serve --study study.toml --check\n",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    init.add_argument("--out", default="study.toml", metavar="FILE", help="where to write it (default study.toml)")
    init.add_argument("--force", action="store_true", help="replace an existing file")
    init.set_defaults(func=run_init)


def run(args: argparse.Namespace) -> int:
    """Serve the study until it completes or fails."""
    from collabcausal.analyst.config import load_study_config
    from collabcausal.config_schema import read_toml
    from collabcausal.protocol.server import GrpcGrid
    from collabcausal.protocol.tls import TlsFiles
    from collabcausal.reporting.out_folder import check_out_folder

    config = load_study_config(args.study)
    check_out_folder(config.out, "[study] out")
    if args.check:
        print("\n".join(check(config, insecure=args.insecure)))
        return 0
    server = config.server
    insecure = args.insecure or server.insecure
    tls = None if insecure else TlsFiles(server.ca, server.cert, server.key)  # type: ignore[arg-type]
    grid = GrpcGrid(
        config.roster,
        address=server.address,
        tls=tls,
        study=config.study,
        task_timeout=config.task_timeout,
        progress=log_progress,
    )
    log_progress("analyst", f"study {config.study!r} listening on {grid.address}; roster {', '.join(config.roster)}")
    try:
        joined = grid.wait_for_parties(config.join_deadline, on_missing=config.on_missing_party)
        report = run_study(grid, config, joined, progress=True)
    except CollabCausalError as exc:
        grid.finish(failed=exc, linger=5.0)
        raise
    paths = publish_report(report, read_toml(config.path), config.out)
    grid.finish()
    print(f"report: {paths[0]} and {paths[1]}")
    return 0


def run_init(args: argparse.Namespace) -> int:
    """Write the study.toml template; return 0."""
    from collabcausal.templates import write_template

    path = write_template("study.toml", args.out, force=args.force)
    print(f"wrote {path}: fill it in, then `collabcausal analyst serve --study {path} --check`")
    return 0


def check(config: StudyConfig, *, insecure: bool = False) -> list[str]:
    """What ``serve --check`` verifies and prints: every check raises its one-line error; nothing is opened."""
    from collabcausal.certs import ANALYST, check_node_files
    from collabcausal.protocol.tls import require_loopback

    server, s = config.server, config.settings
    if insecure or server.insecure:
        require_loopback(server.address)
        identity = "plaintext (insecure): no certificate, loopback only"
    else:
        identity = check_node_files(server.ca, server.cert, server.key, ANALYST)  # type: ignore[arg-type]
    plan = config.plan()
    asks = (
        f"n_anchors {plan.n_anchors}, party_components {s.get('party_components', 1.0)}, "
        f"estimators {', '.join(plan.estimators)}, estimand {plan.estimand}; bootstrap {config.n_boot} "
        f"({config.interval} interval)"
    )
    dp = "none: exact moments and representations (not differentially private)"
    if config.balance is not None:
        dp = (
            f"[balance] epsilon={config.balance.epsilon:g}, delta={config.balance.delta:g} per balance request, "
            f"{plan.balance_requests()} requests per party"
        )
    if config.dp is not None:
        dp = f"[dp_representation] epsilon={config.dp.epsilon:g}, delta={config.dp.delta:g}, one release per party"
    kind = [] if config.analysis is None else [f"  [{config.kind}] {config.analysis.model_dump()}"]
    return [
        f"{config.path}: valid",
        f"  study {config.study!r} (kind {config.kind}); listens on {server.address}",
        f"  {identity}",
        f"  roster: {' | '.join(', '.join(g) for g in config.row_groups)} "
        f"(label holders {', '.join(config.label_holders)}); join deadline {config.join_deadline:g} s",
        f"  asks each party for: {asks}",
        f"  public covariate ranges: {', '.join(config.anchor_ranges)}",
        f"  privacy: {dp}",
        *kind,
        f"  report folder: {config.out}",
        "checked without listening: nothing was opened or sent",
    ]


def publish_report(report: dict[str, Any], echo: dict[str, Any], folder: Path) -> tuple[Path, Path]:
    """Write report.json and report.html into ``folder``, print the estimates and log the warnings.

    ``echo`` is the study configuration as given (study.toml, or what ``simulate <kind>`` built).
    """
    from collabcausal.reporting.document import study_document
    from collabcausal.reporting.forest import effect_modification_rows
    from collabcausal.reporting.html import REPORT_HTML, write_html

    path = write_report(report, folder)
    html = write_html(study_document(report, echo, seed=report["seed"]), folder / REPORT_HTML)
    if "configuration" in report:
        print(report["configuration"])
    for name, row in report["estimates"].items():
        print(f"{report['estimand'].upper()} {name}: {format_estimate(row)}")
    for label, estimate, low, high, _ in effect_modification_rows(report.get("effect_modification")):
        print(f"effect modification (DP), {label}: {estimate:.6g}, 95% CI [{low:.6g}, {high:.6g}]")
    for note in report.get("notes", []):
        log.info("%s", note)
    for warning in report["warnings"]:
        log.warning("%s", warning)
    return path, html


def run_study(
    grid: Grid, config: StudyConfig, joined: list[str] | None = None, *, progress: bool = False
) -> dict[str, Any]:
    """Align (if configured), run the study's kind on ``grid``; return the report as a JSON-ready dict.

    The kind (``[study] kind``, default ``"dcqe"``) is looked up in the registry of study kinds
    (:func:`collabcausal.analyst.kinds.kind_runner`: one module per kind under analyst/, e.g.
    :mod:`collabcausal.analyst.kind_dcqe`), whose entry point returns the kind's part of the report.
    """
    from collabcausal.analyst.alignment import align_row_group
    from collabcausal.analyst.kinds import kind_runner

    plan = config.plan(joined)
    alignment = {}
    if config.align:
        for group in plan.row_groups:
            if len(group) > 1:
                outcome = align_row_group(grid, group, timeout=config.task_timeout)
                alignment[",".join(group)] = {"n_matched": outcome.n_matched, "unmatched": outcome.unmatched}
    report = {
        "study": config.study,
        "seed": plan.seed,
        "estimand": plan.estimand,
        "row_groups": [list(g) for g in plan.row_groups],
        "missing_parties": sorted(set(config.roster) - set(plan.parties())),
        "alignment": alignment,
    }
    run = kind_runner(config.kind)
    kind = {} if config.kind == "dcqe" else {"kind": config.kind}  # a DC-QE report has always named no kind
    return report | kind | run(grid, config, plan, progress=progress)


def format_estimate(row: dict[str, Any]) -> str:
    """``estimate (se SE), 95% KIND CI [lo, hi], B = .., failed .., MASMD ..`` for one estimator's report row."""
    if row["estimate"] is None:
        return "no estimate (see the warnings)"
    text = f"{row['estimate']:.6g}"
    if row["se"] is not None:
        text += f" (se {row['se']:.4g})"
    level = round(100 * (1 - row["alpha"]))
    if row["ci_low"] is not None:
        text += f", {level}% {row['interval']} CI [{row['ci_low']:.6g}, {row['ci_high']:.6g}]"
    elif row.get("no_interval"):
        text += f", no interval: {row['no_interval']}"
    if row["n_boot"]:
        text += f", B = {row['n_boot']} ({row['n_failed']} failed)"
    if row.get("masmd") is not None:
        text += ", MASMD undefined (see report.json)" if math.isnan(row["masmd"]) else f", MASMD {row['masmd']:.4g}"
    if row.get("direction") is not None:
        odds = f"{row['favoured']} more likely, " if row["direction"] == "undecided" else ""
        odds += f"probability {row['probability']:.2f}, noise sd {row['noise_sd']:.3g}"
        text += f", direction {row['direction']} ({odds})"
    if row.get("adjustment"):
        text += f"; {row['adjustment']}"
    return text


def write_report(report: dict[str, Any], folder: Path) -> Path:
    """Write ``report.json`` into ``folder``; return its path."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / REPORT
    return write_json(path, report)
