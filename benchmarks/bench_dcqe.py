"""DC-QE speed and memory targets (issue: DC-QE foundation), each against a named peer.

1. The full LaLonde 2x2 table (8 settings, PSM + IPW + AIPW, federated balance) with B bootstrap
   replicates, the fastest of ``--repeats`` runs judged (a single run on a shared virtual machine
   varies by a third); target (issue 24) < 12 s for B = 1000 on 2 cores. Peer: the same W-clb replicate written with
   scikit-learn parts (StandardScaler + PCA per party, LogisticRegression, NearestNeighbors).
2. One W-clb run on n synthetic subjects (2x2 grid, 10 covariates, r = n anchor rows; with
   ``--party-workers`` the parties of a round work concurrently, as a deployment's do), beside its
   peer, the centralized analysis (CA) of the same data (PSM + IPW + AIPW with analytic standard
   errors in both), each in its own process, the fastest of ``--repeats`` runs taking turns, timed
   (wall clock, the CPU time beside it: on a shared machine the gap shows the wait; and its system
   part, the kernel's cost of the pages touched, which varies from run to run on a virtual machine)
   and with its peak memory (Linux ``VmHWM``, from
   after the data set is generated and handed out; the parties' tables or CA's arrays included).
   Targets (issue 24, 2 cores): W-clb on 10^6 subjects < 4 s and < 0.8 GB, on 10^7 < 60 s and
   < 3 GB; W-clb time / CA time <= 1.2x from 10^6 subjects; CA of 10^6 subjects < 2 s; from one
   ``--subjects`` value to the next (e.g. ``--subjects 1000000 3000000``) user CPU time and peak
   memory grow linearly in n (at most 1.15 times the growth of n); the wall time's growth is printed
   beside CA's, with the system time (on this project's 2-core VM, pages first touched at 10^7
   subjects cost several seconds of kernel time that 10^6 subjects, reusing freed pages, do not pay).
3. Peak memory against the number of parties: W-clb on 10^6 subjects split into 2, 4, 8 and 16 row
   groups of 2 column groups (4 to 32 parties), each run in its own process. Target (issue 24):
   flat, the peak with 32 parties at most 1.25x the peak with 4.

Run: ``python benchmarks/bench_dcqe.py`` (``--quick`` for a smoke run: B = 50 on one job, 20,000
subjects, one run each, 4 and 8 parties, no target judged; ``--part scale`` or ``--part parties``
for one section only). Exit status 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import gc
import itertools
import json
import resource
import subprocess
import sys
import time

import numpy as np
from _run_mode import BenchmarkParser, target_ok, verdict

ESTIMATORS = ("psm", "ipw", "aipw")
TABLE_TARGET = 12.0
"""Seconds for the LaLonde table at B = 1000 (issue 24; the first round's target was 60 s)."""
SCALE_TARGETS = {1_000_000: (4.0, 0.8), 10_000_000: (60.0, 3.0)}
"""Subjects: (seconds, peak GB) of one W-clb run."""
RATIO_TARGET = 1.2
"""W-clb time / CA time on the same data, judged from RATIO_FROM subjects (below, fixed costs dominate)."""
RATIO_FROM = 1_000_000
CA_TARGET = (1_000_000, 2.0)
"""(subjects, seconds) of the centralized analysis."""
LINEAR_SLACK = 1.15
"""Linear in n: from n to k n subjects, time and peak memory grow at most LINEAR_SLACK * k times."""
ROW_GROUPS = [2, 4, 8, 16]  # section [3]: row groups of 2 column groups (--quick: the first two)
"""Section [3]: row groups of the 2-column-group grid (4 to 32 parties)."""
FLAT_SLACK = 1.25
"""Flat in the number of parties: the peak with the most parties at most FLAT_SLACK x the peak with the fewest."""


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
    from scipy.special import logit
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
        diagnostics: dict = {}
        described: dict = {}  # the parties' describe replies, asked once, as in the table
        _replicate(config, grid, -1, diagnostics, described=described)
        full = {name: logit(d.propensity) for name, d in diagnostics.items()}  # replicates start there, as in the table
        start = time.perf_counter()
        for b in range(n_rep):
            _replicate(config, grid, b, full_logits=full, described=described)
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


def table_figures(n_boot: int, n_jobs: int, repeats: int) -> bool:
    """Section [1]: the LaLonde table (the fastest of ``repeats`` runs judged), and one W-clb replicate against
    scikit-learn parts; False on a missed target."""
    runs = [lalonde_table(n_boot, n_jobs) for _ in range(repeats)]
    seconds = min(runs)
    ours, peer = w_replicates_ours(30), w_replicates_sklearn(30)
    target = TABLE_TARGET
    print(
        f"[1] LaLonde 2x2 table, 8 settings x (PSM, IPW, AIPW), B = {n_boot}, {n_jobs} jobs: {seconds:.1f} s "
        f"(best of {repeats}: {', '.join(f'{r:.1f}' for r in runs)} s)"
    )
    judged = ("met" if seconds < target else "MISSED") if n_boot >= 1000 else "not judged below B = 1000"
    print(f"    target < {target:.0f} s at B = 1000: {judged}")
    print(
        f"    one W-clb replicate (with its CA): collabcausal {1e3 * ours:.1f} ms vs scikit-learn parts "
        f"{1e3 * peer:.1f} ms -> {peer / ours:.2f}x"
    )
    return seconds < target or n_boot < 1000


def _memory_gb(field: str) -> float:
    """``VmRSS`` (resident now) or ``VmHWM`` (peak since the last :func:`_reset_peak`) of this process, in GB."""
    with open("/proc/self/status") as status:
        line = next(row for row in status if row.startswith(field + ":"))
    return int(line.split()[1]) / 1024**2


def _reset_peak() -> float:
    """Start a new peak-memory window (Linux ``clear_refs``); returns the resident GB at its start."""
    gc.collect()
    with open("/proc/self/clear_refs", "w") as refs:
        refs.write("5")
    return _memory_gb("VmRSS")


def scale_child(n: int, analysis: str, blas_threads: int | None, row_groups: int = 2, party_workers: int = 1) -> None:
    """One analysis of ``n`` synthetic subjects in a child process, its time and peak memory measured alone.

    ``analysis`` is ``"w"`` (the W-clb study over an in-process grid) or ``"ca"`` (the centralized
    analysis of the same subjects). The data set is generated, handed to the parties (W) or
    extracted (CA) and dropped before the measurement starts, so the peak covers what the analysis
    holds: the parties' tables or the centralized arrays, and everything the analysis allocates.
    ``blas_threads`` caps the BLAS threads (None: the library's default, one per core);
    ``row_groups`` x 2 column groups are the parties, of which ``party_workers`` work at once
    (:class:`~collabcausal.protocol.inprocess.InProcessGrid`; 1: one at a time).
    """
    from threadpoolctl import threadpool_limits

    from collabcausal.analyst.dcqe import DCQEPlan, run_dcqe
    from collabcausal.analyst.effects import estimate_effects
    from collabcausal.anchor_key import simulation_anchor_key
    from collabcausal.protocol.inprocess import InProcessGrid
    from collabcausal.simulations.datasets import make_dcqe_synthetic
    from collabcausal.simulations.partition import build_parties, partition_grid

    data = make_dcqe_synthetic(n, 0, n_covariates=10)
    part = partition_grid(data, row_groups, seed=0)
    if analysis == "w":
        grid = InProcessGrid(build_parties(data, part, anchor_key=simulation_anchor_key(0)), workers=party_workers)
        plan = DCQEPlan(part.names(), data.covariate_ranges(), n_anchors=n, party_components=4, estimators=ESTIMATORS)
        del data
        held = _reset_peak()
        with threadpool_limits(blas_threads):
            start, cpu, system = time.perf_counter(), time.process_time(), _system_seconds()
            effects = run_dcqe(grid, plan).effects
    else:
        idx = part.subjects()
        X = data.frame[list(data.covariates)].to_numpy()[idx]
        t, y = data.frame["treat"].to_numpy()[idx], data.frame["y"].to_numpy()[idx]
        del data
        held = _reset_peak()
        with threadpool_limits(blas_threads):
            start, cpu, system = time.perf_counter(), time.process_time(), _system_seconds()
            effects = estimate_effects(X, t, y, estimators=ESTIMATORS)
    seconds, cpu, system = time.perf_counter() - start, time.process_time() - cpu, _system_seconds() - system
    ate = effects.estimates["ipw"].estimate
    print(
        json.dumps(
            {"seconds": seconds, "cpu_seconds": cpu, "system_seconds": system, "peak_gb": _memory_gb("VmHWM"),
             "held_gb": held, "ate_ipw": ate}
        )
    )


def _system_seconds() -> float:
    """CPU seconds this process has spent in the kernel (page faults: on a VM, touching fresh memory costs here)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_stime


def scale_run(
    n: int, analysis: str, blas_threads: int | None, row_groups: int = 2, party_workers: int = 1
) -> dict[str, float]:
    """:func:`scale_child` in a fresh interpreter; its JSON line."""
    threads = [] if blas_threads is None else ["--blas-threads", str(blas_threads)]
    options = ["--row-groups", str(row_groups), "--party-workers", str(party_workers), *threads]
    child = subprocess.run(
        [sys.executable, __file__, "--child", str(n), analysis, *options],
        capture_output=True, text=True, check=True,
    )
    return json.loads(child.stdout.strip().splitlines()[-1])


def best_of(runs: list[dict[str, float]]) -> dict[str, float]:
    """The run of fewest seconds, with ``slowest`` the most seconds of any (the spread of the machine)."""
    return min(runs, key=lambda run: run["seconds"]) | {"slowest": max(run["seconds"] for run in runs)}


def _user_seconds(run: dict[str, float]) -> float:
    """The CPU seconds of a run spent in its own code (the algorithm's cost, without the kernel's)."""
    return run["cpu_seconds"] - run["system_seconds"]


def _figures(run: dict[str, float]) -> str:
    return (
        f"{run['seconds']:.2f} s (slowest {run['slowest']:.2f}; CPU {run['cpu_seconds']:.2f} s, of which system "
        f"{run['system_seconds']:.2f} s), peak {run['peak_gb']:.2f} GB ({run['held_gb']:.2f} GB held at the start)"
    )


def scale_figures(sizes: list[int], blas_threads: int | None, party_workers: int, repeats: int) -> bool:
    """Section [2]: W-clb beside CA per number of subjects, then their growth; False on a missed target.

    Each analysis runs ``repeats`` times, W-clb and CA taking turns, and the fastest run of each is
    judged (on a virtual machine the kernel's cost of touching fresh memory varies from run to run).
    """
    ok = True
    runs = {}
    for n in sorted(sizes):
        w, ca = [], []
        for _ in range(repeats):
            w.append(scale_run(n, "w", blas_threads, party_workers=party_workers))
            ca.append(scale_run(n, "ca", blas_threads))
        runs[n] = (best_of(w), best_of(ca))
    print(
        f"[2] BLAS threads: {'library default' if blas_threads is None else blas_threads}; W-clb's parties of a "
        f"round: {'one at a time' if party_workers == 1 else f'{party_workers} at once'}; best of {repeats} runs each"
    )
    for n, (w, ca) in runs.items():
        ratio = w["seconds"] / ca["seconds"]
        print(
            f"[2] {n:,} subjects (2x2 grid, 10 covariates, r = n anchor rows; the covariates are {n * 80 / 1e9:.2f} GB)"
        )
        print(f"    W-clb {_figures(w)}")
        print(f"    CA    {_figures(ca)}")
        ates = f"W-clb {w['ate_ipw']:.4f}, CA {ca['ate_ipw']:.4f}, truth 1"
        print(f"    W-clb / CA time {ratio:.2f}x | ATE by IPW: {ates}")
        verdicts = []
        if n in SCALE_TARGETS:
            seconds, gb = SCALE_TARGETS[n]
            met = w["seconds"] < seconds and w["peak_gb"] < gb
            verdicts.append(f"W-clb < {seconds:g} s and < {gb:g} GB: {'met' if met else 'MISSED'}")
            ok &= met
        if n >= RATIO_FROM:
            met = ratio <= RATIO_TARGET
            verdicts.append(f"W-clb / CA <= {RATIO_TARGET}x: {'met' if met else 'MISSED'}")
            ok &= met
        if n == CA_TARGET[0]:
            met = ca["seconds"] < CA_TARGET[1]
            verdicts.append(f"CA < {CA_TARGET[1]:g} s: {'met' if met else 'MISSED'}")
            ok &= met
        print("    targets: " + ("; ".join(verdicts) if verdicts else f"none judged at {n:,} subjects"))
    sizes = sorted(runs)
    for small, large in itertools.pairwise(sizes):
        growth = large / small
        (w_small, ca_small), (w_large, ca_large) = runs[small], runs[large]
        u_growth = _user_seconds(w_large) / _user_seconds(w_small)
        m_growth = w_large["peak_gb"] / w_small["peak_gb"]
        met = u_growth <= LINEAR_SLACK * growth and m_growth <= LINEAR_SLACK * growth
        ok &= met
        wall, ca_wall = w_large["seconds"] / w_small["seconds"], ca_large["seconds"] / ca_small["seconds"]
        judged = "met" if met else "MISSED"
        print(
            f"[2] W-clb from {small:,} to {large:,} subjects ({growth:g}x): user CPU time {u_growth:.2f}x, peak "
            f"memory {m_growth:.2f}x; linear in n (at most {LINEAR_SLACK:g} x {growth:g}x): {judged} | wall time "
            f"{wall:.2f}x, CA's {ca_wall:.2f}x (system time {w_small['system_seconds']:.2f} -> "
            f"{w_large['system_seconds']:.2f} s: the machine's cost of fresh pages)"
        )
    return ok


def parties_figures(n: int, row_groups: list[int], blas_threads: int | None, party_workers: int, quick: bool) -> bool:
    """Section [3]: W-clb's time and peak memory for 2 x ``row_groups`` parties on the same ``n`` subjects (judged
    unless ``quick``)."""
    runs = {r: scale_run(n, "w", blas_threads, r, party_workers) for r in row_groups}
    for r, w in runs.items():
        print(f"[3] {n:,} subjects, {2 * r} parties ({r} row groups x 2 column groups): W-clb {w['seconds']:.2f} s "
              f"(CPU {w['cpu_seconds']:.2f} s), peak {w['peak_gb']:.2f} GB ({w['held_gb']:.2f} GB held at the start), "
              f"ATE by IPW {w['ate_ipw']:.4f}")
    few, many = runs[row_groups[0]], runs[row_groups[-1]]
    growth = many["peak_gb"] / few["peak_gb"]
    met = growth <= FLAT_SLACK
    print(f"[3] peak memory from {2 * row_groups[0]} to {2 * row_groups[-1]} parties: {growth:.2f}x "
          f"(target flat, at most {FLAT_SLACK:g}x): {verdict(met, quick)}")
    return target_ok(met, quick)


def main() -> int:
    parser = BenchmarkParser(__doc__)
    parser.add_size("--bootstrap", type=int, full=1000, quick=50, help="bootstrap replicates of the table")
    parser.add_size("--subjects", type=int, nargs="+", full=[1_000_000], quick=[20_000],
                    help="subjects of section [2], one run per value")
    parser.add_size("--jobs", type=int, full=2, quick=1, help="bootstrap workers of the table (processes)")
    parser.add_size("--parties-row-groups", type=int, nargs="+", full=ROW_GROUPS, quick=ROW_GROUPS[:2],
                    help="section [3]'s row groups (2 column groups each)")
    parser.add_argument("--part", choices=("all", "table", "scale", "parties"), default="all",
                        help="run one section only")
    parser.add_argument(
        "--blas-threads",
        type=int,
        help="cap the BLAS threads of section [2] (default: one per core); 1 steadies it on a shared machine",
    )
    parser.add_argument(
        "--party-workers",
        type=int,
        default=1,
        help="W-clb's parties of a round working at once, in threads (sections [2] and [3]; default 1: one at a time)",
    )
    parser.add_size(
        "--repeats",
        type=int,
        full=3,
        quick=1,
        help="runs of the table (section [1]) and of each analysis in section [2], the fastest judged",
    )
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("--row-groups", type=int, default=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        scale_child(int(args.child[0]), args.child[1], args.blas_threads, args.row_groups, args.party_workers)
        return 0
    ok = True
    if args.part in ("all", "table"):
        ok &= table_figures(args.bootstrap, args.jobs, args.repeats)
    if args.part in ("all", "scale"):
        ok &= scale_figures(args.subjects, args.blas_threads, args.party_workers, args.repeats)
    if args.part in ("all", "parties"):
        ok &= parties_figures(min(args.subjects), args.parties_row_groups, args.blas_threads, args.party_workers,
                              args.quick)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
