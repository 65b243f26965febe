"""Sensitivities of the ANM dependence scores (paper 002, sections 4 and 5).

Neighbouring datasets differ by substituting one subject, with the test size ``m`` and the training
size ``n`` fixed (the setting of the paper's proofs); see docs/causal-discovery.md.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

from collabcausal.errors import InputError
from collabcausal.estimators.discovery.krr import residual_bound

LAPLACE_SCORES: tuple[str, ...] = ("spearman", "kendall", "hsic")


def score_sensitivity(score: str, m: int) -> float:
    """Global sensitivity of a score to one substituted test row.

    Spearman ``30/m`` and Kendall ``4/m`` (paper 002, Theorem 1); HSIC with kernels bounded by 1
    ``(12m - 11)/(m - 1)^2`` (paper 002, section 4.2, the sharpened form of Theorem 3).
    """
    if score == "spearman":
        return 30.0 / m
    if score == "kendall":
        return 4.0 / m
    if score == "hsic":
        return (12.0 * m - 11.0) / (m - 1.0) ** 2
    raise InputError(f"score {score!r} has no test-set global sensitivity", f"use one of {list(LAPLACE_SCORES)}")


def gaussian_lipschitz(width: float) -> float:
    """Lipschitz constant of ``r -> exp(-(r - c)^2 / (2 h^2))``: ``1 / (h sqrt(e))``, for a width ``h > 0``.

    A negative width gives the kernel of ``|h|`` but a negative constant, which would make the
    training-set sensitivity negative and drop it from ``max(test, train)``: refused.
    """
    if not (math.isfinite(width) and width > 0.0):
        raise InputError(f"the residual kernel width must be finite and > 0, got {width!r}", "pass e.g. 0.1")
    return 1.0 / (width * math.sqrt(math.e))


def hsic_train_sensitivity(m: int, n_train: int, regularization: float, residual_width: float) -> float:
    """HSIC sensitivity to one substituted training row: ``R 32 L_l sqrt(m) / n``, ``R = 8 / lam^{3/2}``.

    Paper 002, Theorem 7, with ``L_l`` the Lipschitz constant of the Gaussian residual kernel.
    """
    return residual_bound(n_train, regularization) * 32.0 * gaussian_lipschitz(residual_width) * math.sqrt(m)


def rank_stability_distance(residuals: NDArray[np.float64], n_train: int, regularization: float) -> int:
    """Lower bound on the number of training rows to change before a residual rank can change.

    Each changed training row moves every test residual by at most ``b = 8/(n lam^{3/2})``
    (Theorem 5), so after ``k`` changes two residuals ``gamma`` apart cannot swap while
    ``2 k b < gamma``: the bound is the largest such ``k`` (paper 002, section 5.1, the strict form
    of ``floor(n gamma lam^{3/2} / 16)``). It moves by at most 1 when one training row changes,
    because ``gamma`` moves by at most ``2 b``.
    """
    gaps = np.diff(np.sort(residuals))
    gamma = float(gaps.min()) if gaps.size else math.inf
    step = 2.0 * residual_bound(n_train, regularization)
    if not math.isfinite(gamma):
        raise InputError("at least two test residuals are needed", "use a larger test set")
    return max(0, math.ceil(gamma / step) - 1)
