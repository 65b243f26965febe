"""The private effect estimate (study kind ``dp_effects``) beside its peers (issue 21, item 6).

    .venv/bin/python benchmarks/bench_dp_effects.py            # full: 1000 binary replications (hours)
    .venv/bin/python benchmarks/bench_dp_effects.py --quick    # a few replications, small n, < 2 min

One run prints, for the synthetic multi-site study (collabcausal/simulations/multisite.py: 4 sites
x 25,000 subjects, 10 confounders; binary outcome, then the same study with a continuous outcome),
one row per method over seeded replications (seed ``--seed + r`` draws replication r's data; the
DP noise comes from OpenDP, which is not seedable): the full-sample estimate of replication 0 with
its SE, bias, RMSE, coverage of the 95% interval with its Monte Carlo SE, mean SE, spread of the
estimates over seeds, the DP floor and the share of the variance that is DP noise. Methods: the
oracle AIPW (true propensity and outcome means: the coverage the design itself allows on these
replications, the yardstick for every other row's), difference in means (trivial, non-private),
federated AIPW (non-private: centralized AIPW with site-level nuisances), plain DC-QE (no
guarantee), ``dp_effects`` at eps 0.25 .. 8 per party in total without and with secure
aggregation, eps-ADUM, and DC-QE on DP representations (replication 0 only, SE from 5 bootstrap
replicates: one study takes about 2 minutes at this n).
Then LaLonde (bundled; NSW treated + PSID controls, split into 2 row groups): ATE and ATT at
eps 1, 4, 16 against the non-private AIPW on the same rows, and the smallest eps whose mean SE and
spread over DP draws are both within 1.5x the non-private SE (the spread too: on LaLonde the
reported SE misses the variability of the DP nuisance fits).

The DP floor of a row is the SD of the DP noise on the estimate alone: for ``dp_effects`` the
noise SD of the released AIPW score sum over n (its width 2R/t times the release's sensitivity over
its weight, over ``sqrt(2 rho)`` for the scores' share of the study's zCDP rho, and summed over the
parties' shares with secure aggregation); for eps-ADUM ``8 D_y / (n eps)``; for DP representations the analyst's
:func:`~collabcausal.analyst.dp_release.se_floor`.

Targets (full mode; exit 1 when missed): binary outcome, eps 1, ATE: RMSE <= 1.25x federated
AIPW's and coverage in [0.93, 0.97] over >= 200 replications, on the secure path (the recommended one).
``--quick`` checks sanity only (every ``dp_effects`` row estimated, finite; the continuous table runs
only the target's rows); ``--target-only`` runs just the target's rows (about 10 minutes for the default
1000 replications). 1000, not the issue's minimum of 200: the RMSE ratio moves by 2-3% and the coverage
by 0.01-0.02 between disjoint sets of 500 seeds (the oracle AIPW's coverage too), as much as the targets'
margins.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

import numpy as np
from _run_mode import BenchmarkParser

from collabcausal.simulations.dp_effects_benchmark import (
    Design,
    Estimate,
    Summary,
    difference_in_means,
    federated_aipw,
    fmt,
    lalonde_sites,
    oracle_aipw,
    print_summary_table,
    quiet_clipping_log,
    run_adum,
    run_dcqe,
    run_private,
    study_spec,
    summarize,
)
from collabcausal.simulations.multisite import OUTCOME_RANGE, covariate_bounds, simulate_sites, true_effects

EPSILONS = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0)
LALONDE_EPSILONS = (1.0, 4.0, 16.0)
TARGET_EPSILON = 1.0
RMSE_RATIO = 1.25
COVERAGE = (0.93, 0.97)
MIN_REPS = 200
DEFAULT_REPS = 1000
TARGET_ROW = f"dp_effects secure eps {TARGET_EPSILON:g}"
REFERENCE_ROW = "federated AIPW (non-private)"
ORACLE_ROW = "oracle AIPW (true nuisances)"


def methods(design: Design, target_only: bool, changes: dict[str, object]) -> dict[str, Callable]:
    """Row label -> function of the sites (replicated rows); only the target's two with ``target_only``."""
    rows: dict[str, Callable] = {ORACLE_ROW: oracle_aipw, REFERENCE_ROW: federated_aipw}
    if target_only:
        return rows | {TARGET_ROW: lambda s: run_private(s, study_spec(design, TARGET_EPSILON,
                                                                          secure_aggregation=True, **changes))}
    rows |= {
        "difference in means (trivial)": difference_in_means,
        "plain DC-QE (no guarantee)": lambda s: run_dcqe(s, design, None),
    }
    for mode, flag in (("plain", False), ("secure", True)):
        for eps in EPSILONS:
            spec = study_spec(design, eps, secure_aggregation=flag, **changes)
            rows[f"dp_effects {mode} eps {eps:g}"] = lambda s, spec=spec: run_private(s, spec)
    rows["eps-ADUM eps 1 (4x4 grid)"] = lambda s: run_adum(s, design, TARGET_EPSILON)
    return rows


