"""What a coordinator holding the study CA reads from a victim it surrounds with k parties of its own.

    .venv/bin/python benchmarks/bench_secagg_sybil.py    # --quick: the same (instant)

The victim (one party of a dp_effects statistics release, eps 1, delta 1e-6, the design of
tests/secagg/test_secagg_attacks.py) calibrates its noise share to the k other shares of the roster
{victim, k minted parties}; the coordinator knows every other mask and adds no noise for its parties,
so the victim's values reach it under the victim's share alone. Printed: the epsilon that share
gives (``sum_epsilon`` with one share) against the epsilon charged, for a victim with
``peers = "any"``, and what a pinned victim does (refuses before the charge; the tests drive both
through ``Party.handle`` with real certificates). Analytic, instant; no timing.
"""

from __future__ import annotations

from _run_mode import BenchmarkParser

from collabcausal.estimators.dp.effects.design import FeatureMap
from collabcausal.estimators.dp.effects.statistics import CROSS_WEIGHT, statistics_length, statistics_sensitivity
from collabcausal.estimators.dp.zcdp import zcdp_rho
from collabcausal.secagg import SCALE_BITS, integer_sensitivity, share_sigma, sum_epsilon

EPSILON, DELTA = 1.0, 1e-6
FM = FeatureMap(((0.0, 10.0), (-1.0, 1.0)), (0.0, 5.0), n_sites=1)


def effective_epsilon(k: int) -> float:
    """The epsilon of the victim's own share when it calibrated to ``k`` other shares."""
    length = statistics_length(FM.dim)
    sensitivity = integer_sensitivity(statistics_sensitivity(FM, CROSS_WEIGHT), length, SCALE_BITS)
    sigma = share_sigma(sensitivity, zcdp_rho(EPSILON, DELTA), k, length)
    return sum_epsilon(sensitivity, sigma, 1, length, DELTA)


def main(argv: list[str] | None = None) -> None:
    """Print the table of docs/secure-aggregation.md ("Pinned peers")."""
    BenchmarkParser(__doc__).parse_args(argv)
    print(f"victim charged eps {EPSILON:g} (delta {DELTA:g}); roster = victim + k coordinator parties")
    print(f"{'k':>4} {'effective eps, peers = any':>27} {'pinned victim':>26}")
    for k in (1, 2, 9, 99):
        print(f"{k:>4} {effective_epsilon(k):>27.2f} {'refused, nothing charged':>26}")


if __name__ == "__main__":
    main()
