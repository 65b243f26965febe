"""How well a reconstruction recovers private columns, beside the public-midpoint baseline."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy.optimize import linear_sum_assignment


@dataclass(frozen=True)
class ReconstructionError:
    """Per-column scores of a reconstruction (columns in the truth's order).

    Attributes
    ----------
    correlation : ndarray
        |correlation| of each true column with its best-assigned reconstructed column (Hungarian).
    relative_rmse : ndarray
        RMSE of the assigned column divided by the column's public range width.
    baseline_rmse : ndarray
        The same for the public midpoint of each range (what an attacker knows without the data).
    within_one_percent : ndarray
        Share of rows reconstructed within 1% of the range width.
    """

    correlation: NDArray[np.float64]
    relative_rmse: NDArray[np.float64]
    baseline_rmse: NDArray[np.float64]
    within_one_percent: NDArray[np.float64]


def reconstruction_error(
    truth: NDArray[np.float64], guess: NDArray[np.float64], ranges: Sequence[Sequence[float]] | Mapping
) -> ReconstructionError:
    """Score ``guess`` (n x k) against ``truth`` (n x m) with public ``ranges`` (one (lo, hi) per true column)."""
    bounds = np.asarray(list(ranges.values()) if isinstance(ranges, Mapping) else ranges, dtype=np.float64)
    width = bounds[:, 1] - bounds[:, 0]
    corr = np.nan_to_num(np.abs(_cross_correlation(truth, guess)))
    rows, cols = linear_sum_assignment(-corr)
    assigned = np.zeros(truth.shape[1], dtype=np.intp)
    assigned[rows] = cols
    matched = guess[:, assigned]
    err = matched - truth
    mid = bounds.mean(axis=1)
    return ReconstructionError(
        correlation=corr[np.arange(truth.shape[1]), assigned],
        relative_rmse=np.sqrt(np.mean(err**2, axis=0)) / width,
        baseline_rmse=np.sqrt(np.mean((truth - mid) ** 2, axis=0)) / width,
        within_one_percent=np.mean(np.abs(err) <= 0.01 * width, axis=0),
    )


def _cross_correlation(a: NDArray[np.float64], b: NDArray[np.float64]) -> NDArray[np.float64]:
    az = (a - a.mean(0)) / np.where(a.std(0) > 0, a.std(0), 1.0)
    bz = (b - b.mean(0)) / np.where(b.std(0) > 0, b.std(0), 1.0)
    return az.T @ bz / a.shape[0]
