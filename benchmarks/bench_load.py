"""Many party processes against one analyst, with and without a hostile party, measured in one run.

32 parties (16 row groups x 2 column groups of the paper 003 Experiment I generator, 250 subjects
per row group) each run ``collabcausal party join`` as its own OS process on loopback with mutual
TLS, and the analyst (this process) runs one DC-QE study (PSM and IPW, r = 1,000 anchor rows).
Printed: join time (processes started until all joined), one ``describe`` round, the DC-QE study
(its three rounds: describe, dc_representation, weighted_moments, plus the analyst's estimation),
the analyst's peak resident memory and every party's peak (max and median).

The same study then runs with one hostile roster member, ``mallory``, which registers and then
opens long polls and 4 GiB upload declarations without a task, many times its stream allowance
(:data:`~collabcausal.protocol.server.MAX_STREAMS_PER_PARTY`), from a bounded loop that stops by
itself when the study ends (loopback only). The ratio of the two runs' times is the figure: the
per-party stream limit keeps it near 1.

Run: ``python benchmarks/bench_load.py [--parties 32] [--quick]`` (``--quick``: 8 parties).
"""

from __future__ import annotations

import argparse
import multiprocessing
import resource
import statistics
import tempfile
import threading
import time
from concurrent import futures
from pathlib import Path

import grpc
import numpy as np

from collabcausal.analyst.dcqe import DCQEPlan, describe_parties, run_dcqe
from collabcausal.anchor_key import simulation_anchor_key
from collabcausal.party import Party, PartyTable
from collabcausal.protocol.arrays import message_frames
from collabcausal.protocol.generated import collabcausal_pb2 as pb
from collabcausal.protocol.generated import collabcausal_pb2_grpc as pb_grpc
from collabcausal.protocol.launcher import LocalStudy
from collabcausal.protocol.server import MAX_STREAMS_PER_PARTY, grpc_options
from collabcausal.protocol.tls import TlsFiles, channel_credentials
from collabcausal.simulations.datasets import make_dcqe_synthetic
from collabcausal.simulations.partition import build_parties, partition_grid

HOSTILE = "mallory"
HOSTILE_STREAMS = 20 * MAX_STREAMS_PER_PARTY
HOSTILE_SECONDS = 300.0


def _peak_mib(pid: int) -> float:
    """Peak resident memory (VmHWM) of a live process, in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _hostile(address: str, tls: TlsFiles, stop, results) -> None:
    """Open long polls and 4 GiB upload declarations as ``mallory`` until ``stop`` (bounded in time).

    Runs in its own process (so it does not share the analyst's GIL); puts its call counts on ``results``.
    """
    counts: dict[str, int] = {"accepted": 0}
    lock = threading.Lock()
    channel = grpc.secure_channel(address, channel_credentials(tls), options=grpc_options())
    stub = pb_grpc.StudyStub(channel)
    run_id = stub.Register(pb.RegisterRequest(protocol_version=1, study="bench"), timeout=10).run_id
    header = next(iter(message_frames(None, task_id="none")))
    header.header.operation = "x"
    header.header.arrays.append(
        pb.ArrayHeader(name="v", dtype="f8", byte_order="<", shape=[1 << 29], nbytes=4 << 30, sha256=b"\0" * 32)
    )

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
    with channel, futures.ThreadPoolExecutor(HOSTILE_STREAMS) as pool:
        list(pool.map(attack, range(HOSTILE_STREAMS)))
    deadline.cancel()
    results.put(counts)


def run(n_parties: int, hostile: bool) -> dict[str, float]:
    """One study of ``n_parties`` party processes; return its figures."""
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
    roster = [*parties, decoy] if hostile else parties
    with tempfile.TemporaryDirectory() as workdir:
        local = LocalStudy(roster, workdir=workdir, study="bench", task_timeout=300)
        spawn = multiprocessing.get_context("spawn")  # no fork of a process running gRPC threads
        stop, results = spawn.Event(), spawn.Queue()
        attacker, counts = None, {}
        try:
            if hostile:
                tls = TlsFiles(*(Path(workdir) / "certs" / f for f in ("ca.pem", f"{HOSTILE}.pem", f"{HOSTILE}.key")))
                attacker = spawn.Process(target=_hostile, args=(local.grid.address, tls, stop, results))
                attacker.start()
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
            local.close()
            if attacker is not None:
                counts = results.get(timeout=60)
                attacker.join(10)
    assert np.isfinite(result.effects.estimates["ipw"].estimate)
    return {
        "join": joined - start,
        "describe round": round_done - joined,
        "dc-qe study": study_done - round_done,
        "analyst peak MiB": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "party peak MiB (max)": max(party_peaks),
        "party peak MiB (median)": statistics.median(party_peaks),
        "hostile calls refused": sum(v for k, v in counts.items() if k != "accepted"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parties", type=int, default=32, help="even number of party processes (default 32)")
    parser.add_argument("--quick", action="store_true", help="8 parties")
    args = parser.parse_args()
    n = 8 if args.quick else args.parties
    honest = run(n, hostile=False)
    attacked = run(n, hostile=True)
    print(f"{n} party processes, loopback, mutual TLS; hostile party: {HOSTILE_STREAMS} concurrent streams")
    print(f"{'figure':28s} {'honest':>10s} {'hostile':>10s} {'ratio':>7s}")
    for key in honest:
        a, b = honest[key], attacked[key]
        ratio = f"{b / a:7.2f}" if a else "      -"
        print(f"{key:28s} {a:10.2f} {b:10.2f} {ratio}")


if __name__ == "__main__":
    main()
