"""A 10,000,000-row Parquet cohort through the party's source reader, beside ``pandas.read_parquet``.

Writes a seeded cohort (10 float64 covariates, a 0/1 treatment ``T``, an outcome ``Y``) in chunks of
1,000,000 rows to a temporary Parquet file, then loads it in fresh processes, each measured alone:

``reader``
    :func:`collabcausal.party.sources.read_table`: Arrow record batches copied into the table's
    preallocated covariate matrix, then validated (the party's path for ``[data] path = *.parquet``).
``pandas.read_parquet``
    the DataFrame alone, the peer.
``pandas + from_frame``
    ``pandas.read_parquet`` then :meth:`PartyTable.from_frame` (a pandas round trip).

For each: wall time, peak resident memory (``ru_maxrss``) and the peak's growth over the process's
resident memory after its imports ("added"). The arrays' size is what the table holds (covariates
float64, treatment int8, outcome float64). Exit 1 when the reader adds more than twice that (full
runs; ``--quick`` reads 20,000 rows, where the process's own allocations dwarf the table, and judges
nothing).

    .venv/bin/python benchmarks/bench_sources.py [--rows 10000000] [--dir /tmp] [--quick]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _run_mode import BenchmarkParser, target_ok, verdict

CHUNK_ROWS = 1_000_000
N_COVARIATES = 10
COVARIATES = [f"x{j}" for j in range(N_COVARIATES)]
MODES = ("reader", "pandas.read_parquet", "pandas + from_frame")
LIMIT = 2.0  # the reader's added peak, in multiples of the arrays' size


def write_cohort(path: Path, rows: int, seed: int = 0) -> None:
    """A seeded cohort written in chunks (never more than one chunk in memory)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(seed)
    writer = None
    try:
        for start in range(0, rows, CHUNK_ROWS):
            k = min(CHUNK_ROWS, rows - start)
            X = rng.normal(size=(k, N_COVARIATES))
            t = (rng.random(k) < 1 / (1 + np.exp(-X[:, 0]))).astype(np.int8)
            y = X[:, :3].sum(axis=1) + 2.0 * t + rng.normal(size=k)
            batch = pa.table({**{c: X[:, j] for j, c in enumerate(COVARIATES)}, "T": t, "Y": y})
            writer = writer or pq.ParquetWriter(path, batch.schema)
            writer.write_table(batch)
    finally:
        if writer is not None:
            writer.close()


def rss_bytes() -> int:
    pages = int(Path("/proc/self/statm").read_text().split()[1])
    return pages * resource.getpagesize()


def child(mode: str, path: Path) -> None:
    """Load ``path`` one way and print wall time, peak and added memory as JSON (one process per mode)."""
    import pandas as pd
    import pyarrow.parquet  # noqa: F401 (imported before the baseline: both paths use it)

    from collabcausal.party.sources import DataSource, read_table
    from collabcausal.party.table import PartyTable

    before = rss_bytes()
    start = time.perf_counter()
    if mode == "reader":
        table = read_table(DataSource(path=path), COVARIATES, treatment="T", outcome="Y")
        size = table.covariates.nbytes + table.treatment.nbytes + table.outcome.nbytes
    elif mode == "pandas.read_parquet":
        frame = pd.read_parquet(path)
        size = int(frame.memory_usage(index=False).sum())
    else:
        table = PartyTable.from_frame(pd.read_parquet(path), COVARIATES, treatment="T", outcome="Y")
        size = table.covariates.nbytes + table.treatment.nbytes + table.outcome.nbytes
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps({"seconds": seconds, "peak": peak, "added": peak - before, "size": size}))


def measure(mode: str, path: Path, script: str = __file__) -> dict:
    """Run ``script --child mode path`` (this script's :func:`child` by default) in a fresh interpreter."""
    done = subprocess.run(
        [sys.executable, script, "--child", mode, str(path)], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"{mode} failed: {(done.stderr.strip().splitlines() or ['?'])[-1]}")
    return json.loads(done.stdout)


def main() -> int:
    parser = BenchmarkParser(__doc__)
    parser.add_size("--rows", type=int, full=10_000_000, quick=20_000, help="rows of the cohort")
    parser.add_argument("--dir", type=Path, default=None, help="where the temporary Parquet file goes")
    parser.add_argument("--child", nargs=2, metavar=("MODE", "PATH"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], Path(args.child[1]))
        return 0
    with tempfile.TemporaryDirectory(dir=args.dir) as folder:
        path = Path(folder) / "cohort.parquet"
        start = time.perf_counter()
        write_cohort(path, args.rows)
        print(f"wrote {args.rows:,} rows x {N_COVARIATES + 2} columns: {path.stat().st_size / 2**20:,.0f} MiB "
              f"in {time.perf_counter() - start:.1f} s")
        results = {mode: measure(mode, path) for mode in MODES}
    arrays = results["reader"]["size"]
    print(f"the table's arrays: {arrays / 2**20:,.0f} MiB (covariates float64, treatment int8, outcome float64)")
    print(f"{'':22} {'seconds':>8} {'peak MiB':>9} {'added MiB':>10} {'added / arrays':>15}")
    for mode, r in results.items():
        print(f"{mode:22} {r['seconds']:8.2f} {r['peak'] / 2**20:9,.0f} {r['added'] / 2**20:10,.0f} "
              f"{r['added'] / arrays:15.2f}")
    ratio = results["reader"]["added"] / arrays
    print(f"target: the reader's peak adds {ratio:.2f}x the arrays' size (limit {LIMIT}x): "
          f"{verdict(ratio <= LIMIT, args.quick)}")
    return 0 if target_ok(ratio <= LIMIT, args.quick) else 1


if __name__ == "__main__":
    sys.exit(main())
