"""Read, verify and summarise a party's audit log (:mod:`collabcausal.party.audit`).

:func:`read_audit_log` never fails on a damaged line: a line that is not a JSON record, or a last
line without its newline, is reported as *torn* (what a process killed during a write leaves;
the next writer seals it), and the hash chain (``seq``, ``prev``) is checked across them. Lines
written before the chain existed (no ``seq``) are counted as *legacy*. A broken chain (a record
removed, edited or reordered) is a *problem*. :func:`summarise` counts requests, releases and
refusals per operation and the epsilon charged per study, cross-checked against the party's
privacy ledger: a charge the log names but the ledger lacks is a problem; a ledger charge the log
does not name was made outside the party node (e.g. ``collabcausal discover --data``) or by a
request whose process died between charging and logging. :func:`check_head` compares the log's
last records with the head stored apart from it (:mod:`collabcausal.party.audit_head`): a cut
tail, which the chain alone cannot show.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from collabcausal.errors import InputError


def line_digest(line: bytes) -> str:
    """Hex SHA-256 of one log line's bytes (without its newline): the next line's ``prev``.

    The chain's one definition: :mod:`collabcausal.party.audit` writes it, this module checks it.
    """
    return hashlib.sha256(line).hexdigest()


@dataclass
class AuditReading:
    """What :func:`read_audit_log` found.

    Attributes
    ----------
    entries : list of dict
        Complete records, oldest first.
    torn : list of int
        Line numbers (1-based) of torn lines; the last line is the torn tail if ``tail_torn``.
    tail_torn : bool
        The file ends in the middle of a line (a write was cut off and not yet sealed).
    legacy : int
        Records written before the hash chain existed.
    problems : list of str
        Chain breaks: each names the line.
    digests : dict of int to str
        SHA-256 of each chained record's line, by ``seq``.
    """

    entries: list[dict] = field(default_factory=list)
    torn: list[int] = field(default_factory=list)
    tail_torn: bool = False
    legacy: int = 0
    problems: list[str] = field(default_factory=list)
    digests: dict[int, str] = field(default_factory=dict)


def read_audit_log(path: str | Path) -> AuditReading:
    """Read and verify an audit log line by line (see the module docstring)."""
    file = Path(path)
    reading = AuditReading()
    seq, prev = 0, ""
    try:
        handle = file.open("rb")
    except FileNotFoundError:
        raise InputError(f"audit log {file} does not exist", "check [audit] path in party.toml or --file") from None
    with handle:
        for number, raw in enumerate(handle, 1):
            line = raw[:-1] if raw.endswith(b"\n") else raw
            entry = _record(line) if raw.endswith(b"\n") else None
            if entry is None:
                reading.torn.append(number)
                reading.tail_torn = not raw.endswith(b"\n")
                continue
            if "seq" not in entry:
                reading.legacy += 1
            elif entry.get("prev") != prev or entry.get("seq") != seq + 1:
                reading.problems.append(
                    f"line {number}: the hash chain breaks (seq {entry.get('seq')} after {seq}): a record was "
                    "removed, edited or reordered before it"
                )
            seq, prev = int(entry.get("seq", seq)), line_digest(line)
            if "seq" in entry:
                reading.digests[seq] = prev
            reading.entries.append(entry)
    return reading


def check_head(reading: AuditReading, head: tuple[int, str] | None, where: str) -> tuple[str, list[str]]:
    """Compare the log with the head stored for it: ``(status line, problems)``.

    Parameters
    ----------
    reading : AuditReading
    head : (int, str) or None
        The recorded ``(seq, sha256)`` of the log's last record, or None when none is stored.
    where : str
        Who holds the head, for the messages: ``"the ledger"`` or ``"the head file PATH"``.
    """
    last = max(reading.digests, default=0)
    if head is None:
        kinds = sorted({str(e["head"]) for e in reading.entries if e.get("head")})
        if kinds:
            return "missing", [
                f"the log's records keep their head ({', '.join(kinds)}), but {where} holds none for this party: "
                "the head store was deleted or replaced"
            ]
        return "none recorded (a log written without one): a cut tail cannot be detected", []
    seq, sha256 = head
    if last < seq:
        return "ahead of the log", [
            f"audit log has {last} records, {where}'s head says {seq}: the log was truncated or replaced"
        ]
    if reading.digests.get(seq) != sha256:
        return "mismatch", [f"record {seq} is not the one {where}'s head names: the log was rewritten or replaced"]
    if last == seq:
        return f"matches {where} ({seq} records)", []
    if last == seq + 1:
        return f"the log is 1 record ahead of {where}'s head: a crash between its append and the head's update", []
    return "behind the log", [
        f"audit log has {last} records, {where}'s head says {seq}: records written without updating the head, "
        "or the head store was rolled back"
    ]


def _record(line: bytes) -> dict | None:
    try:
        entry = json.loads(line)
    except ValueError:
        return None
    return entry if isinstance(entry, dict) else None


def summarise(reading: AuditReading, ledger_charges: Iterable[Any] | None = None) -> dict[str, Any]:
    """Counts per operation, refusals, epsilon per study, and the cross-check with the ledger.

    Parameters
    ----------
    reading : AuditReading
    ledger_charges : iterable of Charge, optional
        The party ledger's history (:meth:`PrivacyLedger.history`); ``None`` skips the check.

    Returns
    -------
    dict
        ``operations`` ({op: {received, released, refused}}), ``refusals`` ({error kind: n}),
        ``in_flight`` (requests received with no outcome: the process stopped while handling them),
        ``epsilon_by_study`` (from the log's charges), ``ledger`` (the cross-check, or None),
        ``torn``, ``legacy`` and ``problems`` (chain breaks and charges missing from the ledger).
    """
    operations: dict[str, Counter] = defaultdict(Counter)
    refusals: Counter = Counter()
    logged: dict[int, tuple[str, float]] = {}
    for entry in reading.entries:
        event, op = entry.get("event", "released"), str(entry.get("operation", "?"))
        if event == "data_loaded":  # not a request (collabcausal.party.audit)
            continue
        operations[op][event] += 1
        if event == "refused":
            refusals[str(entry.get("error", {}).get("kind", "?"))] += 1
        for charge in entry.get("charges", []):
            logged[int(charge["id"])] = (str(entry.get("study", "")), float(charge["epsilon"]))
    epsilon_by_study: dict[str, float] = defaultdict(float)
    for study, epsilon in logged.values():
        epsilon_by_study[study] += epsilon
    problems = list(reading.problems)
    ledger = None
    if ledger_charges is not None:
        charges = {c.id: c for c in ledger_charges}
        missing = sorted(set(logged) - set(charges))
        problems += [f"the log names ledger charge #{i}, which the ledger does not hold" for i in missing]
        mismatched = sorted(i for i in set(logged) & set(charges) if abs(charges[i].epsilon - logged[i][1]) > 1e-12)
        problems += [f"ledger charge #{i} has epsilon {charges[i].epsilon}, the log {logged[i][1]}" for i in mismatched]
        by_study: dict[str, float] = defaultdict(float)
        for charge in charges.values():
            by_study[charge.study] += charge.epsilon
        ledger = {
            "epsilon_by_study": dict(by_study),
            "unlogged_charges": sorted(set(charges) - set(logged)),
        }
    in_flight = sum(max(0, c["received"] - c["released"] - c["refused"]) for c in operations.values())
    return {
        "records": len(reading.entries),
        "operations": {
            op: {k: c[k] for k in ("received", "released", "refused")} for op, c in sorted(operations.items())
        },
        "refusals": dict(refusals),
        "in_flight": in_flight,
        "epsilon_by_study": dict(epsilon_by_study),
        "ledger": ledger,
        "torn": reading.torn,
        "tail_torn": reading.tail_torn,
        "legacy": reading.legacy,
        "problems": problems,
    }
