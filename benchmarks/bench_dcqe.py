"""DC-QE speed and memory targets (issue: DC-QE foundation), each against a named peer.

1. The full LaLonde 2x2 table (8 settings, PSM + IPW + AIPW, federated balance) with B bootstrap
   replicates; target < 60 s for B = 1000 on 2 cores. Peer: the same W-clb replicate written with
   scikit-learn parts (StandardScaler + PCA per party, LogisticRegression, NearestNeighbors).
2. One W-clb run on 1,000,000 synthetic subjects (2x2 grid, 10 covariates, r = n anchor rows);
   target < 15 s and peak memory < 4 GB. Peer: the centralized analysis (CA) of the same data.

Run: ``python benchmarks/bench_dcqe.py`` (``--quick`` for a smoke run). Exit status 1 when a target is
missed.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

import numpy as np


def lalonde_table(n_boot: int, n_jobs: int) -> float:
    from collabcausal.simulations.datasets import load_lalonde
    from collabcausal.simulations.dcqe_experiment import ExperimentConfig, run_experiment
    from collabcausal.simulations.partition import partition_grid
    from collabcausal.simulations.settings import DEFAULT_2X2, parse_settings

    data = load_lalonde()
    part = partition_grid(data, 2, seed=0)
    config = ExperimentConfig(
        data, part, parse_settings(DEFAULT_2X2, part), n_boot=n_boot, party_components=3, n_jobs=n_jobs
    )
    start = time.perf_counter()
    run_experiment(config)
    return time.perf_counter() - start


def w_replicates_ours(n_rep: int) -> float:
    from threadpoolctl import threadpool_limits

    from collabcausal.anchor_key import simulation_anchor_key
    from collabcausal.protocol.inprocess import InProcessGrid
    from collabcausal.simulations.datasets import load_lalonde
    from collabcausal.simulations.dcqe_experiment import ExperimentConfig, _replicate
    from collabcausal.simulations.partition import build_parties, partition_grid
    from collabcausal.simulations.settings import parse_settings

    data = load_lalonde()
    part = partition_grid(data, 2, seed=0)
    config = ExperimentConfig(data, part, parse_settings(["W"], part), estimators=("psm", "ipw"), party_components=3)
    grid = InProcessGrid(build_parties(data, part, anchor_key=simulation_anchor_key(0)))
    with threadpool_limits(1):
        start = time.perf_counter()
        for b in range(n_rep):
            _replicate(config, grid, b)
        return (time.perf_counter() - start) / n_rep


def w_replicates_sklearn(n_rep: int) -> float:
    """The W-clb replicate (plus the CA fit it is compared with) written with scikit-learn parts."""
    from sklearn.decomposition import PCA
    from sklearn.linear_model import LogisticRegression
    from sklearn.neighbors import NearestNeighbors
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    from threadpoolctl import threadpool_limits

    from collabcausal.simulations.datasets import LALONDE_LEFT, LALONDE_RIGHT, load_lalonde

    data = load_lalonde()
    frame = data.frame.sample(frac=1.0, random_state=0).reset_index(drop=True)
    halves = np.array_split(np.arange(len(frame)), 2)
    rng = np.random.default_rng(0)
    anchor = {c: rng.uniform(frame[c].min(), frame[c].max(), len(frame)) for c in data.covariates}
    with threadpool_limits(1):
        start = time.perf_counter()
        for _ in range(n_rep):
            rows = [h[rng.integers(0, len(h), len(h))] for h in halves]
            xt, at = [], []
            for r in rows:
                parts_x, parts_a = [], []
                for cols in (LALONDE_LEFT, LALONDE_RIGHT):
                    f = make_pipeline(StandardScaler(), PCA(3)).fit(frame.loc[r, list(cols)].to_numpy())
                    parts_x.append(f.transform(frame.loc[r, list(cols)].to_numpy()))
                    parts_a.append(f.transform(np.column_stack([anchor[c] for c in cols])))
                xt.append(np.hstack(parts_x))
                at.append(np.hstack(parts_a))
            U = np.linalg.svd(np.hstack(at), full_matrices=False)[0][:, :6]
            X = np.vstack([x @ np.linalg.pinv(a) @ U for x, a in zip(xt, at, strict=True)])
            idx = np.concatenate(rows)
            t, y = frame["treat"].to_numpy()[idx], frame["re78"].to_numpy()[idx]
            for feats in (X, frame.loc[idx, list(data.covariates)].to_numpy()):
                e = LogisticRegression(C=np.inf, max_iter=5000).fit(StandardScaler().fit_transform(feats), t)
                e = e.predict_proba(StandardScaler().fit_transform(feats))[:, 1]
                nn = NearestNeighbors(n_neighbors=1).fit(e[t == 0, None])
                match = nn.kneighbors(e[t == 1, None], return_distance=False)[:, 0]
                _ = y[t == 1].mean() - y[t == 0][match].mean()
                w = np.where(t == 1, 1.0, e / (1 - e))
                _ = np.average(y[t == 1], weights=w[t == 1]) - np.average(y[t == 0], weights=w[t == 0])
        return (time.perf_counter() - start) / n_rep


def million_child(n: int) -> None:
    """Runs in a child process so that its peak memory is measured alone."""
    from collabcausal.analyst.dcqe import DCQEPlan, run_dcqe
    from collabcausal.analyst.effects import estimate_effects
    from collabcausal.anchor_key import simulation_anchor_key
    from collabcausal.protocol.inprocess import InProcessGrid
    from collabcausal.simulations.datasets import make_dcqe_synthetic
    from collabcausal.simulations.partition import build_parties, partition_grid

    data = make_dcqe_synthetic(n, 0, n_covariates=10)
    part = partition_grid(data, 2, seed=0)
    grid = InProcessGrid(build_parties(data, part, anchor_key=simulation_anchor_key(0)))
    plan = DCQEPlan(
        part.names(), data.covariate_ranges(), n_anchors=n, party_components=4, estimators=("psm", "ipw", "aipw")
    )
    start = time.perf_counter()
    result = run_dcqe(grid, plan)
    w_time = time.perf_counter() - start
    idx = part.subjects()
    X = data.frame[list(data.covariates)].to_numpy()[idx]
    start = time.perf_counter()
    estimate_effects(X, data.frame["treat"].to_numpy()[idx], data.frame["y"].to_numpy()[idx])
    ca_time = time.perf_counter() - start
    peak_gb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2
    ate = result.effects.estimates["ipw"].estimate
    print(json.dumps({"w_seconds": w_time, "ca_seconds": ca_time, "peak_gb": peak_gb, "ate_ipw": ate}))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bootstrap", type=int, default=1000)
    parser.add_argument("--subjects", type=int, default=1_000_000)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="B = 50 and 100,000 subjects")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        million_child(args.child)
        return 0
    if args.quick:
        args.bootstrap, args.subjects = 50, 100_000
    ok = True

    seconds = lalonde_table(args.bootstrap, args.jobs)
    ours, peer = w_replicates_ours(30), w_replicates_sklearn(30)
    full = args.bootstrap >= 1000 and args.subjects >= 1_000_000
    target = 60.0
    ok &= seconds < target or not full
    print(
        f"[1] LaLonde 2x2 table, 8 settings x (PSM, IPW, AIPW), B = {args.bootstrap}, {args.jobs} jobs: {seconds:.1f} s"
    )
    verdict = ("met" if seconds < target else "MISSED") if args.bootstrap >= 1000 else "not judged below B = 1000"
    print(f"    target < {target:.0f} s at B = 1000: {verdict}")
    print(
        f"    one W-clb replicate (with its CA): collabcausal {1e3 * ours:.1f} ms vs scikit-learn parts "
        f"{1e3 * peer:.1f} ms -> {peer / ours:.2f}x"
    )

    child = subprocess.run(
        [sys.executable, __file__, "--child", str(args.subjects)], capture_output=True, text=True, check=True
    )
    stats = json.loads(child.stdout.strip().splitlines()[-1])
    met = stats["w_seconds"] < 15 and stats["peak_gb"] < 4
    ok &= met or not full
    print(
        f"[2] W-clb on {args.subjects:,} subjects (2x2, 10 covariates, r = n): {stats['w_seconds']:.1f} s, "
        f"peak memory {stats['peak_gb']:.2f} GB (ATE by IPW {stats['ate_ipw']:.3f}, truth 1)"
    )
    print(
        f"    target < 15 s and < 4 GB: {'met' if met else 'MISSED'}; centralized analysis of the same data "
        f"{stats['ca_seconds']:.1f} s -> W-clb costs {stats['w_seconds'] / stats['ca_seconds']:.1f}x CA"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
