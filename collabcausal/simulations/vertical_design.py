"""A synthetic study whose covariates two or more parties split (the vertical ``dp_effects`` benchmark design).

Issue 36's design: 20 confounders (16 Gaussian with correlation ``0.3^|i - j|``, 4 binary), a
logistic propensity with about 95% of it in [0.1, 0.9], and a binary (logistic) or continuous
(linear) outcome; the label holder holds the first half of the covariates, T and Y. The true ATE is
a population quantity from a fixed large sample of the same design (:func:`true_ate`).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
from numpy.typing import NDArray

from collabcausal.simulations.multisite import Outcome, Site

N_COVARIATES = 20
_BETA = 1.75 * np.array([0.3, -0.25, 0.2, 0.15, -0.15, 0.1, 0.0, 0.1, 0.2, -0.2,
                         0.25, -0.2, 0.15, 0.1, -0.1, 0.15, 0.2, -0.2, 0.1, 0.0])
_GAMMA = np.array([0.3, 0.25, -0.2, 0.2, 0.1, 0.0, 0.2, -0.15, 0.2, 0.1,
                   -0.25, 0.2, 0.15, -0.1, 0.2, 0.1, -0.2, 0.15, 0.0, 0.1])
_EFFECT = {"binary": 0.6, "continuous": 1.0}
COVARIATE_RANGE = (-3.5, 3.5)
OUTCOME_RANGE = {"binary": (0.0, 1.0), "continuous": (-6.0, 8.0)}


def covariate_bounds() -> list[tuple[float, float]]:
    """The public range of each covariate: 16 Gaussian, then 4 binary."""
    return [COVARIATE_RANGE] * 16 + [(0.0, 1.0)] * 4


def simulate_subjects(n: int, outcome: Outcome, rng: np.random.Generator) -> Site:
    """``n`` subjects of the design, as one :class:`~collabcausal.simulations.multisite.Site`."""
    cov = 0.3 ** np.abs(np.subtract.outer(np.arange(16), np.arange(16)))
    gauss = rng.standard_normal((n, 16)) @ np.linalg.cholesky(cov).T
    binary = (rng.standard_normal((n, 4)) + 0.3 * gauss[:, :4] > 0).astype(float)
    X = np.hstack([gauss, binary])
    e = 1.0 / (1.0 + np.exp(-(X @ _BETA - 0.2)))
    T = (rng.random(n) < e).astype(np.int8)
    mean_control, mean_treated = (_mean_outcome(X, arm, outcome) for arm in (0.0, 1.0))
    mean = np.where(T == 1, mean_treated, mean_control)
    Y = (rng.random(n) < mean).astype(float) if outcome == "binary" else mean + rng.standard_normal(n)
    return Site(X, T, Y, e, mean_control, mean_treated)


def _mean_outcome(X: NDArray[np.float64], arm: float, outcome: Outcome) -> NDArray[np.float64]:
    linear = X @ _GAMMA + _EFFECT[outcome] * arm
    if outcome == "binary":
        return 1.0 / (1.0 + np.exp(-(linear - 0.4)))
    return 1.0 + linear


@lru_cache(maxsize=4)
def true_ate(outcome: Outcome, n_draws: int = 400_000) -> float:
    """Population ATE of the design, from a fixed large sample."""
    site = simulate_subjects(n_draws, outcome, np.random.default_rng(20261128))
    return float(np.mean(site.mean_treated - site.mean_control))
