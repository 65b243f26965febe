"""Many party processes against one analyst, with and without a hostile party, measured in one run.

32 parties (16 row groups x 2 column groups of the paper 003 Experiment I generator, 250 subjects
per row group) each run ``collabcausal party join`` as its own OS process on loopback with mutual
TLS, and the analyst (this process) runs one DC-QE study (PSM and IPW, r = 1,000 anchor rows).
Printed: join time (processes started until all joined), one ``describe`` round, the DC-QE study
(its three rounds: describe, dc_representation, weighted_moments, plus the analyst's estimation),
the analyst's peak resident memory and every party's peak (max and median).

The same study then runs with one hostile roster member, ``mallory``, which registers (speaking the
current wire protocol, :data:`~collabcausal.protocol.server.PROTOCOL_VERSION`) and then opens long
polls and 4 GiB upload declarations without a task, many times its stream allowance
(:data:`~collabcausal.protocol.server.MAX_STREAMS_PER_PARTY`), from a bounded loop that stops by
itself when the study ends (loopback only). The ratio of the two runs' times is the figure: the
per-party stream limit keeps it near 1.

Checks (exit 1 when one fails, quick runs included): the attacked study gives the honest study's
estimates, and the analyst refused some of mallory's calls. Target (full runs only; exit 1 when
missed): the attacked DC-QE study takes at most :data:`TARGET_RATIO` times the honest one (on 2
cores the attacker's threads take CPU from the study; the limit keeps them from stalling it). A
party process or the attacker that dies stops the run at once with its error.

Run: ``python benchmarks/bench_load.py [--parties 32] [--quick]`` (``--quick``: 2 parties, a hostile
party with twice its stream allowance, no time target judged).
"""

from __future__ import annotations

import multiprocessing
import queue
import resource
import statistics
import sys
import tempfile
import threading
import time
import traceback
from concurrent import futures
from pathlib import Path

import grpc
from _run_mode import BenchmarkParser, target_ok, verdict

from collabcausal.analyst.dcqe import DCQEPlan, describe_parties, run_dcqe
from collabcausal.anchor_key import simulation_anchor_key
from collabcausal.party import Party, PartyTable
from collabcausal.protocol.arrays import message_frames
from collabcausal.protocol.generated import collabcausal_pb2 as pb
from collabcausal.protocol.generated import collabcausal_pb2_grpc as pb_grpc
from collabcausal.protocol.launcher import LocalStudy
from collabcausal.protocol.server import MAX_STREAMS_PER_PARTY, PROTOCOL_VERSION, grpc_options
from collabcausal.protocol.tls import TlsFiles, channel_credentials
from collabcausal.simulations.datasets import make_dcqe_synthetic
from collabcausal.simulations.partition import build_parties, partition_grid

HOSTILE = "mallory"
HOSTILE_SECONDS = 300.0
TARGET_RATIO = 2.0  # attacked DC-QE study time / honest study time (full runs)
REPORT_SECONDS = 60.0  # how long the analyst waits for the attacker's report while it is alive


class WorkerFailed(RuntimeError):
    """A process the benchmark started (a party or the attacker) died or failed."""


