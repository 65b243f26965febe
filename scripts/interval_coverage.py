"""Coverage of every estimator x interval (analytic, percentile, BCa) on known-truth DGPs.

Full mode (the table in docs/estimators.md): three DGPs, n in {500, 2000}, 400 replications,
B = 200 bootstrap replicates of the whole pipeline per replication. --quick: n = 500, 40
replications, B = 50 (a smoke run for CI, not a calibration claim).

    .venv/bin/python scripts/interval_coverage.py [--quick] [--jobs 2] [--seed 0] [--out results/coverage.json]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from collabcausal.simulations.coverage import DGPS, format_coverage, run_coverage
from collabcausal.strict_json import write_json


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="n = 500, 40 replications, B = 50")
    parser.add_argument("--replications", type=int, help="override the number of replications")
    parser.add_argument("--bootstrap", type=int, help="override B")
    parser.add_argument("--sizes", type=int, nargs="+", help="override the sample sizes")
    parser.add_argument("--dgps", nargs="+", choices=DGPS, default=list(DGPS))
    parser.add_argument("--jobs", type=int, default=1, help="worker processes (default 1)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("results/coverage.json"))
    args = parser.parse_args()
    n_rep, n_boot, sizes = (40, 50, [500]) if args.quick else (400, 200, [500, 2000])
    n_rep = args.replications or n_rep
    n_boot = args.bootstrap if args.bootstrap is not None else n_boot
    sizes = args.sizes or sizes
    start = time.perf_counter()
    rows = run_coverage(args.dgps, sizes, n_rep, n_boot=n_boot, seed=args.seed, n_jobs=args.jobs)
    elapsed = time.perf_counter() - start
    print(f"coverage of nominal 95% intervals: {n_rep} replications, B = {n_boot}, seed {args.seed}")
    print(format_coverage(rows))
    print(f"({elapsed:.0f} s with {args.jobs} job(s); Monte Carlo SE of a 95% coverage: "
          f"{100 * (0.95 * 0.05 / n_rep) ** 0.5:.1f} points)")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    write_json(args.out, {"n_rep": n_rep, "n_boot": n_boot, "seed": args.seed, "rows": rows})


if __name__ == "__main__":
    main()
