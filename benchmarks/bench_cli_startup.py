"""Start-up time of ``collabcausal --version``, ``--help`` and every subcommand's ``--help``.

The peer is ``python -c pass`` (the interpreter's own start-up, measured in the same run). The
"eager" row imports the libraries a command's work needs (numpy, pandas, scikit-learn, gRPC and the
estimators, through the analyst's and the simulation's modules), which is what every ``--help``
paid before the command modules moved those imports into their ``run`` functions. Each figure is
the median wall time of ``--repeat`` fresh processes; the largest imports of the eager path come
from ``python -X importtime``.

Exit 1 when a target is missed (full runs; ``--quick`` times one process each and judges nothing).

    .venv/bin/python benchmarks/bench_cli_startup.py [--repeat 7] [--quick]
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time

from _run_mode import BenchmarkParser, target_ok, verdict

TARGET_SECONDS = 0.3  # --version and --help
SUBCOMMAND_TARGET_SECONDS = 1.0  # a subcommand's --help
SUBCOMMANDS = (
    "simulate",
    "discover",
    "party join",
    "party budget",
    "analyst serve",
    "certs init",
    "certs issue",
    "certs request",
    "certs sign",
    "certs anchor-key",
)
EAGER = "import collabcausal.analyst.dcqe, collabcausal.protocol.server, collabcausal.simulations.dcqe_experiment"


def median_seconds(command: list[str], repeat: int) -> float:
    """Median wall time of ``repeat`` runs of ``command`` (output discarded)."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def largest_imports(code: str, top: int = 5) -> list[tuple[int, str]]:
    """The ``top`` slowest top-level imports (cumulative microseconds) of running ``code``."""
    err = subprocess.run([sys.executable, "-X", "importtime", "-c", code], capture_output=True, text=True).stderr
    rows = []
    for line in err.splitlines():
        parts = line.split("|")
        if len(parts) == 3 and parts[1].strip().isdigit() and not parts[2].startswith("   "):
            rows.append((int(parts[1]), parts[2].strip()))
    return sorted(rows, reverse=True)[:top]


def main(argv: list[str] | None = None) -> int:
    parser = BenchmarkParser(__doc__)
    parser.add_size("--repeat", type=int, full=7, quick=1, help="fresh processes per command, the median kept")
    args = parser.parse_args(argv)
    cli = [sys.executable, "-m", "collabcausal.cli"]
    rows = {
        "python -c pass (peer)": median_seconds([sys.executable, "-c", "pass"], args.repeat),
        "collabcausal --version": median_seconds([*cli, "--version"], args.repeat),
        "collabcausal --help": median_seconds([*cli, "--help"], args.repeat),
    }
    for command in SUBCOMMANDS:
        rows[f"collabcausal {command} --help"] = median_seconds([*cli, *command.split(), "--help"], args.repeat)
    rows["eager: the imports of a command's work"] = median_seconds([sys.executable, "-c", EAGER], args.repeat)
    peer = rows["python -c pass (peer)"]
    print(
        f"median of {args.repeat} fresh processes; targets: --version/--help < {TARGET_SECONDS} s, "
        f"a subcommand's --help < {SUBCOMMAND_TARGET_SECONDS} s"
    )
    for name, seconds in rows.items():
        print(f"  {name:<42} {seconds:6.3f} s   {seconds - peer:+6.3f} s over the peer")
    ok = True
    for name, seconds in rows.items():
        if name.startswith("collabcausal"):
            target = TARGET_SECONDS if name.count(" ") == 1 else SUBCOMMAND_TARGET_SECONDS
            print(f"  {name} < {target:g} s: {verdict(seconds < target, args.quick)}")
            ok &= target_ok(seconds < target, args.quick)
    print("largest imports of the eager path (python -X importtime, cumulative):")
    for micros, module in largest_imports(EAGER):
        print(f"  {micros / 1e6:6.3f} s  {module}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
