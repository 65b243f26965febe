"""gRPC transport against the in-process transport, measured in the same run.

1. Array throughput on loopback: an 80 MB float64 array sent to a party process and echoed back
   over mutual TLS (bytes moved both ways / wall time, best of ``--repeats + 1`` round trips after
   :data:`WARMUP` untimed ones: a new HTTP/2 connection's first round trips run at 60-70% of the
   later ones while its flow-control windows grow, and a study's connections last the study), printed beside
   two yardsticks measured in the same run: the same bytes over bare gRPC on the same mutual TLS
   (messages of :data:`CHUNK_BYTES` built once, sent by one process and taken back from the other:
   gRPC's and TLS's own cost, without collabcausal's framing, checks and copies into arrays), and
   the machine's memory-copy rate of the same bytes (``np.copyto``, both ways), the ceiling of any
   transport. Target: >= 600 MB/s.
2. A 1,000,000-subject 2x2 DC-QE study (synthetic data, paper 003 Experiment I generator, PSM and
   IPW, r = 1,000,000 anchor rows): ``run_dcqe`` over a :class:`GrpcGrid` whose four parties are OS
   processes on loopback with mutual TLS (process start and joining excluded), and over an
   :class:`InProcessGrid` of the same four parties twice: as the simulation builds them (no policy,
   audit or request state) and as the party processes build themselves from their ``party.toml``
   (:meth:`PartyConfig.build_party <collabcausal.party.config.PartyConfig.build_party>`: policy with
   its differencing history, audit log, request state on disk; in a folder of their own). The
   second is the transport's like-for-like baseline. Target: gRPC time <= 1.0 x that in-process
   time; the ratio to the simulation's time is printed beside it.

Exit status 1 when a target is missed (full runs) or the transports' estimates differ (quick runs too).

Run: ``python benchmarks/bench_grpc.py [--part {all,echo,study}] [--subjects N] [--repeats K] [--megabytes M]
[--quick]`` (``--part echo`` runs section 1 only, ``--part study`` section 2 only; ``--quick``: 8 MB,
20,000 subjects, one timed study, no target judged).
"""

from __future__ import annotations

import argparse
import multiprocessing
import tempfile
import time
from collections.abc import Iterator
from concurrent import futures
from multiprocessing.queues import Queue
from pathlib import Path

import grpc
import numpy as np
from _run_mode import BenchmarkParser, target_ok, verdict

from collabcausal import certs
from collabcausal.analyst.dcqe import DCQEPlan, run_dcqe
from collabcausal.anchor_key import simulation_anchor_key
from collabcausal.messages import Message
from collabcausal.party import Party, PartyTable
from collabcausal.party.config import load_party_config
from collabcausal.party.operations import operation
from collabcausal.protocol.arrays import CHUNK_BYTES
from collabcausal.protocol.client import PartyClient
from collabcausal.protocol.inprocess import InProcessGrid
from collabcausal.protocol.launcher import local_grpc_grid, write_party_files
from collabcausal.protocol.server import GrpcGrid, grpc_options
from collabcausal.protocol.tls import TlsFiles, channel_credentials, server_credentials
from collabcausal.simulations.datasets import make_dcqe_synthetic
from collabcausal.simulations.partition import build_parties, partition_grid

TARGET_MB_S = 600.0
TARGET_RATIO = 1.0  # gRPC time / in-process time
WARMUP = 2
"""Untimed round trips on each new connection before the timed ones (sections [1] and its yardstick)."""
BARE_SERVICE = "/collabcausal.bench.Bare/"


@operation("bench_echo", parameters=(), private_data=False)
def _echo(party: Party, request: Message) -> Message:
    return Message("bench_echo", {}, dict(request.arrays))