def replicate(outcome: str, n_per_site: int, reps: int, seed: int, target_only: bool = False,
              changes: dict[str, object] | None = None) -> dict[str, Summary]:
    """Every method over ``reps`` seeded replications of the multi-site study; DP DC-QE on replication 0."""
    design = Design(tuple(covariate_bounds()), OUTCOME_RANGE[outcome])
    rows = methods(design, target_only, changes or {})
    results: dict[str, list[Estimate]] = {label: [] for label in rows}
    dp_dcqe = None
    for r in range(reps):
        sites = simulate_sites(n_per_site, outcome, np.random.default_rng(seed + r))
        for label, run in rows.items():
            if run is not None:
                results[label].append(run(sites))
        if r == 0 and not target_only:
            dp_dcqe = run_dcqe(sites, design, TARGET_EPSILON)
    truth = true_effects(outcome)["ate"]
    table = {label: summarize(results[label], truth) for label in rows}
    if dp_dcqe is not None:
        table[f"DC-QE on DP representations eps {TARGET_EPSILON:g} (rep 0)"] = summarize([dp_dcqe], truth)
    print_summary_table(f"{outcome} outcome, {4} x {n_per_site} subjects, {reps} replications, true ATE {truth:.4f}",
                 table, {label: results[label][0] for label in rows if results[label]} | {
                     f"DC-QE on DP representations eps {TARGET_EPSILON:g} (rep 0)": dp_dcqe})
    return table


def lalonde(reps: int, seed: int, secure: bool = True, changes: dict[str, object] | None = None) -> None:
    """LaLonde ATE and ATT at :data:`LALONDE_EPSILONS` (``reps`` DP draws each) beside the non-private AIPW.

    ``reps`` must be at least 2 for a spread (with 1 draw the "within 1.5x" line says none).
    """
    sites, design = lalonde_sites(2, seed)
    print(f"\n### LaLonde (185 treated + 2490 PSID controls, 2 row groups, re78 in $1000, range [0, 60], "
          f"trim 0.1), {reps} DP draws per eps\n")
    print("| estimand | eps | aggregation | mean estimate | spread | mean SE | DP floor | SE / non-private SE | "
          "spread / non-private SE |")
    print("|---|---|---|---|---|---|---|---|---|")
    for estimand in ("ate", "att"):
        reference = federated_aipw(sites, estimand)
        print(f"| {estimand} | inf | non-private AIPW | {reference.estimate:.3f} | - | {reference.se:.3f} | 0 | 1.00 "
              "| - |")
        within = None
        for eps in LALONDE_EPSILONS:
            spec = study_spec(design, eps, estimands=(estimand,), secure_aggregation=secure, **(changes or {}))
            draws = [run_private(sites, spec, estimand) for _ in range(reps)]
            s = summarize(draws, 0.0)
            ratio, spread = s.mean_se / reference.se, s.spread / reference.se
            if within is None and max(ratio, spread) <= 1.5:
                within = eps
            mean = s.bias  # truth 0: the mean estimate
            print(f"| {estimand} | {eps:g} | {'secure' if secure else 'plain'} | {fmt(mean, 3)} | {fmt(s.spread, 3)} "
                  f"| {fmt(s.mean_se, 3)} | {fmt(s.floor, 3)} | {fmt(ratio, 2)} | {fmt(spread, 2)} |")
        print(f"| {estimand} | interval within 1.5x the non-private one from eps | "
              f"{'none up to 16' if within is None else f'{within:g}'} |||||||")


