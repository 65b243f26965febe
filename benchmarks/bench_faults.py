"""Kill -9 a party at random instants: nothing acknowledged is lost from its audit log or its ledger.

A forked child runs a party node (policy, privacy ledger, audit log) answering differentially
private ``dp_count`` requests whose params carry a 300 kB padding (so a kill often lands inside an
audit-log write) alternating with ``describe`` (both registered again as ``padded_dp_count`` and
``padded_describe``, which accept the padding and a nonce too); after each reply it acknowledges
the request's nonce to the parent, i.e. the reply would now leave the party. The parent kills the
child with SIGKILL after a random delay, restarts it on the same files, and after the last kill
checks:

* every acknowledged reply has its ``received`` and ``released`` lines in the audit log;
* the audit log's hash chain verifies (no merged or lost line); torn lines are counted;
* the ledger passes SQLite's integrity check, holds every charge the log names, and the charges
  it holds beyond the log are those of requests killed between charge and release (charged,
  never released: the safe direction);
* a second loop kills a process that only charges the ledger (the ledger's own test, longer).

Exit 1 when a check fails (quick runs included). Run: ``python benchmarks/bench_faults.py [--kills 40]
[--seed 0] [--quick]`` (``--quick``: 4 kills each). Prints the figures of docs/protocol.md, "Faults
and timeouts".
"""

from __future__ import annotations

import os
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
from _run_mode import BenchmarkParser

import collabcausal.party  # noqa: F401  (registers the operations)
from collabcausal.ledger import PrivacyLedger
from collabcausal.messages import Message
from collabcausal.party import Party, PartyTable
from collabcausal.party.audit import JsonlAuditLog
from collabcausal.party.audit_verify import read_audit_log, summarise
from collabcausal.party.operations import lookup, operation
from collabcausal.party.policy import PartyPolicy

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # test tooling: tests/fault_injection.py
from fault_injection import kill_loop


def _padded(name: str) -> str:
    """Register the operation ``name`` again as ``padded_<name>``, which also accepts the benchmark's ``nonce`` and
    ``pad`` (a party refuses a parameter its operation does not apply); return the new name."""
    op = lookup(name)
    operation(f"padded_{name}", parameters=op.parameters | {"nonce", "pad"}, private_data=op.private_data,
              differentially_private=op.differentially_private)(op.handler)
    return f"padded_{name}"


DESCRIBE, COUNT = _padded("describe"), _padded("dp_count")


def _party(folder: Path) -> Party:
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"a": rng.normal(size=200), "t": np.arange(200) % 2, "y": rng.normal(size=200)})
    return Party(
        "p",
        PartyTable.from_frame(frame, ["a"], treatment="t", outcome="y"),
        policy=PartyPolicy([DESCRIBE, COUNT], ["a"]),
        ledger=PrivacyLedger(folder / "ledger.sqlite", epsilon=1e9, dataset="d"),
        audit=JsonlAuditLog(folder / "audit.jsonl"),
    )


def _request(nonce: int) -> Message:
    params = {"study": "s", "nonce": nonce, "pad": "x" * 300_000}
    if nonce % 2:
        return Message(DESCRIBE, params)
    return Message(COUNT, {**params, "epsilon": 0.001, "by_arm": True})


def _party_writer(folder: Path, fd: int) -> None:
    party = _party(folder)
    nonce = int.from_bytes(os.urandom(6), "big") * 2  # unique across restarts
    while True:
        party.handle(_request(nonce))
        os.write(fd, f"{nonce}\n".encode())
        nonce += 1


def _ledger_writer(path: Path, fd: int) -> None:
    ledger = PrivacyLedger(path, epsilon=1e9, dataset="d")
    while True:
        os.write(fd, f"{ledger.charge('op', 0.001, study='s').id}\n".encode())


