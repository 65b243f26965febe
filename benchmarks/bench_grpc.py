"""gRPC transport against the in-process transport, measured in the same run.

1. Array throughput on loopback: an 80 MB float64 array sent to a party process and echoed back
   over mutual TLS (bytes moved both ways / wall time, best of ``--repeats + 1``), printed beside
   the machine's memory-copy rate of the same bytes in the same run (``np.copyto``, both ways), the
   ceiling of any transport. Target: >= 600 MB/s.
2. A 1,000,000-subject 2x2 DC-QE study (synthetic data, paper 003 Experiment I generator, PSM and
   IPW, r = 1,000,000 anchor rows): ``run_dcqe`` over an :class:`InProcessGrid` and over a
   :class:`GrpcGrid` whose four parties are OS processes on loopback with mutual TLS (process start
   and joining excluded). Target: gRPC time <= 1.0 x in-process time.

Exit status 1 when a target is missed.

Run: ``python benchmarks/bench_grpc.py [--subjects N] [--repeats K] [--megabytes M]``.
"""

from __future__ import annotations

import argparse
import multiprocessing
import tempfile
import time
from pathlib import Path

import numpy as np

from collabcausal.analyst.dcqe import DCQEPlan, run_dcqe
from collabcausal.anchor_key import simulation_anchor_key
from collabcausal.messages import Message
from collabcausal.party import Party, PartyTable
from collabcausal.party.operations import operation
from collabcausal.protocol import certs
from collabcausal.protocol.client import PartyClient
from collabcausal.protocol.inprocess import InProcessGrid
from collabcausal.protocol.launcher import local_grpc_grid
from collabcausal.protocol.server import GrpcGrid
from collabcausal.protocol.tls import TlsFiles
from collabcausal.simulations.datasets import make_dcqe_synthetic
from collabcausal.simulations.partition import build_parties, partition_grid

TARGET_MB_S = 600.0
TARGET_RATIO = 1.0  # gRPC time / in-process time


@operation("bench_echo", private_data=False)
def _echo(party: Party, request: Message) -> Message:
    return Message("bench_echo", {}, dict(request.arrays))


def study(n_subjects: int, repeats: int) -> tuple[float, float]:
    """Best-of-``repeats`` seconds of one DC-QE run in process and over gRPC."""
    dataset = make_dcqe_synthetic(n_subjects, seed=0)
    partition = partition_grid(dataset, 2, seed=0)
    parties = build_parties(dataset, partition, anchor_key=simulation_anchor_key(0))
    plan = DCQEPlan(
        row_groups=partition.names(),
        anchor_ranges=dataset.covariate_ranges(),
        n_anchors=n_subjects,
        party_components=3,
        estimators=("psm", "ipw"),
        estimand="ate",
    )
    in_process = InProcessGrid(parties)
    with tempfile.TemporaryDirectory() as workdir, local_grpc_grid(parties, workdir=workdir, study=plan.study) as grid:
        times = {"in-process": [], "grpc": []}
        results = {}
        for _ in range(repeats):
            for name, g in (("in-process", in_process), ("grpc", grid)):
                start = time.perf_counter()
                results[name] = run_dcqe(g, plan)
                times[name].append(time.perf_counter() - start)
    a, b = results["in-process"].effects.estimates, results["grpc"].effects.estimates
    assert all(a[k].estimate == b[k].estimate for k in a), "gRPC and in-process estimates differ"
    return min(times["in-process"]), min(times["grpc"])


def _party_process(address: str, folder: str) -> None:
    party = Party("echo", PartyTable.from_frame(__import__("pandas").DataFrame({"x": np.arange(20.0)}), ["x"]))
    files = TlsFiles(Path(folder) / "ca.pem", Path(folder) / "echo.pem", Path(folder) / "echo.key")
    PartyClient(party, address, tls=files, poll_seconds=1.0).run()


def throughput(megabytes: int, repeats: int) -> float:
    """Best-of-``repeats`` MB/s of an echo round trip of a ``megabytes`` MB array (mutual TLS)."""
    with tempfile.TemporaryDirectory() as folder:
        certs.init_ca(folder)
        certs.issue(folder, "analyst", server=True)
        certs.issue(folder, "echo")
        grid = GrpcGrid(["echo"], tls=TlsFiles(*(Path(folder) / f for f in ("ca.pem", "analyst.pem", "analyst.key"))))
        child = multiprocessing.get_context("spawn").Process(target=_party_process, args=(grid.address, folder))
        child.start()
        try:
            grid.wait_for_parties(120)
            array = np.random.default_rng(0).normal(size=megabytes * 1_000_000 // 8)
            best = float("inf")
            for _ in range(repeats):
                start = time.perf_counter()
                reply = grid.request("echo", Message("bench_echo", {}, {"v": array}), timeout=300)
                best = min(best, time.perf_counter() - start)
            assert np.array_equal(reply.array("v"), array)
        finally:
            grid.finish(linger=10)
            child.join(30)
    return 2 * array.nbytes / best / 1e6


def copy_rate(megabytes: int, repeats: int) -> float:
    """Best-of-``repeats`` MB/s of copying a ``megabytes`` MB array and back in memory (``np.copyto``)."""
    array = np.random.default_rng(0).normal(size=megabytes * 1_000_000 // 8)
    other = np.empty_like(array)
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        np.copyto(other, array)
        np.copyto(array, other)
        best = min(best, time.perf_counter() - start)
    return 2 * array.nbytes / best / 1e6


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--subjects", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--megabytes", type=int, default=80)
    args = parser.parse_args()
    mb_s = throughput(args.megabytes, args.repeats + 1)
    echo_met = mb_s >= TARGET_MB_S
    print(
        f"array echo {args.megabytes} MB over mutual TLS: {mb_s:.0f} MB/s (target >= {TARGET_MB_S:.0f}: "
        f"{'met' if echo_met else 'MISSED'}); memory copy of the same bytes: "
        f"{copy_rate(args.megabytes, args.repeats + 1):.0f} MB/s"
    )
    t_in, t_grpc = study(args.subjects, args.repeats)
    ratio = t_grpc / t_in
    study_met = ratio <= TARGET_RATIO
    print(
        f"DC-QE 2x2, {args.subjects:,} subjects: in-process {t_in:.2f} s, gRPC (4 party processes, mTLS) "
        f"{t_grpc:.2f} s, ratio {ratio:.2f} (target <= {TARGET_RATIO:g}: {'met' if study_met else 'MISSED'})"
    )
    return 0 if echo_met and study_met else 1


if __name__ == "__main__":
    raise SystemExit(main())
