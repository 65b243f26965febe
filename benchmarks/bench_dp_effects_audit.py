"""Empirical DP audit of dp_effects' two releases through Party.handle (issue 21, item 5).

    .venv/bin/python benchmarks/bench_dp_effects_audit.py                 # 2,000 releases per table, ~10 min
    .venv/bin/python benchmarks/bench_dp_effects_audit.py --releases 500 --seeded 200000   # a closer look
    .venv/bin/python benchmarks/bench_dp_effects_audit.py --quick   # 40 releases at eps 1, seconds (no power)

For each release (statistics: 2 covariates and 2 sites; scores: AIPW and Hajek, ATE and ATT, trim
0.1, hostile nuisances) and each claimed epsilon, two real parties hold worst-case neighbouring
tables (collabcausal/attacks/dp_effects_audit.py) and answer the same request ``--releases``
times each through Party.handle (their ledgers, OpenDP's sampler). Printed per row: the claimed mu
and epsilon, the neighbours' distance over the party's sensitivity, the Clopper-Pearson lower
bounds mu_lower and eps_lower (confidence 1 - 1e-6) of the likelihood-ratio test, the
assumption-free (eps, delta) event bound, and, for the same neighbours, eps_lower of a seeded numpy
audit with ``--seeded`` releases (how close the method gets). The PLANTED rows halve the
sensitivity (monkeypatched in collabcausal.party.dp_effects); their column "miss" is the exact
probability the audit would not see it (collabcausal.attacks.dp_effects_audit.miss_probability).

Exit 1 when a correct release's eps_lower exceeds its claim, or when a planted bug the audit had
the power to see (miss < 1e-4) is not caught.
"""

from __future__ import annotations

import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np
from _run_mode import BenchmarkParser

import collabcausal.party.dp_effects as dp_effects
from collabcausal.attacks.dp_audit import audit_gaussian_release
from collabcausal.attacks.dp_effects_audit import (
    audit_table,
    audit_through_parties,
    audit_verdict,
    background_frame,
    exact_values,
    scores_neighbours,
    statistics_neighbours,
)
from collabcausal.estimators.dp.effects.design import FeatureMap
from collabcausal.estimators.dp.effects.nuisances import NuisanceModel
from collabcausal.estimators.dp.effects.scores import components
from collabcausal.estimators.dp.zcdp import zcdp_rho
from collabcausal.messages import Message
from collabcausal.party.dp_effects import SCORES, STATISTICS

COLUMNS = ["age", "score"]
FM = FeatureMap(((18.0, 90.0), (0.0, 100.0)), (0.0, 60_000.0), n_sites=2)
SITE, DELTA, TRIM = 1, 1e-6, 0.1
ESTIMATORS, ESTIMANDS = ["aipw", "ipw"], ["ate", "att"]
# Hostile nuisances sent with both neighbours' requests (a prior release): the propensity jumps
# from the trim to 1 - trim along "age", mu0 follows "score" across the whole outcome range, mu1
# sits at the bottom of it.
MODEL = NuisanceModel(np.array([0.0, 0.0, 40.0, 0.0]),
                      (np.array([0.0, 0.0, 0.0, 0.5]), np.array([0.0, -0.5, 0.0, 0.0])))
# Hostile noise replicates (the default release carries them): the propensity flipped; the outcome models swapped.
REPLICAS = [NuisanceModel(np.array([0.0, 0.0, -40.0, 0.0]), MODEL.outcome_coef),
            NuisanceModel(MODEL.propensity_coef, (MODEL.outcome_coef[1], MODEL.outcome_coef[0]))]
BACKGROUND = background_frame(FM, COLUMNS, 60, seed=21)
SENSITIVITY = {STATISTICS: "statistics_sensitivity", SCORES: "release_sensitivity"}