def party_loop(kills: int, seed: int, folder: Path) -> dict:
    """Kill a party node ``kills`` times; return the figures."""
    start = time.perf_counter()
    acknowledged = kill_loop(lambda fd: _party_writer(folder, fd), kills, seed=seed)
    reading = read_audit_log(folder / "audit.jsonl")
    ledger = PrivacyLedger(folder / "ledger.sqlite", epsilon=1e9, dataset="d")
    summary = summarise(reading, ledger.history())
    released = {e["request_sha256"] for e in reading.entries if e["event"] == "released"}
    received = {e["params"]["nonce"]: e["request_sha256"] for e in reading.entries if e["event"] == "received"}
    missing = [n for n in acknowledged if received.get(n) not in released]
    with sqlite3.connect(folder / "ledger.sqlite") as db:
        integrity = db.execute("PRAGMA integrity_check").fetchone()[0]
    return {
        "kills": kills,
        "seconds": time.perf_counter() - start,
        "acknowledged": len(acknowledged),
        "missing_released_line": len(missing),
        "records": summary["records"],
        "chain_problems": len(reading.problems),
        "ledger_missing": len(summary["problems"]) - len(reading.problems),
        "torn": len(reading.torn),
        "in_flight": summary["in_flight"],
        "ledger_integrity": integrity,
        "ledger_charges": len(ledger.history()),
        "charged_not_released": len(summary["ledger"]["unlogged_charges"]),
    }


def ledger_loop(kills: int, seed: int, folder: Path) -> dict:
    """Kill a process that only charges the ledger ``kills`` times; return the figures."""
    path = folder / "only.sqlite"
    acknowledged = kill_loop(lambda fd: _ledger_writer(path, fd), kills, seed=seed)
    present = {c.id for c in PrivacyLedger(path, epsilon=1e9, dataset="d").history()}
    with sqlite3.connect(path) as db:
        integrity = db.execute("PRAGMA integrity_check").fetchone()[0]
    return {
        "kills": kills,
        "acknowledged": len(acknowledged),
        "lost": len(acknowledged - present),
        "integrity": integrity,
    }


def problems(party: dict, ledger: dict) -> list[str]:
    """The checks of the module docstring that failed, one line each."""
    found = [f"{party[key]} {key.replace('_', ' ')}" for key in ("missing_released_line", "chain_problems",
                                                                  "ledger_missing") if party[key]]
    found += [f"{name} integrity {value}" for name, value in (("party ledger", party["ledger_integrity"]),
                                                               ("ledger alone", ledger["integrity"])) if value != "ok"]
    return found + ([f"ledger alone: {ledger['lost']} acknowledged charges lost"] if ledger["lost"] else [])


def main(argv: list[str] | None = None) -> int:
    parser = BenchmarkParser(__doc__)
    parser.add_size("--kills", type=int, full=40, quick=4, help="SIGKILLs of each loop")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        p = party_loop(args.kills, args.seed, Path(tmp))
        q = ledger_loop(args.kills, args.seed, Path(tmp))
    print(f"party node (policy + ledger + audit log) killed with SIGKILL {p['kills']} times ({p['seconds']:.1f} s):")
    print(
        f"  replies acknowledged: {p['acknowledged']}; "
        f"missing their 'released' audit line: {p['missing_released_line']}"
    )
    print(
        f"  audit log: {p['records']} records, chain problems (merged or lost lines): {p['chain_problems']}, "
        f"torn lines sealed: {p['torn']}, requests in flight at a kill: {p['in_flight']}"
    )
    print(
        f"  ledger: integrity {p['ledger_integrity']}, {p['ledger_charges']} charges, named in the log but missing: "
        f"{p['ledger_missing']}; charged but never released (killed in between): "
        f"{p['charged_not_released']}"
    )
    print(
        f"ledger alone killed {q['kills']} times: {q['acknowledged']} charges acknowledged, {q['lost']} lost, "
        f"integrity {q['integrity']}"
    )
    failed = problems(p, q)
    print(f"checks: {'; '.join(failed) if failed else 'nothing acknowledged lost, chain and ledgers intact'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
