"""How well a reconstruction recovers private columns, beside what an attacker knows without the data.

Per column: |correlation| with its best-assigned reconstructed column (Hungarian assignment, the
usual convention for methods that recover columns up to order), RMSE relative to the public range
width (beside two constant guesses: the range midpoint and the column's mean), the share of rows
within 1% of the range and, for binary columns, the accuracy beside the majority rate.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy.optimize import brentq, linear_sum_assignment
from scipy.stats import t as student_t

from collabcausal.errors import InputError


@dataclass(frozen=True)
class ReconstructionError:
    """Per-column scores of a reconstruction (columns in the truth's order).

    Attributes
    ----------
    correlation : ndarray
        |correlation| of each true column with its best-assigned reconstructed column (Hungarian).
    relative_rmse : ndarray
        RMSE of the reconstructed column divided by the column's public range width.
    baseline_rmse : ndarray
        The same for the public midpoint of each range (what an attacker knows without the data).
    within_one_percent : ndarray
        Share of rows reconstructed within 1% of the range width.
    mean_baseline_rmse : ndarray
        The same for the column's mean (what a published mean gives: the best constant guess).
    binary_accuracy : ndarray
        Binary columns (values only the range ends): share of rows whose guess is nearer the true
        end; NaN for other columns.
    majority_rate : ndarray
        Binary columns: the accuracy of guessing the majority value for every row; NaN otherwise.
    """

    correlation: NDArray[np.float64]
    relative_rmse: NDArray[np.float64]
    baseline_rmse: NDArray[np.float64]
    within_one_percent: NDArray[np.float64]
    mean_baseline_rmse: NDArray[np.float64]
    binary_accuracy: NDArray[np.float64]
    majority_rate: NDArray[np.float64]


@dataclass(frozen=True, eq=False)
class AttackResult:
    """An attack's reconstruction (n x m, the party's column order) and, when the truth was given, its error."""

    reconstruction: NDArray[np.float64]
    error: ReconstructionError | None


def attack_result(
    reconstruction: NDArray[np.float64],
    truth: NDArray[np.float64] | None,
    ranges: Sequence[Sequence[float]] | Mapping,
) -> AttackResult:
    """Bundle a reconstruction with its score (the truth is used for scoring only)."""
    error = None if truth is None else reconstruction_error(truth, reconstruction, ranges)
    return AttackResult(reconstruction, error)


def reconstruction_error(
    truth: NDArray[np.float64], guess: NDArray[np.float64], ranges: Sequence[Sequence[float]] | Mapping
) -> ReconstructionError:
    """Score ``guess`` against ``truth`` (both n x m, columns in the same order) with public ``ranges``.

    The correlation is order-free (each true column against its Hungarian-assigned guess column:
    what the representation leaks whether or not the attacker names the columns right); the
    other scores take the guess's columns as the attacker placed them (its claim about each
    column, in the column's own units).
    """
    bounds = np.asarray(list(ranges.values()) if isinstance(ranges, Mapping) else ranges, dtype=np.float64)
    if guess.shape != truth.shape or bounds.shape != (truth.shape[1], 2):
        raise InputError(
            f"guess {guess.shape}, truth {truth.shape} and {bounds.shape[0]} ranges do not match",
            "reconstruct every column of the truth, in its order, with one (low, high) range each",
        )
    width = bounds[:, 1] - bounds[:, 0]
    corr = np.nan_to_num(np.abs(_cross_correlation(truth, guess)))
    rows, cols = linear_sum_assignment(-corr)
    err = guess - truth
    mid = bounds.mean(axis=1)
    binary = np.all((truth == bounds[:, 0]) | (truth == bounds[:, 1]), axis=0)
    high_rate = np.mean(truth == bounds[:, 1], axis=0)
    return ReconstructionError(
        correlation=corr[rows, cols],
        relative_rmse=np.sqrt(np.mean(err**2, axis=0)) / width,
        baseline_rmse=np.sqrt(np.mean((truth - mid) ** 2, axis=0)) / width,
        within_one_percent=np.mean(np.abs(err) <= 0.01 * width, axis=0),
        mean_baseline_rmse=truth.std(axis=0) / width,
        binary_accuracy=np.where(binary, np.mean((guess > mid) == (truth == bounds[:, 1]), axis=0), np.nan),
        majority_rate=np.where(binary, np.maximum(high_rate, 1.0 - high_rate), np.nan),
    )


def null_correlation(n_rows: int, n_pairs: int, rate: float = 1e-4) -> float:
    """|correlation| that guesses independent of the truth exceed with probability below ``rate``.

    For a guess column of i.i.d. Gaussian values independent of a true column (a random
    projection), ``r sqrt(n - 2) / sqrt(1 - r^2)`` follows Student's t with n - 2 degrees of
    freedom whatever the true column; a union bound over the ``n_pairs`` (true, guess) pairs the
    Hungarian assignment can choose from gives the threshold. A score above it is a leak, not luck.
    """
    dof = int(n_rows) - 2

    def excess(r: float) -> float:
        return n_pairs * 2.0 * student_t.sf(r * np.sqrt(dof) / np.sqrt(1.0 - r * r), dof) - rate

    return float(brentq(excess, 1e-9, 1.0 - 1e-12))


def _cross_correlation(a: NDArray[np.float64], b: NDArray[np.float64]) -> NDArray[np.float64]:
    az = (a - a.mean(0)) / np.where(a.std(0) > 0, a.std(0), 1.0)
    bz = (b - b.mean(0)) / np.where(b.std(0) > 0, b.std(0), 1.0)
    return az.T @ bz / a.shape[0]
