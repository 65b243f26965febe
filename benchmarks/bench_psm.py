"""Benchmark: propensity-score nearest-neighbour matching against scikit-learn, same run.

Matches every subject to the other arm (treated -> controls and controls -> treated, as the ATE
needs) with :func:`collabcausal.estimators.nearest_neighbor_match` and with
``sklearn.neighbors.NearestNeighbors(n_neighbors=1)`` fitted on the 1-D scores, prints both times
and their ratio (target: ours >= 3x faster), and exits with status 1 if the matches differ.
Scores are continuous (tie-free), so both must find the same neighbour. It also times
``LogisticPropensity`` on the same subjects with 10 covariates (no peer; for the record).

Run: .venv/bin/python benchmarks/bench_psm.py [--n 1000000] [--seed 0]
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np
from sklearn.neighbors import NearestNeighbors

from collabcausal.estimators import LogisticPropensity, nearest_neighbor_match


def ours(e: np.ndarray, treated: np.ndarray, control: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Indices (into the full sample) of the match of each treated and each control subject."""
    return (
        control[nearest_neighbor_match(e[treated], e[control])],
        treated[nearest_neighbor_match(e[control], e[treated])],
    )


def sklearn_nn(e: np.ndarray, treated: np.ndarray, control: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The same matches with scikit-learn's NearestNeighbors on the 1-D scores."""
    to_control = NearestNeighbors(n_neighbors=1).fit(e[control, None]).kneighbors(e[treated, None])[1][:, 0]
    to_treated = NearestNeighbors(n_neighbors=1).fit(e[treated, None]).kneighbors(e[control, None])[1][:, 0]
    return control[to_control], treated[to_treated]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000, help="number of subjects (default 1,000,000)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    X = rng.normal(size=(args.n, 10))
    e = 1.0 / (1.0 + np.exp(-(X @ np.linspace(-0.5, 0.5, 10))))
    t = (rng.random(args.n) < e).astype(np.int8)
    treated, control = np.flatnonzero(t == 1), np.flatnonzero(t == 0)
    print(f"subjects {args.n:,}: treated {treated.size:,}, control {control.size:,}")

    start = time.perf_counter()
    mine = ours(e, treated, control)
    t_ours = time.perf_counter() - start
    start = time.perf_counter()
    peer = sklearn_nn(e, treated, control)
    t_peer = time.perf_counter() - start
    print(f"nearest_neighbor_match (both directions): {t_ours:8.3f} s")
    print(f"sklearn NearestNeighbors (both directions): {t_peer:8.3f} s")
    print(f"speed-up: {t_peer / t_ours:.1f}x (target >= 3x)")

    query = np.r_[treated, control]
    dist_ours = np.abs(e[query] - e[np.r_[mine[0], mine[1]]])
    dist_peer = np.abs(e[query] - e[np.r_[peer[0], peer[1]]])
    same_dist = np.array_equal(dist_ours, dist_peer)
    same_index = all(np.array_equal(a, b) for a, b in zip(mine, peer, strict=True))
    print(f"identical distances: {same_dist}; identical indices: {same_index}")

    start = time.perf_counter()
    model = LogisticPropensity().fit(X, t)
    t_fit = time.perf_counter() - start
    print(f"LogisticPropensity on {args.n:,} x 10: {t_fit:.3f} s ({model.n_iter_} Newton iterations)")
    return 0 if same_dist and same_index else 1


if __name__ == "__main__":
    sys.exit(main())
