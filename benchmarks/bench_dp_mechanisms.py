"""Per-sample cost of OpenDP's samplers (the secure path) against numpy's (the seeded path).

    .venv/bin/python benchmarks/bench_dp_mechanisms.py [--quick]

No target: the figures are printed (``--quick``: fewer samples).
"""

from __future__ import annotations

import time

import numpy as np
from _run_mode import BenchmarkParser

from collabcausal.estimators.dp import mechanisms as M


def _per_sample(call, size: int, repeats: int = 3) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        call(size)
        best = min(best, time.perf_counter() - start)
    return best / size


def main(argv: list[str] | None = None) -> None:
    """Print microseconds per noisy value, vectorized and one scalar per call."""
    parser = BenchmarkParser(__doc__)
    parser.add_size("--vector", type=int, full=20000, quick=2000, help="values per vectorized call")
    parser.add_size("--scalars", type=int, full=500, quick=50, help="one-value calls timed")
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    cases = {
        "laplace": lambda r: (lambda n: M.laplace(np.zeros(n), 1.0, 1.0, rng=r)),
        "gaussian": lambda r: (lambda n: M.gaussian(np.zeros(n), 1.0, 1.0, 1e-6, rng=r)),
        "discrete_laplace": lambda r: (lambda n: M.discrete_laplace(np.zeros(n, dtype=int), 1, 1.0, rng=r)),
        "discrete_gaussian": lambda r: (lambda n: M.discrete_gaussian(np.zeros(n, dtype=int), 1, 1.0, 1e-6, rng=r)),
    }
    print(f"{'mechanism':<18} {'opendp vector':>14} {'opendp scalar':>14} {'numpy vector':>13} {'ratio':>7}")
    for name, make in cases.items():
        secure, seeded = make(None), make(rng)
        vec = _per_sample(secure, args.vector) * 1e6
        scalar = _per_sample(lambda n, f=secure: [f(1) for _ in range(n)], args.scalars) * 1e6
        fast = _per_sample(seeded, args.vector) * 1e6
        print(f"{name:<18} {vec:>12.2f}us {scalar:>12.2f}us {fast:>11.3f}us {vec / fast:>7.0f}x")


if __name__ == "__main__":
    main()
