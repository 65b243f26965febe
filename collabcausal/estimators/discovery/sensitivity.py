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
    """Global sensitivity of a released score to one substituted test row.

    Spearman ``30/m`` and Kendall ``4/m`` (paper 002, Theorem 1). HSIC is released as the norm
    ``T = ||C||_HS = sqrt(trace(KHLH)) / m`` (:func:`~collabcausal.estimators.discovery.scores.hsic_norm`),
    whose sensitivity is ``4 (m - 1) / m^2`` for any kernels with ``k(u, u) = 1`` and values in
    ``[0, 1]`` (Gaussian kernels of any fixed width); proof in docs/causal-discovery.md ("A tighter
    HSIC bound"). Paper 002's bound ``(12m - 11)/(m - 1)^2`` on ``HSIC`` itself was 30-60 times what
    a search over neighbours finds.
    """
    if score == "spearman":
        return 30.0 / m
    if score == "kendall":
        return 4.0 / m
    if score == "hsic":
        return 4.0 * (m - 1.0) / (m * m)
    raise InputError(f"score {score!r} has no test-set global sensitivity", f"use one of {list(LAPLACE_SCORES)}")


def feature_lipschitz(width: float) -> float:
    """``1 / h``: ``||psi(r) - psi(r')|| <= |r - r'| / h`` for the Gaussian kernel's feature map, width ``h > 0``.

    ``||psi(r) - psi(r')||^2 = 2 - 2 exp(-d^2 / (2 h^2)) <= d^2 / h^2`` (``1 - e^{-t} <= t``). A
    negative width gives the kernel of ``|h|`` but a negative constant, which would make the
    training-set sensitivity negative and drop it from ``max(test, train)``: refused.
    """
    if not (math.isfinite(width) and width > 0.0):
        raise InputError(f"the residual kernel width must be finite and > 0, got {width!r}", "pass e.g. 0.1")
    return 1.0 / width


def hsic_train_sensitivity(n_train: int, regularization: float, residual_width: float) -> float:
    """Sensitivity of the released HSIC norm to one substituted training row: ``8 / (n lam^{3/2} h_r)``.

    The row moves every test residual by at most ``b = 8 / (n lam^{3/2})`` (paper 002, Theorem 5),
    hence every residual feature by at most ``b / h_r`` (:func:`feature_lipschitz`); since
    ``sum_i (phi_i - mu) = 0``, ``C = (1/m) sum_i (phi_i - mu) (x) psi_i`` moves by at most
    ``(b / h_r) (1/m) sum_i ||phi_i - mu|| <= b / h_r`` (Jensen, ``(1/m) sum ||phi_i - mu||^2 <= 1``).
    Independent of ``m``; replaces Theorem 7's ``32 L sqrt(m) b`` on HSIC itself.
    """
    return residual_bound(n_train, regularization) * feature_lipschitz(residual_width)


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
