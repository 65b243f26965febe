"""How likely a private decision equals the non-private one, given the margin (paper 002).

``margin`` is ``s_{Y->X} - s_{X->Y}`` of the exact scores; its sign is the non-private decision.
The closed forms take the *exact* margin. A release only knows the *noisy* one, and plugging that
in is biased upwards: when the exact margin is 0 (true agreement 1/2) the plug-in averages 3/4.
:func:`agreement_lower_bound` turns the noisy margin into a lower confidence bound instead.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.optimize import brentq

AGREEMENT_CONFIDENCE = 0.95


def laplace_agreement(margin: ArrayLike, sigma: float) -> NDArray[np.float64]:
    """``1 - (|gamma| + 2 sigma)/(4 sigma) exp(-|gamma|/sigma)`` (paper 002, Theorem 2).

    Both scores carry independent ``Lap(sigma)`` noise; the formula is the probability that the
    noisy difference keeps the sign of ``gamma``.
    """
    g = np.abs(np.asarray(margin, dtype=np.float64))
    return 1.0 - (g + 2.0 * sigma) / (4.0 * sigma) * np.exp(-g / sigma)


def margin_agreement(margin: ArrayLike, sigma: float) -> NDArray[np.float64]:
    """``1 - exp(-|gamma|/sigma) / 2``: the margin itself carries one ``Lap(sigma)`` (the margin-only release).

    The probability that ``gamma + Lap(sigma)`` keeps the sign of ``gamma``
    (docs/causal-discovery.md, "A margin-only release").
    """
    g = np.abs(np.asarray(margin, dtype=np.float64))
    return 1.0 - 0.5 * np.exp(-g / sigma)


def iqr_agreement(margin: ArrayLike, sigma: float) -> NDArray[np.float64]:
    """``1 - exp(-|gamma|/sigma) (48 s^3 + 33 s^2 g + 9 s g^2 + g^3) / (96 s^3)`` (paper 002, Theorem 4.2).

    Four log-IQRs carry independent ``Lap(sigma)`` noise. The text copy printed ``exp(-sigma/gamma)``
    and ``gamma = Q_y + Q_rX - Q_x + Q_rY``; the reconstruction here (``exp(-gamma/sigma)``,
    ``gamma = (Q_y + Q_rX) - (Q_x + Q_rY)``) is the tail of a sum of four Laplace variables, checked
    by simulation in the tests.
    """
    g = np.abs(np.asarray(margin, dtype=np.float64))
    s = float(sigma)
    poly = 48.0 * s**3 + 33.0 * s**2 * g + 9.0 * s * g**2 + g**3
    return 1.0 - np.exp(-g / s) * poly / (96.0 * s**3)


def pass_probability(statistic: ArrayLike, threshold: ArrayLike, epsilon: ArrayLike) -> NDArray[np.float64]:
    """``P(statistic + Lap(1/epsilon) > threshold)``: the chance a propose-test-release test passes."""
    gap = (np.asarray(statistic, dtype=np.float64) - np.asarray(threshold)) * np.asarray(epsilon)
    return np.where(gap >= 0.0, 1.0 - 0.5 * np.exp(-np.abs(gap)), 0.5 * np.exp(-np.abs(gap)))


def agreement_lower_bound(
    released_margin: float,
    sigma: float,
    agreement: Callable[[ArrayLike, float], NDArray[np.float64]] = laplace_agreement,
    confidence: float = AGREEMENT_CONFIDENCE,
) -> float:
    """A ``confidence`` lower bound on the agreement probability, from the *released* margin.

    Both closed forms have the shape ``A(g) = 1 - P(|D| > |g|) / 2`` with ``D`` the symmetric
    noise on the margin, so ``P(|D| > q) = alpha`` for ``q = A^{-1}(1 - alpha / 2)``. Since
    ``|g| >= |g_hat| - |D|``, with probability at least ``1 - alpha`` over the noise
    ``|g| >= max(0, |g_hat| - q)``, and ``A`` increasing in ``|g|`` gives
    ``A(g) >= A(max(0, |g_hat| - q))``. The bound is 1/2 whenever the noise could explain the
    whole released margin. It is a function of the release only (post-processing: no privacy cost).
    """
    alpha = 1.0 - float(confidence)
    target = 1.0 - alpha / 2.0
    upper = sigma
    while float(agreement(upper, sigma)) < target:
        upper *= 2.0
    q = brentq(lambda t: float(agreement(t, sigma)) - target, 0.0, upper, xtol=1e-12 * sigma)
    return float(agreement(max(0.0, abs(float(released_margin)) - q), sigma))
