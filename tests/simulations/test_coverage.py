"""Coverage of the effect intervals on known-truth DGPs (scripts/interval_coverage.py).

False-failure rates. Each coverage assertion is a one-sided binomial bound: with R replications
and a true coverage p, the number of covering intervals is Binomial(R, p), and the test asserts
it is at least ``binom.ppf(1e-5, R, p_min)``, which a calibrated interval (p >= p_min) misses with
probability <= 1e-5 (computed: R = 200, p_min = 0.93 -> 168, P = 4.0e-6; R = 400 -> 348,
P = 7.0e-6). The SE-ratio assertions compare the mean SE with the sd of R estimates, whose
relative sampling sd is 1/sqrt(2 (R - 1)) = 5.0% at R = 200; the bounds [0.80, 1.25] are 4.4 of
those sds away (normal tail 5e-6 per side). With at most 12 such assertions per test the union
bound keeps a false failure below 1e-4. Everything is seeded as well.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import binom

from collabcausal.analyst.effects import estimate_effects
from collabcausal.randomness import child_rng
from collabcausal.simulations.coverage import draw, format_coverage, run_coverage, truth

TAIL = 1e-5


def test_truth_of_the_well_specified_dgp():
    assert truth("well-specified", "ate") == 1.0
    # ATT = 1 + 0.5 E[x1 | T = 1] > 1 since the propensity increases with x1
    assert 1.05 < truth("well-specified", "att") < 1.3


def test_analytic_intervals_are_calibrated_on_the_well_specified_dgp_quick():
    """IPW and AIPW sandwich SEs and PSM's Abadie-Imbens (2016) SE, 200 replications at n = 500."""
    R, n = 200, 500
    covered: dict[tuple[str, str], int] = {}
    estimates: dict[tuple[str, str], list[float]] = {}
    ses: dict[tuple[str, str], list[float]] = {}
    for r in range(R):
        X, t, y = draw("well-specified", child_rng(0, "coverage-test", r), n)
        for estimand in ("ate", "att"):
            target = truth("well-specified", estimand)
            for name, est in estimate_effects(X, t, y, estimand=estimand).estimates.items():
                key = (estimand, name)
                covered[key] = covered.get(key, 0) + int(est.ci_low <= target <= est.ci_high)
                estimates.setdefault(key, []).append(est.estimate)
                ses.setdefault(key, []).append(est.se)
    # PSM's corrected SE is calibrated at p >= 0.90 (measured 91-95%), IPW and AIPW at p >= 0.93
    for (estimand, name), count in covered.items():
        p_min = 0.90 if name == "psm" else 0.93
        assert count >= binom.ppf(TAIL, R, p_min), (estimand, name, count)
        ratio = np.mean(ses[(estimand, name)]) / np.std(estimates[(estimand, name)], ddof=1)
        # before the stacked sandwich the IPW ATE's SE was ~1.4 times the spread (issue 12)
        assert 0.80 < ratio < 1.25, (estimand, name, ratio)


def test_run_coverage_reports_every_estimator_and_interval():
    rows = run_coverage(["poor-overlap"], [300], 3, n_boot=20)
    assert len(rows) == 2 * 3 * 3  # estimands x estimators x intervals
    assert {r["interval"] for r in rows} == {"analytic", "percentile", "bca"}
    assert all(0.0 <= r["coverage"] <= 1.0 and r["n_rep"] == 3 for r in rows)
    table = format_coverage(rows)
    assert "| poor-overlap | 300 | ATE | IPW |" in table and "bca cover" in table


@pytest.mark.slow
def test_every_interval_of_ipw_and_aipw_is_calibrated_on_the_well_specified_dgp():
    """scripts/interval_coverage.py's well-specified rows at n = 500: 400 replications, B = 200 (~4 min)."""
    R = 400
    rows = run_coverage(["well-specified"], [500], R, n_boot=200, n_jobs=2)
    for row in rows:
        if row["estimator"] in ("ipw", "aipw"):
            assert row["coverage"] * R >= binom.ppf(TAIL, R, 0.93), row
        elif row["interval"] == "analytic":
            assert row["coverage"] * R >= binom.ppf(TAIL, R, 0.90), row