def study(n_subjects: int, repeats: int) -> dict[str, float]:
    """Best-of-``repeats`` seconds of one DC-QE run in process (bare and policed parties) and over gRPC."""
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
    with tempfile.TemporaryDirectory() as workdir, local_grpc_grid(parties, workdir=workdir, study=plan.study) as grid:
        own = Path(workdir, "in-process")  # the party processes' files, written apart from theirs
        files = [write_party_files(p, own / p.name, "127.0.0.1:1", plan.study, False) for p in parties]
        policed = [load_party_config(path).build_party() for path in files]
        grids = {"in-process": InProcessGrid(parties), "in-process policed": InProcessGrid(policed), "grpc": grid}
        times: dict[str, list[float]] = {name: [] for name in grids}
        results = {}
        for _ in range(repeats):
            for name, g in grids.items():
                start = time.perf_counter()
                results[name] = run_dcqe(g, plan)
                times[name].append(time.perf_counter() - start)
    first = results["in-process"].effects.estimates
    for name, result in results.items():
        assert all(first[k].estimate == result.effects.estimates[k].estimate for k in first), f"{name} estimates differ"
    return {name: min(t) for name, t in times.items()}


def _study_files(folder: str, name: str) -> TlsFiles:
    """The study CA, ``name``'s certificate and key in ``folder``."""
    return TlsFiles(*(Path(folder) / f for f in ("ca.pem", f"{name}.pem", f"{name}.key")))


def _issue_certificates(folder: str) -> None:
    """A study CA in ``folder``, with the certificates of the analyst (a server) and of party ``echo``."""
    certs.init_ca(folder)
    certs.issue(folder, "analyst", server=True)
    certs.issue(folder, "echo")


def _party_process(address: str, folder: str) -> None:
    party = Party("echo", PartyTable.from_frame(__import__("pandas").DataFrame({"x": np.arange(20.0)}), ["x"]))
    PartyClient(party, address, tls=_study_files(folder, "echo"), poll_seconds=1.0).run()


def throughput(megabytes: int, repeats: int) -> float:
    """Best-of-``repeats`` MB/s of an echo round trip of a ``megabytes`` MB array (mutual TLS), after :data:`WARMUP`."""
    with tempfile.TemporaryDirectory() as folder:
        _issue_certificates(folder)
        grid = GrpcGrid(["echo"], tls=_study_files(folder, "analyst"))
        child = multiprocessing.get_context("spawn").Process(target=_party_process, args=(grid.address, folder))
        child.start()
        try:
            grid.wait_for_parties(120)
            array = np.random.default_rng(0).normal(size=megabytes * 1_000_000 // 8)
            best = float("inf")
            for k in range(WARMUP + repeats):
                start = time.perf_counter()
                reply = grid.request("echo", Message("bench_echo", {}, {"v": array}), timeout=300)
                best = min(best, time.perf_counter() - start) if k >= WARMUP else best
            assert np.array_equal(reply.array("v"), array)
        finally:
            grid.finish(linger=10)
            child.join(30)
    return 2 * array.nbytes / best / 1e6


def _bare_messages(megabytes: int) -> list[bytes]:
    """``megabytes`` MB as messages of :data:`CHUNK_BYTES` (the last one shorter), built once."""
    nbytes = megabytes * 1_000_000
    full, rest = divmod(nbytes, CHUNK_BYTES)
    return [bytes(CHUNK_BYTES)] * full + ([bytes(rest)] if rest else [])


def _bare_server(folder: str, ports: Queue, megabytes: int) -> None:
    """Serve ``Down`` (a stream of :func:`_bare_messages`) and ``Up`` (a stream taken and dropped) until killed."""
    messages = _bare_messages(megabytes)

    def down(request: bytes, context: grpc.ServicerContext) -> Iterator[bytes]:
        yield from messages

    def up(requests: Iterator[bytes], context: grpc.ServicerContext) -> bytes:
        return str(sum(len(message) for message in requests)).encode()

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2), options=grpc_options())
    handlers = {
        "Down": grpc.unary_stream_rpc_method_handler(down),
        "Up": grpc.stream_unary_rpc_method_handler(up),
    }
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(BARE_SERVICE.strip("/"), handlers),))
    ports.put(server.add_secure_port("127.0.0.1:0", server_credentials(_study_files(folder, "analyst"))))
    server.start()
    server.wait_for_termination()


