"""``collabcausal party audit``: verify a party's audit log and summarise what the node did.

Reads the log named by ``[audit] path`` of ``party.toml`` (``--config``, default ``audit.jsonl``
beside it) or given with ``--file``; checks its hash chain, reports torn lines (a write cut off by a
crash), compares its last record with the chain head stored apart from it (the ledger, or
``<log>.head.sqlite``; :mod:`collabcausal.party.audit_head`) to catch a cut tail, counts requests,
releases and refusals per operation, and cross-checks the epsilon charged per study against the
party's privacy ledger (``[privacy]``, or ``--ledger``); with ``--config`` it prints the party's
effective guarantee (:func:`~collabcausal.party.policy.effective_guarantee`). Exits 2 with one line when the chain is
broken, the log is shorter than its head says, or the log names a charge the ledger lacks.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from collabcausal.errors import InputError

DESCRIPTION = """\
Verify a party's audit log (hash chain, torn lines, and its last record against the chain head
kept in the ledger or beside the log, which shows a cut tail) and summarise it: requests received,
released and refused per operation, refusals by kind, epsilon charged per study cross-checked
against the party's privacy ledger. Exit code 2 when the log fails verification.

examples:
  collabcausal party audit --config party.toml
  collabcausal party audit --file audit.jsonl --ledger ledger.sqlite --json
"""


def register(actions: argparse._SubParsersAction) -> None:
    """Add the ``audit`` action to the ``party`` group."""
    parser = actions.add_parser(
        "audit",
        help="verify and summarise the audit log",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--config", type=Path, help="party.toml naming [audit] path and [privacy] ledger")
    source.add_argument("--file", type=Path, help="the audit log file")
    parser.add_argument("--ledger", type=Path, help="the privacy ledger to cross-check (default: from --config)")
    parser.add_argument("--dataset", help="the ledger's dataset (default: every dataset)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Print the summary; return 0, or raise :class:`InputError` when verification fails."""
    from collabcausal.party.audit_verify import read_audit_log, summarise

    path, ledger, party = (args.file, None, None) if args.file is not None else _paths_from_config(args.config)
    ledger = args.ledger or ledger
    reading = read_audit_log(path)
    history = None if ledger is None or (args.ledger is None and not ledger.is_file()) else ledger
    summary = summarise(reading, None if history is None else _ledger_history(history, args.dataset))
    summary["head"], problems = _head(reading, path, ledger, party)
    summary["problems"] += problems
    if args.config is not None:
        from collabcausal.commands.party_budget import guarantee_from_config

        summary["guarantee"] = guarantee_from_config(args.config)
    print(json.dumps(summary, indent=2) if args.json else _format(path, summary))
    if summary["problems"]:
        raise InputError(
            f"audit log {path} fails verification: {summary['problems'][0]} ({len(summary['problems'])} problems)",
            "keep the log and the ledger as evidence; compare with a backup copy",
        )
    return 0


def _paths_from_config(config: Path) -> tuple[Path, Path | None, str | None]:
    """The audit log, the ledger (``[privacy]``, possibly not created yet) and the party's name."""
    from collabcausal.commands.party_budget import ledger_path_from_config
    from collabcausal.config_schema import read_toml

    doc = read_toml(config)
    audit = doc.get("audit", {}).get("path", "audit.jsonl")
    ledger = ledger_path_from_config(config) if "privacy" in doc else None
    return (config.parent / audit).resolve(), ledger, doc.get("party", {}).get("name")


def _head(reading: Any, log: Path, ledger: Path | None, party: str | None) -> tuple[str, list[str]]:
    """The log against its stored head (the ledger's, or the file beside the log)."""
    from collabcausal.party.audit_head import LEDGER, AuditHead
    from collabcausal.party.audit_verify import check_head

    store = AuditHead.of(log, ledger)
    if store.kind != LEDGER and any(e.get("head") == LEDGER for e in reading.entries):
        return "kept in the party's ledger: give --ledger (or --config) to check for a cut tail", []
    heads = store.heads()
    named = [str(e["party"]) for e in reading.entries if "party" in e]
    name = party or (named[-1] if named else next(iter(heads), None) if len(heads) == 1 else None)
    where = "the ledger" if store.kind == LEDGER else f"the head file {store.path}"
    return check_head(reading, heads.get(name) if name is not None else None, where)


def _ledger_history(path: Path, dataset: str | None) -> list[Any]:
    from collabcausal.ledger import PrivacyLedger, ledger_budgets

    if not path.is_file():
        raise InputError(f"ledger {path} does not exist", "check --ledger or [privacy] ledger")
    names = [dataset] if dataset else sorted(ledger_budgets(path))
    return [c for name in names for c in PrivacyLedger.from_file(path, name).history()]


def _format(path: Path, s: dict[str, Any]) -> str:
    chain = "hash chain verified" if not s["problems"] else f"{len(s['problems'])} PROBLEMS"
    lines = [f"audit log {path}: {s['records']} records, {chain}, {s['legacy']} legacy records"]
    lines.append(f"  chain head: {s['head']}")
    if "guarantee" in s:
        lines.append(f"  effective guarantee: {s['guarantee']}")
    if s["torn"]:
        where = ", ".join(map(str, s["torn"]))
        tail = " (the last one is an unsealed torn tail)" if s["tail_torn"] else ""
        lines.append(f"  torn lines (a write cut off by a crash, never merged with a record): {where}{tail}")
    lines.append(f"  {'operation':<24}{'received':>10}{'released':>10}{'refused':>10}")
    for op, counts in s["operations"].items():
        lines.append(f"  {op:<24}{counts['received']:>10}{counts['released']:>10}{counts['refused']:>10}")
    refusals = ", ".join(f"{kind} {n}" for kind, n in sorted(s["refusals"].items())) or "none"
    lines.append(f"  refusals: {refusals}; in flight at a stop (received, no outcome): {s['in_flight']}")
    ledger = s["ledger"]
    studies = sorted(set(s["epsilon_by_study"]) | set(ledger["epsilon_by_study"] if ledger else ()))
    for study in studies:
        logged = s["epsilon_by_study"].get(study, 0.0)
        charged = "" if ledger is None else f", ledger {ledger['epsilon_by_study'].get(study, 0.0):.6g}"
        lines.append(f"  epsilon charged in study {study or '-'}: log {logged:.6g}{charged}")
    if ledger is not None and ledger["unlogged_charges"]:
        ids = ", ".join(f"#{i}" for i in ledger["unlogged_charges"])
        lines.append(f"  ledger charges not in this log (made outside the node, e.g. discover --data): {ids}")
    lines += [f"  problem: {p}" for p in s["problems"]]
    return "\n".join(lines)
