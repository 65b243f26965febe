"""Dependence scores between an input and a residual (paper 002, section 3.3).

Every score is small for independent samples and grows with dependence. The ANM picks the
direction whose residuals have the smaller score (paper 002, Algorithm 1). Inputs are 1-D float
arrays of equal length ``m`` (checked by the caller).
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray
from scipy.stats import kendalltau

from collabcausal.estimators.discovery.krr import gaussian_kernel

HSIC_BLOCK = 256


def ordinal_ranks(values: NDArray[np.float64]) -> NDArray[np.float64]:
    """Ranks 1..m, ties broken by position (a total order, so Theorem 1's proof applies)."""
    ranks = np.empty(values.size, dtype=np.float64)
    ranks[np.argsort(values, kind="stable")] = np.arange(1, values.size + 1)
    return ranks


def spearman_score(a: NDArray[np.float64], b: NDArray[np.float64]) -> float:
    """``|1 - 6 sum_i d_i^2 / (m (m^2 - 1))|`` with ``d_i`` the rank differences (paper 002, sec. 3.3)."""
    m = a.size
    d = ordinal_ranks(a) - ordinal_ranks(b)
    return abs(1.0 - 6.0 * float(d @ d) / (m * (m * m - 1.0)))


def kendall_score(a: NDArray[np.float64], b: NDArray[np.float64]) -> float:
    """``|C - D| / (m (m - 1) / 2)``: Kendall's tau-a (paper 002, sec. 3.3); tied pairs count in neither.

    Computed in ``O(m log m)`` from scipy's tau-b: ``C - D = tau_b sqrt((n0 - n1)(n0 - n2))`` with
    ``n0`` all pairs and ``n1``, ``n2`` the pairs tied in ``a``, in ``b``.
    """
    m = a.size
    n0 = m * (m - 1) / 2.0
    n1, n2 = (_tied_pairs(v) for v in (a, b))
    if n1 == n0 or n2 == n0:
        return 0.0
    tau_b = kendalltau(a, b, variant="b").statistic
    concordance = round(float(tau_b) * math.sqrt((n0 - n1) * (n0 - n2)))
    return abs(concordance) / n0


def _tied_pairs(values: NDArray[np.float64]) -> float:
    counts = np.unique(values, return_counts=True)[1].astype(np.float64)
    return float((counts * (counts - 1.0)).sum() / 2.0)


def hsic_score(
    a: NDArray[np.float64], b: NDArray[np.float64], *, width_a: float, width_b: float, block: int = HSIC_BLOCK
) -> float:
    """``trace(K H L H) / (m - 1)^2`` with Gaussian kernels (bounded by 1); paper 002, eq. 4.

    Uses ``trace(KHLH) = sum_ij K_ij L_ij - (2/m) sum_i k_i l_i + (sum_i k_i)(sum_i l_i) / m^2``
    with row sums ``k_i``, ``l_i``, accumulated over row blocks so memory stays ``O(block * m)``.
    """
    m = a.size
    cross = 0.0
    k_rows = np.empty(m)
    l_rows = np.empty(m)
    for start in range(0, m, block):
        stop = min(start + block, m)
        k_block = gaussian_kernel(a[start:stop], a, width_a)
        l_block = gaussian_kernel(b[start:stop], b, width_b)
        cross += float(np.einsum("ij,ij->", k_block, l_block))
        k_rows[start:stop] = k_block.sum(axis=1)
        l_rows[start:stop] = l_block.sum(axis=1)
    trace = cross - 2.0 / m * float(k_rows @ l_rows) + float(k_rows.sum()) * float(l_rows.sum()) / (m * m)
    return trace / (m - 1.0) ** 2


def quartile_indices(m: int) -> tuple[int, int]:
    """0-based positions of the first and third quartile order statistics: ``ceil(m/4)``, ``ceil(3m/4)``."""
    return math.ceil(m / 4) - 1, math.ceil(3 * m / 4) - 1


def iqr(values: NDArray[np.float64]) -> float:
    """Interquartile range as a difference of order statistics (the form Dwork & Lei's test uses)."""
    lo, hi = quartile_indices(values.size)
    ordered = np.sort(values)
    return float(ordered[hi] - ordered[lo])


def iqr_score(a: NDArray[np.float64], b: NDArray[np.float64]) -> float:
    """``log IQR(a) + log IQR(b)`` (paper 002, eq. 2); ``-inf`` if an IQR is 0."""
    with np.errstate(divide="ignore"):
        return float(np.log(iqr(a)) + np.log(iqr(b)))


def variance_score(a: NDArray[np.float64], b: NDArray[np.float64]) -> float:
    """``log Var(a) + log Var(b)`` (Bühlmann et al.; paper 002, sec. 3.3). Non-private only."""
    with np.errstate(divide="ignore"):
        return float(np.log(np.var(a)) + np.log(np.var(b)))