def bare_throughput(megabytes: int, repeats: int) -> float:
    """Best-of-``repeats`` MB/s of the echo's bytes over bare gRPC on the same mutual TLS, after :data:`WARMUP`.

    A server process streams ``megabytes`` MB to this process, which streams them back, so each
    process sends and receives once per round trip, as the analyst and the party do in the echo.
    """
    context = multiprocessing.get_context("spawn")
    with tempfile.TemporaryDirectory() as folder:
        _issue_certificates(folder)
        ports = context.Queue()
        child = context.Process(target=_bare_server, args=(folder, ports, megabytes))
        child.start()
        try:
            address = f"127.0.0.1:{ports.get(timeout=120)}"
            credentials = channel_credentials(_study_files(folder, "echo"))
            with grpc.secure_channel(address, credentials, options=grpc_options()) as channel:
                down, up = channel.unary_stream(BARE_SERVICE + "Down"), channel.stream_unary(BARE_SERVICE + "Up")
                messages = _bare_messages(megabytes)
                best = float("inf")
                for k in range(WARMUP + repeats):
                    start = time.perf_counter()
                    received = sum(len(message) for message in down(b"", timeout=300))
                    sent = int(up(iter(messages), timeout=300))
                    best = min(best, time.perf_counter() - start) if k >= WARMUP else best
            assert received == sent == megabytes * 1_000_000
        finally:
            child.kill()
            child.join(30)
    return 2 * sent / best / 1e6


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
    parser = BenchmarkParser(__doc__)
    parser.add_size("--subjects", type=int, full=1_000_000, quick=20_000, help="subjects of the study (section 2)")
    parser.add_size("--repeats", type=int, full=2, quick=1, help="timed runs (section 1: this + 1)")
    parser.add_size("--megabytes", type=int, full=80, quick=8, help="the echoed array (section 1)")
    parser.add_argument("--part", choices=("all", "echo", "study"), default="all", help="the sections to run")
    args = parser.parse_args()
    sections = {"echo": _echo_section, "study": _study_section}
    met = [section(args) for part, section in sections.items() if args.part in ("all", part)]
    return 0 if all(met) else 1


def _echo_section(args: argparse.Namespace) -> bool:
    """Section 1: print the echo's rate beside bare gRPC's and the memory-copy rate; whether the target is met."""
    mb_s = throughput(args.megabytes, args.repeats + 1)
    echo_met = mb_s >= TARGET_MB_S
    print(
        f"array echo {args.megabytes} MB over mutual TLS: {mb_s:.0f} MB/s (target >= {TARGET_MB_S:.0f}: "
        f"{verdict(echo_met, args.quick)}); the same bytes over bare gRPC on the same TLS: "
        f"{bare_throughput(args.megabytes, args.repeats + 1):.0f} MB/s; memory copy of the same bytes: "
        f"{copy_rate(args.megabytes, args.repeats + 1):.0f} MB/s"
    )
    return target_ok(echo_met, args.quick)


def _study_section(args: argparse.Namespace) -> bool:
    """Section 2: print the DC-QE study's times over gRPC and in process; whether the target is met."""
    times = study(args.subjects, args.repeats)
    t_grpc, t_in, t_policed = times["grpc"], times["in-process"], times["in-process policed"]
    study_met = t_grpc / t_policed <= TARGET_RATIO
    print(
        f"DC-QE 2x2, {args.subjects:,} subjects: gRPC (4 party processes, mTLS) {t_grpc:.2f} s; in process with "
        f"the processes' policy, audit and request state {t_policed:.2f} s, ratio {t_grpc / t_policed:.2f} (target "
        f"<= {TARGET_RATIO:g}: {verdict(study_met, args.quick)}); in process as simulated (no policy) "
        f"{t_in:.2f} s, ratio {t_grpc / t_in:.2f}"
    )
    return target_ok(study_met, args.quick)


if __name__ == "__main__":
    raise SystemExit(main())
