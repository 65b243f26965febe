"""eps-ADUM's average effect (ATE or ATT) from the released counts and sums, with its delta-method interval.

The average is the cell uplifts ``u_k`` of :class:`~collabcausal.estimators.dp.adum.EpsADUM`
(paper 001, Algorithm 1, lines 7-9) weighted by each cell's noisy count (ATE: both arms; ATT: the
treated arm), post-processing of the release. Its variance, by the delta method on that very
function of the released counts ``C_kt`` and sums ``S_kt`` (:func:`adum_average`), adds

* the DP noise: every entry of every party's release carries independent noise
  (:mod:`.aggregates`: discrete Laplace on the counts, Laplace on the sums, each at eps/2), of
  variance :func:`release_noise_variances` per party, so ``n_releases`` times that in the sum;
* the sampling of the outcomes: given the cells' counts, ``Var(S_kt) = C_kt sigma_kt^2``, with the
  outcome variance bounded by its declared range, ``sigma_kt^2 <= (hi - lo)^2 / 4`` (Popoviciu):
  the release holds no sums of squares, so the interval is conservative in this part.

It is an interval for the cell-adjusted effect ``sum_k w_k (mu_k1 - mu_k0) / sum_k w_k`` (``mu_kt``
the cell-arm means): the causal effect only when treatment is as good as random within every cell.
:func:`unadjusted_difference` (one cell: the difference of the arm means) is what the partition
adjusts from.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy.stats import norm

from collabcausal.estimators.dp.adum import arm_means
from collabcausal.estimators.dp.aggregates import COUNT_SENSITIVITY, sum_sensitivity
from collabcausal.estimators.dp.mechanisms import laplace_scale

ESTIMANDS = ("ate", "att")


@dataclass(frozen=True)
class AdumEffect:
    """The weighted average of the cell uplifts and its normal interval, or why there is none.

    Attributes
    ----------
    estimate : float
        NaN when no cell has a positive noisy weight.
    se, ci_low, ci_high : float or None
        None with ``no_interval`` set.
    alpha : float
    no_interval : str or None
        Why no interval is given (the estimate is then a point only).
    """

    estimate: float
    se: float | None
    ci_low: float | None
    ci_high: float | None
    alpha: float
    no_interval: str | None


def adum_average(
    counts: NDArray[np.float64], sums: NDArray[np.float64], bounds: tuple[float, float], min_count: float,
    estimand: str,
) -> float:
    """``sum_k w_k u_k / sum_k w_k`` with ``w_k`` the noisy count (ATE: both arms, ATT: treated), clipped at 0.

    ``counts`` and ``sums`` are (p, 2) (control, treated); ``u_k`` from :func:`.adum.arm_means`.
    NaN when no weight is positive.
    """
    means = arm_means(counts, sums, bounds, min_count)
    weights = np.clip(counts[:, 1] if estimand == "att" else counts.sum(axis=1), 0.0, None)
    total = weights.sum()
    return float(weights @ (means[:, 1] - means[:, 0]) / total) if total > 0 else math.nan


def release_noise_variances(n_cells: int, epsilon: float, bounds: tuple[float, float]) -> tuple[float, float]:
    """Variance of the noise on one count and on one outcome sum of one party's by-arm release.

    The release (:func:`.aggregates.noisy_aggregates`) spends eps/2 on the counts, discrete Laplace
    of scale ``t = 2 / (eps/2)``, ``P(k) ∝ a^|k|`` with ``a = exp(-1/t)``, variance ``2a / (1 - a)^2``;
    and eps/2 on the sums, Laplace of scale ``b = sum_sensitivity / (eps/2)``, variance ``2 b^2``.
    """
    a = math.exp(-1.0 / laplace_scale(COUNT_SENSITIVITY, epsilon / 2.0))
    b = laplace_scale(sum_sensitivity([bounds], 2 * n_cells), epsilon / 2.0)
    return 2.0 * a / (1.0 - a) ** 2, 2.0 * b * b


def adum_effect(
    counts: NDArray[np.float64],
    sums: NDArray[np.float64],
    bounds: tuple[float, float],
    *,
    epsilon: float,
    n_releases: int,
    estimand: str,
    min_count: float,
    release_cells: int | None = None,
    alpha: float = 0.05,
) -> AdumEffect:
    """The average of :func:`adum_average` with its delta-method SE and ``1 - alpha`` normal interval.

    Parameters
    ----------
    counts, sums : ndarray of shape (p, 2)
        The summed noisy counts and outcome sums (control, treated).
    bounds : (lo, hi)
        The declared outcome range.
    epsilon : float
        The budget of each party's release (:func:`release_noise_variances`).
    n_releases : int
        Parties whose releases were added up (each adds its own noise).
    estimand : {"ate", "att"}
    min_count : float
        As :class:`~collabcausal.estimators.dp.adum.EpsADUM`'s.
    release_cells : int, optional
        Cells of the release when ``counts`` pools them (:func:`unadjusted_difference`); default p.
    alpha : float

    No interval when the estimate is undefined, or when a weighted cell's arm mean is clipped to the
    outcome range (the noise on its count dominates it, so the delta method does not apply there).
    """
    counts = np.asarray(counts, dtype=np.float64)
    sums = np.asarray(sums, dtype=np.float64)
    lo, hi = bounds
    cells = counts.shape[0] if release_cells is None else release_cells

    def f(c: NDArray[np.float64], s: NDArray[np.float64]) -> float:
        return adum_average(c, s, bounds, min_count, estimand)

    estimate = f(counts, sums)
    if not math.isfinite(estimate):
        return AdumEffect(estimate, None, None, None, alpha, "no cell has a positive noisy weight")
    weights = counts[:, 1] if estimand == "att" else counts.sum(axis=1)
    own = counts >= min_count
    raw = np.divide(sums, counts, out=np.zeros_like(sums), where=own)
    clipped = ((raw < lo) | (raw > hi)) & own & (weights[:, None] > 0)
    if clipped.any():
        return AdumEffect(estimate, None, None, None, alpha,
                          f"{int(clipped.any(axis=1).sum())} weighted cell(s) have an arm mean outside the outcome "
                          "range: noise dominates their counts (raise epsilon or use fewer cells)")
    grad_c, grad_s = _gradient(f, counts, sums)
    count_var, sum_var = release_noise_variances(cells, epsilon, bounds)
    pooled = n_releases * cells / counts.shape[0]  # noisy release entries added into each entry given
    noise = pooled * (count_var * (grad_c**2).sum() + sum_var * (grad_s**2).sum())
    sampling = (grad_s**2 * np.clip(counts, 0.0, None)).sum() * (hi - lo) ** 2 / 4.0
    se = math.sqrt(noise + sampling)
    z = float(norm.ppf(1.0 - alpha / 2.0))
    return AdumEffect(estimate, se, estimate - z * se, estimate + z * se, alpha, None)


def unadjusted_difference(
    counts: NDArray[np.float64], sums: NDArray[np.float64], bounds: tuple[float, float], *, epsilon: float,
    n_releases: int, min_count: float, alpha: float = 0.05,
) -> AdumEffect:
    """The difference of the arm means over all cells, from the same release, with its interval.

    The partition collapsed to one cell (:func:`adum_effect` of the summed counts and sums: ATE and
    ATT weights agree in one cell), each pooled entry carrying the noise of every cell's.
    """
    counts = np.asarray(counts, dtype=np.float64)
    sums = np.asarray(sums, dtype=np.float64)
    return adum_effect(
        counts.sum(axis=0, keepdims=True), sums.sum(axis=0, keepdims=True), bounds, epsilon=epsilon,
        n_releases=n_releases, estimand="ate", min_count=min_count, release_cells=counts.shape[0], alpha=alpha,
    )


def _gradient(
    f: Callable[[NDArray[np.float64], NDArray[np.float64]], float], counts: NDArray[np.float64],
    sums: NDArray[np.float64],
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Central differences of ``f`` in every count and sum (steps relative to each entry's size)."""
    grads = []
    for which in (0, 1):
        base = (counts, sums)[which]
        grad = np.zeros_like(base)
        for index in np.ndindex(base.shape):
            h = 1e-6 * max(1.0, abs(base[index]))
            up, down = base.copy(), base.copy()
            up[index] += h
            down[index] -= h
            args_up = (up, sums) if which == 0 else (counts, up)
            args_down = (down, sums) if which == 0 else (counts, down)
            grad[index] = (f(*args_up) - f(*args_down)) / (2.0 * h)
        grads.append(grad)
    return grads[0], grads[1]
