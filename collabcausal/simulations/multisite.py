"""A synthetic multi-site observational study with known effects (the ``dp_effects`` benchmark design).

Sites differ in their covariate distributions and in their treatment policies; outcomes follow
one model everywhere. Issue 21's design: 4 sites x 25,000 subjects, 10 confounders (8 Gaussian,
2 binary), about 95% of propensities in [0.1, 0.9], a binary outcome (logistic) or a continuous
one (linear, Gaussian noise). The true ATE and ATT are population quantities computed once from a
large sample of the same design (:func:`true_effects`), never from the sample analysed.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

import numpy as np
from numpy.typing import NDArray

from collabcausal.errors import InputError

Outcome = Literal["binary", "continuous"]
N_COVARIATES = 10
_BETA = np.array([0.55, -0.45, 0.4, 0.3, -0.3, 0.25, 0.0, 0.0, 0.35, -0.35])
_GAMMA = np.array([0.5, 0.4, -0.3, 0.3, 0.2, 0.0, 0.3, -0.25, 0.3, 0.2])
_SITE_POLICY = np.array([-0.45, -0.1, 0.15, 0.45])
_SITE_SHIFT = np.array([-0.3, -0.1, 0.1, 0.3])
_EFFECT = {"binary": 0.6, "continuous": 1.0}  # logit-scale and additive effects
_NOISE_SD = 1.0
COVARIATE_RANGE = (-3.5, 3.5)
"""Declared range of each Gaussian covariate (binary ones: [0, 1])."""
OUTCOME_RANGE = {"binary": (0.0, 1.0), "continuous": (-5.0, 7.0)}


@dataclass(frozen=True)
class Site:
    """One site's rows: covariates X (n x 10), treatment T, outcome Y, true propensity and outcome means.

    ``mean_control`` and ``mean_treated`` are E[Y | X, T = 0] and E[Y | X, T = 1] (NaN where unknown,
    as for real data).
    """

    X: NDArray[np.float64]
    T: NDArray[np.int8]
    Y: NDArray[np.float64]
    propensity: NDArray[np.float64]
    mean_control: NDArray[np.float64]
    mean_treated: NDArray[np.float64]


def covariate_bounds() -> list[tuple[float, float]]:
    """The public range of each covariate."""
    return [COVARIATE_RANGE] * 8 + [(0.0, 1.0)] * 2


def simulate_sites(
    n_per_site: int, outcome: Outcome, rng: np.random.Generator, n_sites: int = 4
) -> list[Site]:
    """``n_sites`` sites of ``n_per_site`` subjects each."""
    if outcome not in _EFFECT:
        raise InputError(f"unknown outcome kind {outcome!r}", "use 'binary' or 'continuous'")
    if not 1 <= n_sites <= len(_SITE_POLICY):
        raise InputError(f"n_sites {n_sites} is not in 1..{len(_SITE_POLICY)}", "use at most 4 sites")
    cov = 0.3 ** np.abs(np.subtract.outer(np.arange(8), np.arange(8)))
    chol = np.linalg.cholesky(cov)
    sites = []
    for s in range(n_sites):
        latent = rng.standard_normal((n_per_site, 10))
        gauss = latent[:, :8] @ chol.T + _SITE_SHIFT[s] * np.array([1, 1, 1, 1, 0, 0, 0, 0])
        binary = (latent[:, 8:] + _SITE_SHIFT[s] + 0.3 * gauss[:, :2] > 0).astype(float)
        X = np.hstack([gauss, binary])
        e = 1.0 / (1.0 + np.exp(-(_SITE_POLICY[s] + X @ _BETA - 0.35)))
        T = (rng.random(n_per_site) < e).astype(np.int8)
        mean_control, mean_treated = (_mean_outcome(X, np.full(n_per_site, arm), outcome) for arm in (0.0, 1.0))
        Y = _outcome(np.where(T == 1, mean_treated, mean_control), outcome, rng)
        sites.append(Site(X, T, Y, e, mean_control, mean_treated))
    return sites


def _outcome(mean: NDArray[np.float64], outcome: Outcome, rng: np.random.Generator) -> NDArray[np.float64]:
    if outcome == "binary":
        return (rng.random(len(mean)) < mean).astype(float)
    return mean + _NOISE_SD * rng.standard_normal(len(mean))


def _mean_outcome(X: NDArray[np.float64], T: NDArray[np.float64], outcome: Outcome) -> NDArray[np.float64]:
    linear = X @ _GAMMA + _EFFECT[outcome] * T
    if outcome == "binary":
        return 1.0 / (1.0 + np.exp(-(linear - 0.6)))
    return 1.0 + linear


@lru_cache(maxsize=8)
def true_effects(outcome: Outcome, n_sites: int = 4, n_draws: int = 400_000) -> dict[str, float]:
    """Population ATE and ATT of the design (equal site sizes), from a fixed large sample."""
    sites = simulate_sites(n_draws // n_sites, outcome, np.random.default_rng(20261125), n_sites)
    X = np.vstack([s.X for s in sites])
    e = np.concatenate([s.propensity for s in sites])
    gain = _mean_outcome(X, np.ones(len(X)), outcome) - _mean_outcome(X, np.zeros(len(X)), outcome)
    return {"ate": float(gain.mean()), "att": float((e * gain).sum() / e.sum())}
