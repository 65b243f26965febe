"""Coverage of every estimator x interval on known-truth data-generating processes.

Each replication draws a sample, computes the full-sample estimates with their analytic SEs
(:func:`collabcausal.analyst.effects.estimate_effects`, the analyst's own path) and ``n_boot``
nonparametric bootstrap replicates of the whole pipeline (propensity refitted on every resample),
then asks :func:`collabcausal.estimators.intervals.interval_estimate` for the analytic,
percentile and BCa intervals, and records whether each covers the population effect.

DGPs (X ~ N(0, I_3); effect ``1 + 0.5 x_1``, so ATE = 1 and ATT = 1 + 0.5 E[x_1 | T = 1]):

* ``well-specified``: logit e = 0.2 + 0.6 x_1 - 0.4 x_2 + 0.3 x_3; Y(0) linear in X; the
  logistic propensity and the linear outcome regressions are both correct.
* ``misspecified-outcome``: as above, plus ``1.5 (x_1^2 - 1) + x_2 x_3`` in Y(0): the linear
  outcome regressions are wrong (AIPW stays consistent through the propensity).
* ``poor-overlap``: the propensity's slopes multiplied by 2.5 (propensities near 0 and 1).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache, partial

import numpy as np
from numpy.typing import NDArray
from scipy.special import expit
from threadpoolctl import threadpool_limits

from collabcausal.analyst.effects import ESTIMATORS, estimate_effects
from collabcausal.errors import CollabCausalError, InputError
from collabcausal.estimators.bootstrap import run_replicates
from collabcausal.estimators.intervals import INTERVALS, interval_estimate
from collabcausal.randomness import child_rng

DGPS: tuple[str, ...] = ("well-specified", "misspecified-outcome", "poor-overlap")
ESTIMANDS: tuple[str, ...] = ("ate", "att")
_SLOPES = np.array([0.6, -0.4, 0.3])
_TRUTH_DRAWS = 4_000_000  # Monte Carlo draws for the population ATT (its error sd < 2e-4)


def draw(dgp: str, rng: np.random.Generator, n: int) -> tuple[NDArray[np.float64], NDArray[np.int8], NDArray]:
    """One sample ``(X, t, y)`` of size n from a DGP of the module docstring."""
    if dgp not in DGPS:
        raise InputError(f"unknown DGP {dgp!r}", f"use one of {list(DGPS)}")
    X = rng.normal(size=(n, 3))
    t = (rng.random(n) < _propensity(dgp, X)).astype(np.int8)
    y0 = 1.0 + X @ [1.0, 0.5, -0.5] + rng.normal(size=n)
    if dgp == "misspecified-outcome":
        y0 += 1.5 * (X[:, 0] ** 2 - 1.0) + X[:, 1] * X[:, 2]
    return X, t, y0 + t * (1.0 + 0.5 * X[:, 0])


def _propensity(dgp: str, X: NDArray[np.float64]) -> NDArray[np.float64]:
    return expit(0.2 + X @ (_SLOPES * (2.5 if dgp == "poor-overlap" else 1.0)))


@cache
def truth(dgp: str, estimand: str) -> float:
    """The population effect: ATE = 1; ATT = 1 + 0.5 E[x_1 e(X)] / E[e(X)] by seeded Monte Carlo."""
    if estimand == "ate":
        return 1.0
    X = np.random.default_rng(20_240_601).normal(size=(_TRUTH_DRAWS, 3))
    e = _propensity(dgp, X)
    return float(1.0 + 0.5 * (X[:, 0] @ e) / e.sum())


@dataclass(frozen=True)
class CoverageRecord:
    """One replication's interval for one (DGP, n, estimand, estimator, interval)."""

    dgp: str
    n: int
    estimand: str
    estimator: str
    interval: str
    estimate: float
    ci_low: float | None
    ci_high: float | None
    n_failed: int


def replicate(
    dgp: str, n: int, r: int, *, seed: int = 0, n_boot: int = 200, intervals: Sequence[str] = INTERVALS
) -> list[CoverageRecord]:
    """Replication ``r``: the intervals of every estimator, estimand and interval kind."""
    X, t, y = draw(dgp, child_rng(seed, "coverage", dgp, n, r), n)
    points = {k: estimate_effects(X, t, y, estimand=k).estimates for k in ESTIMANDS}
    boots = {(k, m): np.full(n_boot, np.nan) for k in ESTIMANDS for m in ESTIMATORS}
    boot_rng = child_rng(seed, "coverage-bootstrap", dgp, n, r)
    for b in range(n_boot):
        idx = boot_rng.integers(0, n, size=n)
        for k in ESTIMANDS:
            try:
                fitted = estimate_effects(X[idx], t[idx], y[idx], estimand=k, analytic_se=False).estimates
            except CollabCausalError:
                continue
            for m in ESTIMATORS:
                boots[(k, m)][b] = fitted[m].estimate
    out = []
    for (k, m), reps in boots.items():
        for kind in intervals:
            try:
                iv = interval_estimate(points[k][m], reps if n_boot else None, kind)
                lo, hi, failed = iv.ci_low, iv.ci_high, iv.n_failed
            except CollabCausalError:
                lo, hi, failed = None, None, int(np.isnan(reps).sum())
            out.append(CoverageRecord(dgp, n, k, m, kind, points[k][m].estimate, lo, hi, failed))
    return out


