"""HSIC (paper 002, eq. 4) on m test points: blocked vs naive dense, time and peak memory.

The blocked implementation (:func:`collabcausal.estimators.discovery.scores.hsic_score`) keeps
``O(block * m)`` memory. The peer is the naive dense computation: both m x m Gram matrices, the
centred ``HKH`` and ``trace(HKH L)`` as an elementwise sum (``--textbook`` also times the literal
``trace(K H L H)`` with three m x m matrix products, which is far slower). Peak memory is measured
with tracemalloc (numpy reports its buffers to it).

No target: the figures are printed; exit 1 when the two values differ by more than 1e-9 relative.

    .venv/bin/python benchmarks/bench_hsic.py [--m 5000] [--block 256] [--textbook] [--quick]
"""

from __future__ import annotations

import sys
import time
import tracemalloc
from collections.abc import Callable

import numpy as np
from _run_mode import BenchmarkParser

from collabcausal.estimators.discovery.krr import gaussian_kernel
from collabcausal.estimators.discovery.scores import HSIC_BLOCK, hsic_score

WIDTHS = (0.3, 0.1)


def dense_hsic(a: np.ndarray, b: np.ndarray) -> float:
    """Naive dense eq. 4: full Gram matrices, centred K, elementwise trace."""
    m = a.size
    K = gaussian_kernel(a, a, WIDTHS[0])
    L = gaussian_kernel(b, b, WIDTHS[1])
    Kc = K - K.mean(axis=0, keepdims=True) - K.mean(axis=1, keepdims=True) + K.mean()
    return float(np.sum(Kc * L)) / (m - 1) ** 2


def textbook_hsic(a: np.ndarray, b: np.ndarray) -> float:
    """Literal ``trace(K H L H) / (m - 1)^2`` with explicit H."""
    m = a.size
    H = np.eye(m) - 1.0 / m
    K = gaussian_kernel(a, a, WIDTHS[0])
    L = gaussian_kernel(b, b, WIDTHS[1])
    return float(np.trace(K @ H @ L @ H)) / (m - 1) ** 2


def measure(fn: Callable[[], float]) -> tuple[float, float, float]:
    """(value, seconds, peak MiB) of one call."""
    tracemalloc.start()
    start = time.perf_counter()
    value = fn()
    seconds = time.perf_counter() - start
    peak = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    return value, seconds, peak


def main(argv: list[str] | None = None) -> int:
    parser = BenchmarkParser(__doc__)
    parser.add_size("--m", type=int, full=5000, quick=500, help="test points")
    parser.add_argument("--block", type=int, default=HSIC_BLOCK)
    parser.add_argument("--textbook", action="store_true", help="also time trace(K H L H) with matrix products")
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    a = rng.uniform(-1, 1, args.m)
    b = 0.3 * a**2 + 0.1 * rng.normal(size=args.m)
    runs = {
        f"blocked (block={args.block})": lambda: hsic_score(
            a, b, width_a=WIDTHS[0], width_b=WIDTHS[1], block=args.block
        ),
        "naive dense": lambda: dense_hsic(a, b),
    }
    if args.textbook:
        runs["textbook trace(KHLH)"] = lambda: textbook_hsic(a, b)
    results = {name: measure(fn) for name, fn in runs.items()}
    print(f"HSIC on m = {args.m} test points")
    print(f"{'implementation':<26}{'value':>14}{'seconds':>10}{'peak MiB':>11}")
    for name, (value, seconds, peak) in results.items():
        print(f"{name:<26}{value:>14.8f}{seconds:>10.2f}{peak:>11.1f}")
    blocked, dense = list(results.values())[:2]
    print(
        f"dense / blocked: time x{dense[1] / blocked[1]:.2f}, peak memory x{dense[2] / blocked[2]:.1f}; "
        f"|difference| = {abs(dense[0] - blocked[0]):.2e}"
    )
    return 0 if abs(dense[0] - blocked[0]) <= 1e-9 * abs(dense[0]) else 1


if __name__ == "__main__":
    sys.exit(main())