def request(op: str, epsilon: float) -> Message:
    """The request both neighbours get (one fold: each record's score uses the same models), at ``epsilon``."""
    params = {"study": "audit", "rho": zcdp_rho(epsilon, DELTA), "delta": DELTA, "columns": COLUMNS,
              "design": FM.to_spec(), "site": SITE, "n_folds": 1}
    if op == SCORES:
        params |= {"models": [MODEL.to_spec()], "estimators": ESTIMATORS, "estimands": ESTIMANDS, "trim": TRIM,
                   "replicates": [[m.to_spec()] for m in REPLICAS]}
    return Message(op, params)


def neighbours(op: str):
    """Worst-case neighbouring tables of ``op`` (collabcausal/attacks/dp_effects_audit.py)."""
    if op == STATISTICS:
        return statistics_neighbours(FM, COLUMNS, BACKGROUND)
    parts = components(ESTIMATORS, ESTIMANDS, FM.outcome_width, TRIM)
    return scores_neighbours(FM, COLUMNS, BACKGROUND, SITE, MODEL, parts, TRIM, replicates=REPLICAS)


@contextmanager
def planted(op: str, on: bool):
    """Halve the party's sensitivity of ``op`` while ``on`` (the bug the audit must catch)."""
    name = SENSITIVITY[op]
    correct = getattr(dp_effects, name)
    if on:
        setattr(dp_effects, name, lambda *a: correct(*a) / 2.0)
    try:
        yield
    finally:
        setattr(dp_effects, name, correct)


def ledger_root() -> str | None:
    """/dev/shm when writable: a ledger commits with fsync, about 20 ms per release on a disk."""
    shm = Path("/dev/shm")
    return str(shm) if shm.is_dir() and shm.stat().st_mode & 0o002 else None


def main(argv: list[str] | None = None) -> int:
    """Run every release, setting and epsilon; print one row each; 1 on a violation."""
    parser = BenchmarkParser(__doc__)
    parser.add_size("--releases", type=int, full=2000, quick=40, help="Party.handle releases per neighbouring table")
    parser.add_size("--seeded", type=int, full=2_000_000, quick=20_000,
                    help="releases of the seeded numpy audit (0: skip)")
    parser.add_size("--epsilons", type=float, nargs="+", full=[0.5, 1.0, 2.0, 4.0], quick=[1.0],
                    help="claimed epsilons")
    args = parser.parse_args(argv)
    print(f"{args.releases} releases per table through Party.handle (OpenDP), delta = {DELTA:g}, "
          f"confidence 1 - 1e-6; seeded numpy audit: {args.seeded} releases")
    print(f"{'release':<22} {'setting':<8} {'eps':>4} {'mu':>6} {'dist/D':>6} {'mu_low':>6} {'eps_low':>7} "
          f"{'eps_evt':>7} {'seeded':>6} {'miss':>8}  verdict")
    failures, start = 0, time.perf_counter()
    for op in (STATISTICS, SCORES):
        frames = neighbours(op)
        for bug in (False, True):
            for eps in args.epsilons:
                with planted(op, bug), tempfile.TemporaryDirectory(dir=ledger_root()) as ledgers:
                    a, params = audit_through_parties(frames, COLUMNS, request(op, eps), args.releases, Path(ledgers))
                sensitivity, sigma = params["sensitivity"], params["sigma"]
                seeded = float("nan")
                if args.seeded:
                    first, second = (exact_values(audit_table(f, COLUMNS), request(op, eps)) for f in frames)
                    seeded = audit_gaussian_release(first, second, sensitivity, eps, DELTA, args.seeded,
                                                    rng=np.random.default_rng(0)).epsilon_lower
                miss, verdict, failed = audit_verdict(a.epsilon_lower > eps, bug, args.releases, a.distance, sigma,
                                                      a.claimed_mu)
                failures += failed
                print(f"{op:<22} {'PLANTED' if bug else 'correct':<8} {eps:>4g} {a.claimed_mu:>6.3f} "
                      f"{a.distance / (sensitivity * (2 if bug else 1)):>6.3f} {a.mu_lower:>6.3f} "
                      f"{a.epsilon_lower:>7.3f} {a.epsilon_lower_event:>7.3f} {seeded:>6.3f} {miss:>8.1e}  {verdict}",
                      flush=True)
    print(f"total {time.perf_counter() - start:.0f} s; {failures} violation(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