def run_coverage(
    dgps: Sequence[str] = DGPS,
    sizes: Sequence[int] = (500, 2000),
    n_rep: int = 400,
    *,
    n_boot: int = 200,
    intervals: Sequence[str] = INTERVALS,
    seed: int = 0,
    n_jobs: int = 1,
) -> list[dict[str, object]]:
    """Coverage table rows, one per (DGP, n, estimand, estimator, interval).

    Each row: ``coverage`` (share of replications whose interval holds the truth; an interval that
    could not be formed counts as not covering), ``mc_se`` (its binomial Monte Carlo SE),
    ``mean_width``, ``bias`` and ``sd`` (of the estimates), ``n_undefined`` (intervals not
    formed) and ``truth``.
    """
    jobs = [(dgp, n, r) for dgp in dgps for n in sizes for r in range(n_rep)]
    work = partial(_replicate_single_threaded, seed=seed, n_boot=n_boot, intervals=tuple(intervals))
    results = run_replicates(lambda i: work(*jobs[i]), len(jobs), n_jobs=n_jobs, desc="coverage replications")
    records = [rec for chunk in results for rec in chunk]
    rows = []
    for dgp in dgps:
        for n in sizes:
            for k in ESTIMANDS:
                for m in ESTIMATORS:
                    for kind in intervals:
                        sel = [
                            r
                            for r in records
                            if (r.dgp, r.n, r.estimand, r.estimator, r.interval) == (dgp, n, k, m, kind)
                        ]
                        rows.append(_summary(sel, truth(dgp, k)))
    return rows


def _replicate_single_threaded(dgp: str, n: int, r: int, **kwargs: object) -> list[CoverageRecord]:
    with threadpool_limits(limits=1):  # small problems: multithreaded BLAS only adds overhead
        return replicate(dgp, n, r, **kwargs)  # type: ignore[arg-type]


def _summary(records: list[CoverageRecord], target: float) -> dict[str, object]:
    first = records[0]
    est = np.array([r.estimate for r in records])
    formed = [r for r in records if r.ci_low is not None and r.ci_high is not None]
    covered = sum(r.ci_low <= target <= r.ci_high for r in formed)  # type: ignore[operator]
    share = covered / len(records)
    return {
        "dgp": first.dgp,
        "n": first.n,
        "estimand": first.estimand,
        "estimator": first.estimator,
        "interval": first.interval,
        "coverage": share,
        "mc_se": float(np.sqrt(share * (1.0 - share) / len(records))),
        "mean_width": float(np.mean([r.ci_high - r.ci_low for r in formed])) if formed else None,  # type: ignore[operator]
        "bias": float(est.mean() - target),
        "sd": float(est.std(ddof=1)),
        "n_rep": len(records),
        "n_undefined": len(records) - len(formed),
        "truth": target,
    }


def format_coverage(rows: Sequence[dict[str, object]]) -> str:
    """A Markdown table: one line per (DGP, n, estimand, estimator), one coverage column per interval."""
    kinds = list(dict.fromkeys(str(r["interval"]) for r in rows))
    lines = [
        "| DGP | n | estimand | estimator | bias | sd | "
        + " | ".join(f"{k} cover (width)" for k in kinds)
        + " |",
        "|---|---|---|---|---|---|" + "---|" * len(kinds),
    ]
    groups: dict[tuple, list[dict[str, object]]] = {}
    for r in rows:
        groups.setdefault((r["dgp"], r["n"], r["estimand"], r["estimator"]), []).append(r)
    for (dgp, n, k, m), group in groups.items():
        cells = []
        for kind in kinds:
            row = next(g for g in group if g["interval"] == kind)
            width = "-" if row["mean_width"] is None else f"{row['mean_width']:.3f}"
            undefined = f", {row['n_undefined']} undefined" if row["n_undefined"] else ""
            cells.append(f"{100 * float(row['coverage']):.1f}% ({width}{undefined})")
        head = group[0]
        lines.append(
            f"| {dgp} | {n} | {str(k).upper()} | {str(m).upper()} | {float(head['bias']):+.3f} | "
            f"{float(head['sd']):.3f} | " + " | ".join(cells) + " |"
        )
    return "\n".join(lines)