def target_line(table: dict[str, Summary]) -> str:
    """The target row against its peers, with the figures the targets are stated in."""
    reference, s, oracle = table[REFERENCE_ROW], table[TARGET_ROW], table[ORACLE_ROW]
    return (f"{TARGET_ROW}: RMSE {s.rmse:.5f} = {s.rmse / reference.rmse:.3f} x federated AIPW's "
            f"{reference.rmse:.5f} (target <= {RMSE_RATIO}); coverage {s.coverage:.3f} (MC SE {s.coverage_mcse:.3f}; "
            f"target {COVERAGE[0]}-{COVERAGE[1]}; oracle AIPW {oracle.coverage:.3f}, federated AIPW "
            f"{reference.coverage:.3f})")


def check_targets(table: dict[str, Summary], reps: int) -> list[str]:
    """Missed full-mode targets (binary outcome, eps 1, the recommended secure path), one line each.

    The rows without secure aggregation are printed beside it, not held to the target: each party's
    full noise on the sum is sqrt(R - 1) times the distributed shares'.
    """
    missed = []
    reference, s = table[REFERENCE_ROW], table[TARGET_ROW]
    if reps < MIN_REPS:
        missed.append(f"only {reps} replications; the targets need >= {MIN_REPS}")
    if not s.rmse <= RMSE_RATIO * reference.rmse:
        missed.append(f"secure: RMSE {s.rmse:.5f} > {RMSE_RATIO} x federated AIPW's {reference.rmse:.5f} "
                      f"(ratio {s.rmse / reference.rmse:.3f})")
    if not COVERAGE[0] <= s.coverage <= COVERAGE[1]:
        missed.append(f"secure: coverage {s.coverage:.3f} (MC SE {s.coverage_mcse:.3f}) outside {COVERAGE} "
                      f"(federated AIPW: {reference.coverage:.3f}, oracle AIPW: {table[ORACLE_ROW].coverage:.3f})")
    return missed


def check_sanity(tables: list[dict[str, Summary]]) -> list[str]:
    """Quick mode: every ``dp_effects`` row that ran estimated every replication with finite numbers."""
    bad = []
    for table in tables:
        for label, s in table.items():
            if label.startswith("dp_effects") and (
                s.failed or not np.isfinite([s.rmse, s.coverage, s.mean_se]).all()
            ):
                bad.append(f"{label}: {s.failed} failed replications or non-finite summary")
    return bad


def main(argv: list[str] | None = None) -> int:
    """Run the tables; 1 when a target (full) or a sanity check (quick) is missed."""
    parser = BenchmarkParser(__doc__)
    parser.add_size("--reps", type=int, full=DEFAULT_REPS, quick=2, help="replications of the binary study")
    parser.add_size("--continuous-reps", type=int, full=50, quick=1, help="replications of the continuous study")
    parser.add_size("--lalonde-reps", type=int, full=20, quick=1, help="DP draws per eps on LaLonde")
    parser.add_argument("--seed", type=int, default=0, help="replication r draws its data with seed + r")
    parser.add_argument("--target-only", action="store_true",
                        help="only the target's rows (federated AIPW, secure eps 1, binary): about 3 s a replication")
    parser.add_argument("--ridge-scale", type=float, help="the studies' ridge_scale (default: DPEffectsSpec's)")
    args = parser.parse_args(argv)
    quiet_clipping_log()  # the designs' public ranges clip a few simulated values on purpose
    changes: dict[str, object] = {} if args.ridge_scale is None else {"ridge_scale": args.ridge_scale}
    quick, reps = args.quick, args.reps
    n_per_site = 5000 if quick else 25_000  # 2500 made eps 0.25 without secure aggregation too small a study (refused)
    start = time.perf_counter()
    binary = replicate("binary", n_per_site, reps, args.seed, args.target_only, changes)
    tables = [binary]
    if not args.target_only:
        tables.append(replicate("continuous", n_per_site, args.continuous_reps, args.seed, quick, changes))
        lalonde(args.lalonde_reps, args.seed, changes=changes)
    print(f"\n{time.perf_counter() - start:.0f} s")
    print(target_line(binary))
    missed = check_sanity(tables) if quick else check_targets(binary, reps)
    for line in missed:
        print(f"TARGET MISSED: {line}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
