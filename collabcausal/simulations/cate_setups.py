"""Synthetic CATE data: setups A-E of paper 000 (Table 1, d = 6) and datasets 1-2 of paper 004 (G.1).

Each generator returns a :class:`CATEData` with the true CATE and propensity, plus the public
bounds a DP learner must declare (feature and outcome ranges that follow from the generator, not
from the sample: a data holder would state them from domain knowledge).

Paper 000 recipe: X ~ P_X, T | X ~ Ber(e(X)), Y = b(X) + T tau(X) + N(0, 1).
Paper 004 recipe (Oprescu et al. 2019): X ~ U[0, 1]^p, A = 1{X^T beta >= eta},
Y = theta(X) A + X^T gamma + eps, eta, eps ~ U[-1, 1], beta and gamma supported on a few
coordinates with values from U[0, 0.3] and U[0, 1].
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy.special import expit

from collabcausal.errors import InputError
from collabcausal.randomness import SeedLike, as_generator

D = 6
SETUPS = ("A", "B", "C", "D", "E")
SIGMA_E_SEED = 20220201
SUPPORT_SIZE = 3
COEF_SEED = 20250101

# Declared public ranges: U(0,1) covariates are bounded; normal covariates are declared on
# [-4, 4] (clipped by the DP learners); outcome ranges cover b + T tau + noise up to ~ +-3.5 sd.
FEATURE_BOUNDS = {"A": (0.0, 1.0), "B": (-4.0, 4.0), "C": (-4.0, 4.0), "D": (-4.0, 4.0), "E": (-4.0, 4.0)}
OUTCOME_BOUNDS = {"A": (-3.0, 6.0), "B": (-5.0, 12.0), "C": (-4.0, 14.0), "D": (-4.0, 14.0), "E": (-30.0, 30.0)}


@dataclass(frozen=True, eq=False)
class CATEData:
    """A simulated sample with its ground truth and declared bounds."""

    X: NDArray[np.float64]
    T: NDArray[np.int8]
    Y: NDArray[np.float64]
    tau: NDArray[np.float64]
    propensity: NDArray[np.float64]
    feature_bounds: tuple[tuple[float, float], ...]
    outcome_bounds: tuple[float, float]
    name: str


def sigma_e(d: int = D) -> NDArray[np.float64]:
    """Setup E's covariance: a fixed random correlation matrix (paper 000 draws it "from a random
    data generator" without stating which; ours is W W^T rescaled to unit diagonal, W ~ U(-1, 1))."""
    W = np.random.default_rng(SIGMA_E_SEED).uniform(-1, 1, size=(d, d))
    S = W @ W.T
    s = np.sqrt(np.diag(S))
    return S / np.outer(s, s)


def _setup_functions(setup: str, X: NDArray[np.float64]):
    x = X.T
    if setup == "A":
        b = np.sin(np.pi * x[0] * x[1]) + 2 * (x[2] - 0.5) ** 2 + x[3] + 0.5 * x[4]
        e = np.clip(np.sin(np.pi * x[0] * x[1]), 0.1, 0.9)
        tau = (x[0] + x[1]) / 2
    elif setup == "B":
        b = np.maximum.reduce([x[0] + x[1], x[2], np.zeros_like(x[0])]) + np.maximum(x[3] + x[4], 0)
        e = np.full_like(x[0], 0.5)
        tau = x[0] + np.log1p(np.exp(x[1]))
    elif setup == "C":
        b = 2 * np.log1p(np.exp(x[0] + x[1] + x[2]))
        e = expit(-(x[1] + x[2]))
        tau = np.ones_like(x[0])
    elif setup == "D":
        b = np.maximum(x[0] + x[1] + x[2], 0) + np.maximum(x[3] + x[4], 0)
        e = 1 / (1 + np.exp(-x[0]) + np.exp(-x[1]))
        tau = np.maximum(x[0] + x[1] + x[2], 0) - np.maximum(x[3] + x[4], 0)
    else:
        b = sum((i + 1) * x[i] for i in range(6)) + x[0] * x[5] + ((x[2] > -0.5) & (x[2] < 0.5))
        e = expit(-(x[0] + x[5]))
        tau = expit(-x[0]) - x[1] + x[2:6].sum(axis=0)
    return b, e, tau


