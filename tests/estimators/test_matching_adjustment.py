"""PSM's Abadie-Imbens (2016) correction against its definition, written out per subject.

The reference forms every subject's neighbourhood (the whole runs of tied scores nearest to it,
at least L = 2 subjects of the arm) and its sample covariance of (x, Y) by brute force, then the
sums ``c`` and ``d`` of Abadie & Imbens (2016), Theorems 1 and 2; it shares no code with
:mod:`collabcausal.estimators.matching`.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import expit

from collabcausal.estimators import LogisticPropensity
from collabcausal.estimators.matching import psm


def _neighbourhood(pool_scores: np.ndarray, score: float, size: int = 2) -> np.ndarray:
    """Pool positions within the smallest distance that reaches ``size`` subjects (ties whole)."""
    d = np.abs(pool_scores - score)
    for radius in np.unique(d):
        inside = np.flatnonzero(d <= radius)
        if inside.size >= size:
            return inside
    return np.arange(pool_scores.size)


def _reference_adjustment(X: np.ndarray, t: np.ndarray, y: np.ndarray, e: np.ndarray, estimand: str) -> float:
    n = t.size
    D = np.column_stack([np.ones(n), (X - X.mean(axis=0)) / X.std(axis=0)])  # [1, X], standardized
    f = e * (1.0 - e)
    cov = {}
    for w in (0, 1):
        arm = np.flatnonzero(t == w)
        rows = []
        for k in range(n):
            near = arm[_neighbourhood(e[arm], e[k])]
            dx, dy = D[near] - D[near].mean(axis=0), y[near] - y[near].mean()
            rows.append(dx.T @ dy / (near.size - 1))
        cov[w] = np.array(rows)
    info_inv = np.linalg.inv(D.T @ (D * f[:, None]))  # the whole-sample information's inverse
    if estimand == "ate":
        c = f @ (cov[1] / e[:, None] + cov[0] / (1.0 - e)[:, None]) / n
        return float(c @ info_inv @ c)
    n1 = int(t.sum())
    c = f @ (cov[1] + (e / (1.0 - e))[:, None] * cov[0]) / n1
    effect = np.empty(n)
    for k in range(n):
        other = np.flatnonzero(t != t[k])
        d = np.abs(e[other] - e[k])
        matched = y[other][d == d.min()].mean()
        effect[k] = y[k] - matched if t[k] == 1 else matched - y[k]
    att = effect[t == 1].mean()
    d = (f * (effect - att)) @ D / n1
    return float(c @ info_inv @ c - d @ info_inv @ d)


@pytest.mark.parametrize("estimand", ["ate", "att"])
@pytest.mark.parametrize("decimals", [None, 1])
def test_estimated_propensity_correction_equals_its_per_subject_definition(estimand, decimals):
    rng = np.random.default_rng(21)
    X = rng.uniform(-0.5, 0.5, size=(240, 2))
    if decimals is not None:
        X = np.round(X, decimals)  # coarse covariates: many runs of tied propensities
    t = (rng.random(240) < expit(X[:, 0] + 2.0 * X[:, 1])).astype(np.int8)
    y = np.where(t == 1, 5.0 + 5.0 * X[:, 0] + X[:, 1], 3.0 * X[:, 0] - 3.0 * X[:, 1]) + rng.normal(size=240)
    e = LogisticPropensity().fit(X, t).predict_propensity(X)
    known = psm(y, t, e, estimand).se
    corrected = psm(y, t, e, estimand, X_propensity=X).se
    assert known**2 - corrected**2 == pytest.approx(_reference_adjustment(X, t, y, e, estimand), rel=1e-9)