def _peak_mib(pid: int) -> float:
    """Peak resident memory (VmHWM) of a live process, in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _hostile(address: str, tls: TlsFiles, streams: int, stop, reports) -> None:
    """Register as ``mallory``, then open long polls and 4 GiB upload declarations until ``stop`` (bounded in time).

    Runs in its own process (so it does not share the analyst's GIL). Puts ``("registered", run_id)``
    on ``reports`` once registered, ``("counts", {outcome: calls})`` at the end, or ``("error", text)``
    when anything fails (then exits 1).
    """
    try:
        counts: dict[str, int] = {"accepted": 0}
        lock = threading.Lock()
        channel = grpc.secure_channel(address, channel_credentials(tls), options=grpc_options())
        stub = pb_grpc.StudyStub(channel)
        request = pb.RegisterRequest(protocol_version=PROTOCOL_VERSION, study="bench")
        run_id = stub.Register(request, timeout=10).run_id
        reports.put(("registered", run_id))
        header = next(iter(message_frames(None, task_id="none")))
        header.header.operation = "x"
        header.header.arrays.append(pb.ArrayHeader(name="v", dtype="f8", byte_order="<", shape=[1 << 29],
                                                   nbytes=4 << 30))

        def attack(i: int) -> None:
            while not stop.is_set():
                try:
                    if i % 2:
                        list(stub.PullTask(pb.PullRequest(run_id=run_id, wait_ms=30_000), timeout=30))
                    else:
                        stub.UploadResult(iter([header]), timeout=30)
                    outcome = "accepted"
                except grpc.RpcError as err:
                    outcome = err.code().name
                    time.sleep(0.05)
                with lock:
                    counts[outcome] = counts.get(outcome, 0) + 1

        deadline = threading.Timer(HOSTILE_SECONDS, stop.set)
        deadline.start()
        with channel, futures.ThreadPoolExecutor(streams) as pool:
            list(pool.map(attack, range(streams)))
        deadline.cancel()
        reports.put(("counts", counts))
    except BaseException as err:  # the analyst must hear of any failure, not wait on an empty queue
        detail = err.details() if isinstance(err, grpc.RpcError) else ""
        reports.put(("error", f"{type(err).__name__}: {detail or err}\n{traceback.format_exc(limit=3)}"))
        sys.exit(1)


def _report(reports, process, expected: str):
    """The attacker's next report, which must be ``expected``; :class:`WorkerFailed` as soon as it fails or dies."""
    waited = 0.0
    while True:
        try:
            kind, value = reports.get(timeout=0.5)
        except queue.Empty:  # the process may have died without a word (killed, out of memory)
            waited += 0.5
            if not process.is_alive() and reports.empty():
                raise WorkerFailed(f"the hostile party's process exited with code {process.exitcode} "
                                   f"before reporting {expected!r}") from None
            if waited > REPORT_SECONDS:
                raise WorkerFailed(f"the hostile party did not report {expected!r} within {REPORT_SECONDS:g} s "
                                   "though alive") from None
            continue
        if kind == "error":
            raise WorkerFailed(f"the hostile party failed: {value}")
        if kind != expected:
            raise WorkerFailed(f"the hostile party reported {kind!r}, expected {expected!r}")
        return value


def run(n_parties: int, hostile_streams: int) -> tuple[dict[str, float], dict[str, float]]:
    """One study of ``n_parties`` party processes (plus a hostile one when ``hostile_streams``): figures, estimates."""
    rows = n_parties // 2
    dataset = make_dcqe_synthetic(250 * rows, seed=0)
    partition = partition_grid(dataset, rows, seed=0)
    parties = build_parties(dataset, partition, anchor_key=simulation_anchor_key(0))
    plan = DCQEPlan(
        row_groups=partition.names(),
        anchor_ranges=dataset.covariate_ranges(),
        n_anchors=1000,
        party_components=3,
        estimators=("psm", "ipw"),
        study="bench",
    )
    decoy = Party(HOSTILE, PartyTable.from_frame(dataset.frame.head(20), list(dataset.covariates[:1])))
    roster = [*parties, decoy] if hostile_streams else parties
    with tempfile.TemporaryDirectory() as workdir:
        local = LocalStudy(roster, workdir=workdir, study="bench", task_timeout=300)
        spawn = multiprocessing.get_context("spawn")  # no fork of a process running gRPC threads
        stop, reports = spawn.Event(), spawn.Queue()
        attacker, counts = None, {}
        try:
            try:
                if hostile_streams:
                    folder = Path(workdir) / "certs"
                    tls = TlsFiles(*(folder / f for f in ("ca.pem", f"{HOSTILE}.pem", f"{HOSTILE}.key")))
                    attacker = spawn.Process(target=_hostile,
                                             args=(local.grid.address, tls, hostile_streams, stop, reports))
                    attacker.start()
                    _report(reports, attacker, "registered")
                start = time.monotonic()
                for party in parties:
                    local.start_party(party.name)
                local.wait_joined(300, names=[p.name for p in parties])
                joined = time.monotonic()
                described = describe_parties(local.grid, plan)
                round_done = time.monotonic()
                result = run_dcqe(local.grid, plan, described=described)
                study_done = time.monotonic()
                party_peaks = [_peak_mib(p.pid) for p in local.processes.values()]
            finally:
                stop.set()
                local.close()  # ends the attacker's open calls too
            if attacker is not None:
                counts = _report(reports, attacker, "counts")
        finally:
            if attacker is not None:
                attacker.join(10)
                if attacker.is_alive():
                    attacker.kill()
    figures = {
        "join": joined - start,
        "describe round": round_done - joined,
        "dc-qe study": study_done - round_done,
        "analyst peak MiB": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "party peak MiB (max)": max(party_peaks),
        "party peak MiB (median)": statistics.median(party_peaks),
        "hostile calls refused": sum(v for k, v in counts.items() if k != "accepted"),
    }
    return figures, {name: e.estimate for name, e in result.effects.estimates.items()}


def main(argv: list[str] | None = None) -> int:
    parser = BenchmarkParser(__doc__)
    parser.add_size("--parties", type=int, full=32, quick=2, help="even number of party processes")
    parser.add_size("--hostile-streams", type=int, full=20 * MAX_STREAMS_PER_PARTY, quick=2 * MAX_STREAMS_PER_PARTY,
                    help=f"the hostile party's concurrent streams (its allowance: {MAX_STREAMS_PER_PARTY})")
    args = parser.parse_args(argv)
    if args.parties < 2 or args.parties % 2:
        parser.error(f"--parties {args.parties}: give an even number >= 2 (row groups x 2 column groups)")
    try:
        honest, honest_estimates = run(args.parties, 0)
        attacked, attacked_estimates = run(args.parties, args.hostile_streams)
    except WorkerFailed as err:
        print(f"bench_load: {err}", file=sys.stderr)
        return 1
    print(f"{args.parties} party processes, loopback, mutual TLS; hostile party: {args.hostile_streams} concurrent "
          f"streams (allowance {MAX_STREAMS_PER_PARTY})")
    print(f"{'figure':28s} {'honest':>10s} {'hostile':>10s} {'ratio':>7s}")
    for key in honest:
        a, b = honest[key], attacked[key]
        ratio = f"{b / a:7.2f}" if a else "      -"
        print(f"{key:28s} {a:10.2f} {b:10.2f} {ratio}")
    same = attacked_estimates == honest_estimates
    refused = attacked["hostile calls refused"] > 0
    ratio = attacked["dc-qe study"] / honest["dc-qe study"]
    print(f"check: the attacked study's estimates equal the honest study's: {same} ({attacked_estimates})")
    print(f"check: the analyst refused the hostile party's calls beyond its allowance: {refused}")
    print(f"target: attacked / honest DC-QE study time <= {TARGET_RATIO:g}: {ratio:.2f}, "
          f"{verdict(ratio <= TARGET_RATIO, args.quick)}")
    return 0 if same and refused and target_ok(ratio <= TARGET_RATIO, args.quick) else 1


if __name__ == "__main__":
    sys.exit(main())
