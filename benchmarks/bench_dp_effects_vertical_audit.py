"""Empirical DP audit of vertical dp_effects through Party.handle: each party's share alone (issue 36, item 3).

    .venv/bin/python benchmarks/bench_dp_effects_vertical_audit.py      # 30 releases per table, ~15 min
    .venv/bin/python benchmarks/bench_dp_effects_vertical_audit.py --quick   # eps 1, a few releases (no power)

Three views, each the coordinator colluding with the other party of the row group
(collabcausal/attacks/dp_effects_vertical_audit.py): the statistics round's evaluator (its totals
decrypted by the colluding label holder, no share added), the statistics round's label holder (the
colluding evaluator adds a negligible share), the scores round's label holder (its totals decrypted
by the colluding key owner). One covariate per party, 21 subjects, worst-case neighbours (statistics:
the corner and top outcome, arm 0 versus 1; scores: the furthest pair of a lattice search under a
hostile program). Printed per row: claimed eps and mu, the neighbours' distance over the party's
sensitivity, the Clopper-Pearson lower bounds mu_lower and eps_lower (confidence 1 - 1e-6). PLANTED
rows calibrate the party's share to 1/50 of its sensitivity (monkeypatched in
collabcausal.party.vertical); "miss" is the exact chance the audit would not see it
(collabcausal.attacks.dp_effects_audit.miss_probability).

Exit 1 when a correct release's eps_lower exceeds its claim, or a planted bug the audit had the
power to see (miss < 1e-4) is not caught.
"""

from __future__ import annotations

import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from _run_mode import BenchmarkParser

import collabcausal.party.vertical.scores as scores
import collabcausal.party.vertical.statistics as statistics
from collabcausal.attacks.dp_audit import ReleaseAudit
from collabcausal.attacks.dp_effects_audit import audit_verdict, background_frame, statistics_neighbours
from collabcausal.attacks.dp_effects_vertical_audit import (
    AuditSetup,
    audit_evaluator,
    audit_label_holder,
    audit_scores_label_holder,
    hostile_scores_setup,
)
from collabcausal.estimators.dp.effects.design import FeatureMap
from collabcausal.estimators.dp.effects.vertical_program import scores_bound, statistics_bound
from collabcausal.estimators.dp.zcdp import gaussian_zcdp_sigma, zcdp_rho

FM = FeatureMap(((0.0, 10.0), (0.0, 10.0)), (0.0, 5.0), n_sites=1)
COLUMNS = ["a", "b"]
DELTA, BUG = 1e-6, 50.0


def _views(eps: float) -> list[tuple[str, Callable[[int, Path], ReleaseAudit], float, object, str]]:
    """(name, audit, the party's sensitivity, module whose sigma the planted bug shrinks, its function) per view."""
    background = background_frame(FM, COLUMNS, 20, seed=7)
    setup = AuditSetup(statistics_neighbours(FM, COLUMNS, background), ("a",), ("b",), FM, zcdp_rho(eps, DELTA), DELTA)
    score_setup, program = hostile_scores_setup(setup, background)
    bound = statistics_bound(FM, setup.groups)
    return [("statistics evaluator", lambda n, d: audit_evaluator(setup, n, d), bound, statistics, "statistics_sigma"),
            ("statistics label holder", lambda n, d: audit_label_holder(setup, n, d), bound, statistics,
             "statistics_sigma"),
            ("scores label holder", lambda n, d: audit_scores_label_holder(score_setup, program, n, d),
             scores_bound(program), scores, "scores_sigma")]


def main(argv: list[str] | None = None) -> int:
    """Run every view, setting and epsilon; print one row each; 1 on a violation."""
    parser = BenchmarkParser(__doc__)
    parser.add_size("--releases", type=int, full=30, quick=3, help="Party.handle releases per neighbouring table")
    parser.add_size("--epsilons", type=float, nargs="*", full=[0.5, 1.0, 2.0, 4.0], quick=[1.0],
                    help="claimed epsilons")
    parser.add_size("--bug-epsilons", type=float, nargs="*", full=[1.0], quick=[], help="epsilons of the planted bug")
    args = parser.parse_args(argv)
    print(f"{args.releases} releases per table through Party.handle, delta = {DELTA:g}, confidence 1 - 1e-6")
    print(f"{'view':<24} {'setting':<8} {'eps':>4} {'mu':>6} {'dist/D':>6} {'mu_low':>6} {'eps_low':>7} {'miss':>8}"
          "  verdict")
    failures, start = 0, time.perf_counter()
    runs = [(eps, False) for eps in args.epsilons] + [(eps, True) for eps in args.bug_epsilons]
    for eps, bug in runs:
        for name, audit, sensitivity, module, attribute in _views(eps):
            sigma = gaussian_zcdp_sigma(sensitivity, zcdp_rho(eps, DELTA))
            correct = getattr(module, attribute)
            if bug:
                setattr(module, attribute, lambda *a, f=correct: f(*a) / BUG)
            try:
                with tempfile.TemporaryDirectory() as ledgers:
                    a = audit(args.releases, Path(ledgers))
            finally:
                setattr(module, attribute, correct)
            miss, verdict, failed = audit_verdict(a.epsilon_lower > a.claimed_epsilon, bug, args.releases,
                                                  a.distance, sigma / BUG, a.claimed_mu)
            failures += failed
            print(f"{name:<24} {'PLANTED' if bug else 'correct':<8} {eps:>4g} {a.claimed_mu:>6.3f} "
                  f"{a.distance / sensitivity:>6.3f} {a.mu_lower:>6.3f} {a.epsilon_lower:>7.3f} {miss:>8.1e}  "
                  f"{verdict}", flush=True)
    print(f"total {time.perf_counter() - start:.0f} s; {failures} violation(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