def setup_covariates(setup: str, n: int, rng: np.random.Generator) -> NDArray[np.float64]:
    """Draw X ~ P_X of the setup (paper 000, Table 1)."""
    if setup == "A":
        return rng.uniform(size=(n, D))
    if setup == "E":
        return rng.multivariate_normal(np.zeros(D), sigma_e(), size=n)
    return rng.standard_normal((n, D))


def paper000_setup(setup: str, n: int, seed: SeedLike = None) -> CATEData:
    """Setup A-E of paper 000, Table 1 (d = 6; A-D from Nie & Wager 2020, section 6)."""
    key = str(setup).upper()
    if key not in SETUPS:
        raise InputError(f"unknown setup {setup!r}", f"use one of {', '.join(SETUPS)}")
    rng = as_generator(seed)
    X = setup_covariates(key, int(n), rng)
    b, e, tau = _setup_functions(key, X)
    T = rng.binomial(1, e).astype(np.int8)
    Y = b + T * tau + rng.standard_normal(int(n))
    return CATEData(X, T, Y, tau, e, (FEATURE_BOUNDS[key],) * D, OUTCOME_BOUNDS[key], f"setup {key}")


def setup_tau(setup: str, X: NDArray[np.float64]) -> NDArray[np.float64]:
    """The true tau(x) of a paper-000 setup at given covariates."""
    return _setup_functions(str(setup).upper(), np.asarray(X, float))[2]


def _paper004_coefficients(p: int) -> tuple[NDArray, NDArray]:
    rng = np.random.default_rng(COEF_SEED + p)
    support = rng.choice(p, size=min(SUPPORT_SIZE, p), replace=False)
    beta, gamma = np.zeros(p), np.zeros(p)
    beta[support] = rng.uniform(0, 0.3, size=support.size)
    gamma[support] = rng.uniform(0, 1, size=support.size)
    return beta, gamma


def paper004_theta(dataset: int, X: NDArray[np.float64]) -> NDArray[np.float64]:
    """theta(x) of paper 004, eqs. (73)-(74)."""
    second = X[:, 0] if dataset == 1 else X[:, 1]
    return np.exp(2 * X[:, 0]) + 3 * np.sin(4 * second)


def paper004_dataset(dataset: int, n: int = 3000, seed: SeedLike = None) -> CATEData:
    """Dataset 1 (p = 2) or 2 (p = 30) of paper 004, supplement G.1 (eqs. 70-74).

    The support of beta and gamma (``SUPPORT_SIZE`` coordinates, fixed per p) is our choice: the
    paper does not state it; three coordinates keep P(A = 1 | x) = (x^T beta + 1)/2 in [0.5, 0.95].
    """
    if dataset not in (1, 2):
        raise InputError(f"unknown paper-004 dataset {dataset!r}", "use 1 or 2")
    p = 2 if dataset == 1 else 30
    rng = as_generator(seed)
    X = rng.uniform(size=(int(n), p))
    beta, gamma = _paper004_coefficients(p)
    score = X @ beta
    A = (score >= rng.uniform(-1, 1, size=int(n))).astype(np.int8)
    theta = paper004_theta(dataset, X)
    Y = theta * A + X @ gamma + rng.uniform(-1, 1, size=int(n))
    y_hi = np.exp(2) + 3 + gamma.sum() + 1
    return CATEData(
        X,
        A,
        Y,
        theta,
        np.clip((score + 1) / 2, 0, 1),
        ((0.0, 1.0),) * p,
        (-3.0, float(np.ceil(y_hi))),
        f"dataset {dataset}",
    )
