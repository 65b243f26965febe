"""How likely a private decision equals the non-private one, given the margin (paper 002).

``margin`` is ``s_{Y->X} - s_{X->Y}`` of the exact scores; its sign is the non-private decision.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray


def laplace_agreement(margin: ArrayLike, sigma: float) -> NDArray[np.float64]:
    """``1 - (|gamma| + 2 sigma)/(4 sigma) exp(-|gamma|/sigma)`` (paper 002, Theorem 2).

    Both scores carry independent ``Lap(sigma)`` noise; the formula is the probability that the
    noisy difference keeps the sign of ``gamma``.
    """
    g = np.abs(np.asarray(margin, dtype=np.float64))
    return 1.0 - (g + 2.0 * sigma) / (4.0 * sigma) * np.exp(-g / sigma)


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
