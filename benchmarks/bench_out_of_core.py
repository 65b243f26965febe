"""An out-of-core party on a directory of Parquet files, beside the in-memory party and DuckDB (issue 24).

Writes a seeded cohort (10 float64 covariates, a 0/1 treatment ``T``, an outcome ``Y``;
:func:`bench_sources.write_cohort`) as ``--files`` Parquet files of row groups of 1,000,000 rows
(pyarrow's default size), then runs each of these in a fresh process, measured alone:

``open``
    :meth:`ChunkedTable.open <collabcausal.party.chunked_table.ChunkedTable.open>`: one validating
    pass over every block (Dask, 2 threads).
``moments, Dask``
    the reducer's moments (:class:`~collabcausal.estimators.blocks.ColumnMoments`) merged over the
    blocks by :meth:`ChunkedTable.reduce_rows` (the engine the party uses).
``moments, DuckDB``
    the same means and centred Gram in SQL over ``read_parquet`` (two passes, 2 threads): the engine
    measured beside it.
``moments, in memory``
    the table read whole into a :class:`PartyTable`, then the same moments: the peer.
``dp_effects statistics, out of core`` / ``in memory``
    a 5-fold ``dp_effects_statistics`` release through ``Party.handle`` (ledger charge, folds,
    design, noise) on the out-of-core table and on the in-memory one.

For each: wall time, peak resident memory and its growth over the process's memory after its imports
("added"). Targets (exit 1 when missed): the out-of-core operations add at most
:data:`MEMORY_LIMIT_MIB` whatever the number of rows (Arrow decodes a row group's column chunks
whole, so a worker holds about one row group: 2 workers x ~100 MiB here), and the out-of-core release
takes at most :data:`TIME_RATIO` times the in-memory party's, its load included. ``--out-of-core-only``
skips the in-memory modes, for tables larger than memory (e.g. ``--rows 100000000``). ``--quick``
(20,000 rows in 2 files) judges no target; it checks that the engines' Gram matrices agree (relative
difference <= 1e-9; exit 1 when not).

    .venv/bin/python benchmarks/bench_out_of_core.py [--rows 10000000] [--files 10] [--dir /tmp]
        [--out-of-core-only] [--quick]
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _run_mode import BenchmarkParser, target_ok, verdict
from bench_sources import COVARIATES, measure, rss_bytes, write_cohort

MODES = ("open", "moments, Dask", "moments, DuckDB", "moments, in memory",
         "dp_effects statistics, out of core", "dp_effects statistics, in memory")
MEMORY_LIMIT_MIB = 512
TIME_RATIO = 1.5
GRAM_AGREEMENT = 1e-9  # largest relative Gram difference between the engines and the in-memory table
WORKERS = 2


def child(mode: str, directory: Path) -> None:
    """Run one mode on ``directory`` and print wall time, peak and added memory as JSON."""
    import dask.threaded  # noqa: F401  (imported before the baseline, as the party imports it)
    import duckdb
    import numpy as np
    import pyarrow.parquet as pq

    from collabcausal.estimators.blocks import ColumnMoments
    from collabcausal.estimators.dp.effects.design import FeatureMap
    from collabcausal.estimators.dp.zcdp import zcdp_rho
    from collabcausal.ledger import PrivacyLedger
    from collabcausal.messages import Message
    from collabcausal.party import Party, PartyTable
    from collabcausal.party.chunked_table import ChunkedTable
    from collabcausal.party.dp_effects import STATISTICS

    def in_memory() -> PartyTable:
        data = pq.read_table(directory, columns=[*COVARIATES, "T", "Y"])
        X = np.column_stack([data.column(c).to_numpy() for c in COVARIATES])
        return PartyTable.from_arrays(X, tuple(COVARIATES), treatment=("T", data.column("T").to_numpy()),
                                      outcome=("Y", data.column("Y").to_numpy()), source=str(directory))

    def out_of_core() -> ChunkedTable:
        return ChunkedTable.open(directory, COVARIATES, treatment="T", outcome="Y", workers=WORKERS)

    def moments(table) -> ColumnMoments:
        return table.reduce_rows(lambda _, X, t, y: ColumnMoments.of(X), COVARIATES, ColumnMoments.merge)

    def duckdb_moments() -> tuple[int, np.ndarray, np.ndarray]:
        con = duckdb.connect(config={"threads": WORKERS})
        source = f"read_parquet('{directory}/**/*.parquet')"
        averages = ", ".join(f"avg({c})" for c in COVARIATES)
        n, *means = con.execute(f"SELECT count(*), {averages} FROM {source}").fetchone()
        centred = [f"({c} - {m!r})" for c, m in zip(COVARIATES, means, strict=True)]
        pairs = [(i, j) for i in range(len(centred)) for j in range(i, len(centred))]
        sums = con.execute(f"SELECT {', '.join(f'sum({centred[i]} * {centred[j]})' for i, j in pairs)} "
                           f"FROM {source}").fetchone()
        gram = np.zeros((len(centred), len(centred)))
        for (i, j), value in zip(pairs, sums, strict=True):
            gram[i, j] = gram[j, i] = value
        return n, np.array(means), gram

    def release(table) -> np.ndarray:
        fm = FeatureMap(tuple((-5.0, 5.0) for _ in COVARIATES), (-10.0, 10.0), n_sites=1)
        ledger = PrivacyLedger(directory.parent / f"ledger-{mode}.sqlite", epsilon=10.0, delta=1e-6)
        party = Party("registry", table, ledger=ledger)
        request = Message(STATISTICS, {"study": "s", "rho": zcdp_rho(1.0, 1e-9), "delta": 1e-9,
                                       "columns": COVARIATES, "design": fm.to_spec(), "site": 0, "n_folds": 5})
        return party.handle(request).arrays["values"]

    before = rss_bytes()
    start = time.perf_counter()
    summary: dict = {}
    if mode == "open":
        summary["n"] = out_of_core().n_subjects
    elif mode == "moments, Dask":
        m = moments(out_of_core())
        summary |= {"n": m.n, "mean": m.mean.tolist(), "gram": m.gram.tolist()}
    elif mode == "moments, DuckDB":
        n, mean, gram = duckdb_moments()
        summary |= {"n": n, "mean": mean.tolist(), "gram": gram.tolist()}
    elif mode == "moments, in memory":
        m = moments(in_memory())
        summary |= {"n": m.n, "mean": m.mean.tolist(), "gram": m.gram.tolist()}
    elif mode == "dp_effects statistics, out of core":
        summary["length"] = release(out_of_core()).size
    else:
        summary["length"] = release(in_memory()).size
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps({"seconds": seconds, "peak": peak, "added": peak - before} | summary))


def main() -> int:
    parser = BenchmarkParser(__doc__)
    parser.add_size("--rows", type=int, full=10_000_000, quick=20_000, help="rows of the cohort")
    parser.add_size("--files", type=int, full=10, quick=2, help="Parquet files it is written as")
    parser.add_argument("--dir", type=Path, default=None, help="where the temporary Parquet files go")
    parser.add_argument("--out-of-core-only", action="store_true", help="skip the in-memory modes")
    parser.add_argument("--child", nargs=2, metavar=("MODE", "PATH"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], Path(args.child[1]))
        return 0
    import numpy as np

    with tempfile.TemporaryDirectory(dir=args.dir) as folder:
        directory = Path(folder) / "registry"
        directory.mkdir()
        start = time.perf_counter()
        per_file = -(-args.rows // args.files)
        for k in range(args.files):
            write_cohort(directory / f"part-{k:03d}.parquet", min(per_file, args.rows - k * per_file), seed=k)
        size = sum(p.stat().st_size for p in directory.iterdir())
        print(f"wrote {args.rows:,} rows x {len(COVARIATES) + 2} columns in {args.files} files: "
              f"{size / 2**20:,.0f} MiB in {time.perf_counter() - start:.1f} s")
        modes = [m for m in MODES if not (args.out_of_core_only and m.endswith("in memory"))]
        results = {mode: measure(mode, directory, __file__) for mode in modes}
    arrays = args.rows * (8 * len(COVARIATES) + 1 + 8)  # covariates float64, treatment int8, outcome float64
    print(f"the table in memory: {arrays / 2**20:,.0f} MiB; workers {WORKERS}")
    print(f"{'':36} {'seconds':>8} {'peak MiB':>9} {'added MiB':>10} {'added / table':>14}")
    for mode, r in results.items():
        print(f"{mode:36} {r['seconds']:8.2f} {r['peak'] / 2**20:9,.0f} {r['added'] / 2**20:10,.0f} "
              f"{r['added'] / arrays:14.3f}")
    verdicts, checks = [], []
    for mode in ("open", "moments, Dask", "dp_effects statistics, out of core"):
        added = results[mode]["added"] / 2**20
        verdicts.append((f"{mode} adds {added:,.0f} MiB (<= {MEMORY_LIMIT_MIB})", added <= MEMORY_LIMIT_MIB))
    dask, duck = results["moments, Dask"], results["moments, DuckDB"]
    print(f"engines: Dask {dask['seconds']:.2f} s, {dask['added'] / 2**20:,.0f} MiB added; DuckDB "
          f"{duck['seconds']:.2f} s, {duck['added'] / 2**20:,.0f} MiB added (Dask / DuckDB time "
          f"{dask['seconds'] / duck['seconds']:.2f}x)")
    if not args.out_of_core_only:
        reference = results["moments, in memory"]
        for mode in ("moments, Dask", "moments, DuckDB"):
            r = results[mode]
            error = np.abs(np.array(r["gram"]) - reference["gram"]).max() / np.abs(reference["gram"]).max()
            print(f"{mode}: n {r['n']:,} (in memory {reference['n']:,}), largest Gram difference {error:.1e} "
                  f"relative; time {r['seconds'] / reference['seconds']:.2f}x in memory")
            checks.append(r["n"] == reference["n"] and error <= GRAM_AGREEMENT)
        ratio = (results["dp_effects statistics, out of core"]["seconds"]
                 / results["dp_effects statistics, in memory"]["seconds"])
        verdicts.append((f"dp_effects statistics out of core / in memory (its load included) {ratio:.2f}x "
                         f"(<= {TIME_RATIO})", ratio <= TIME_RATIO))
    for text, met in verdicts:
        print(f"{verdict(met, args.quick)}: {text}")
    print(f"check: the engines' n and Gram agree with the in-memory table's (<= {GRAM_AGREEMENT:g} relative): "
          f"{all(checks) if checks else 'not run (--out-of-core-only)'}")
    return 0 if all(checks) and all(target_ok(met, args.quick) for _, met in verdicts) else 1


if __name__ == "__main__":
    sys.exit(main())
