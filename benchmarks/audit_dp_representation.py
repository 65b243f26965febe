"""Empirical DP audit of the dp_representation release on worst-case neighbouring tables.

    .venv/bin/python benchmarks/audit_dp_representation.py                   # 2,000,000 releases, numpy
    .venv/bin/python benchmarks/audit_dp_representation.py --opendp --releases 20000   # the party's sampler
    .venv/bin/python benchmarks/audit_dp_representation.py --quick    # 20,000 releases, seconds

For each setting (full rank with the default norm bound, a binding norm bound at m~ < m, a party
without labels, and a deliberately mis-calibrated release whose sensitivity omits its labels) and
each epsilon, prints the claimed mu = Delta/sigma and epsilon, the neighbours' distance (= Delta: worst
case), the Clopper-Pearson lower bounds mu_lower and epsilon_lower (confidence 1 - 1e-6) of the
likelihood-ratio test, and the assumption-free (eps, delta) event bound. A correct release keeps
epsilon_lower <= claimed; the mis-calibrated one must exceed it (the audit's power). Method:
collabcausal/attacks/dp_audit.py. Exit 1 when a correct release exceeds its claim, or (full run) when
the mis-calibrated one is never caught.
"""

from __future__ import annotations

import math
import sys
import time

import numpy as np
import pandas as pd
from _run_mode import BenchmarkParser

from collabcausal.anchor_key import simulation_anchor_key
from collabcausal.attacks.dp_audit import audit_gaussian_release, corner_neighbours
from collabcausal.estimators.dp.calibration import representation_sensitivity

KEY = simulation_anchor_key(5)
RANGES = {"a": [0.0, 10.0], "b": [-1.0, 1.0], "c": [0.0, 1.0]}
BACKGROUND = pd.DataFrame({"a": [1.0, 5.0, 9.0], "b": [0.0, -0.5, 0.5], "c": [0.2, 0.5, 0.9],
                           "t": [0, 1, 0], "y": [0.0, 1.0, -1.0]})
DELTA = 1e-5
# name: (m~, C, labels released, labels counted in the sensitivity)
MIS_CALIBRATED = "MIS-CALIBRATED (labels uncounted)"
SETTINGS = {
    "full rank, default C": (3, math.sqrt(3), True, True),
    "binding C=1, m~=2": (2, 1.0, True, True),
    "no labels": (3, math.sqrt(3), False, False),
    MIS_CALIBRATED: (3, math.sqrt(3), True, False),
}


def main(argv: list[str] | None = None) -> int:
    """Run every setting at every epsilon and print one row each; 1 when a verdict fails (module docstring)."""
    parser = BenchmarkParser(__doc__)
    parser.add_size("--releases", type=int, full=2_000_000, quick=20_000, help="releases per neighbouring table")
    parser.add_argument("--opendp", action="store_true", help="OpenDP's sampler (a party's) instead of seeded numpy")
    parser.add_argument("--epsilons", type=float, nargs="+", default=[0.5, 1.0, 2.0, 4.0, 8.0])
    args = parser.parse_args(argv)
    sampler = "OpenDP" if args.opendp else "numpy (seed 0)"
    print(f"{args.releases} releases per table, {sampler}, delta = {DELTA:g}, confidence 1 - 1e-6")
    print(f"{'setting':<36} {'eps':>5} {'mu':>7} {'|V-V`|':>7} {'Delta':>7} {'mu_lower':>8} {'eps_lower':>9} "
          f"{'eps_event':>9}  verdict")
    start, exceeded, caught = time.perf_counter(), [], 0
    for name, (n_components, clip_norm, labels, counted) in SETTINGS.items():
        background = BACKGROUND if labels else BACKGROUND[list(RANGES)]
        first, second = corner_neighbours(KEY, "audit", RANGES, n_components, clip_norm,
                                          (-3.0, 3.0) if labels else None, background)
        sensitivity = representation_sensitivity(clip_norm, counted)
        for eps in args.epsilons:
            rng = None if args.opendp else np.random.default_rng(0)
            a = audit_gaussian_release(first, second, sensitivity, eps, DELTA, args.releases, rng=rng)
            over = a.epsilon_lower > eps
            if name == MIS_CALIBRATED:
                caught += over
                verdict = "caught" if over else "not caught"
            else:
                exceeded += [f"{name} at eps {eps:g}"] * over
                verdict = "EXCEEDS CLAIM" if over else "ok"
            print(f"{name:<36} {eps:>5g} {a.claimed_mu:>7.4f} {a.distance:>7.4f} {sensitivity:>7.4f} "
                  f"{a.mu_lower:>8.4f} {a.epsilon_lower:>9.3f} {a.epsilon_lower_event:>9.3f}  {verdict}", flush=True)
    print(f"total {time.perf_counter() - start:.0f} s; correct releases exceeding their claim: {exceeded or 'none'}; "
          f"the mis-calibrated one caught at {caught} of {len(args.epsilons)} epsilons")
    return 1 if exceeded or (not caught and not args.quick) else 0


if __name__ == "__main__":
    sys.exit(main())
