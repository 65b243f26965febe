"""DP COUNT and SUM per cell of a partition (x treatment arm): the queries behind eps-ADUM.

Paper 001, Algorithm 1, lines 5-6: each subject falls in exactly one (cell, arm), so the whole
histogram costs what one cell costs (parallel composition, McSherry 2010). With sums requested,
half the budget goes to the counts and half to the sums, as in the paper; without, all of it goes
to the counts.

Calibrated for the project's one neighbouring relation, substitution of one record with n public
(docs/differential-privacy.md). Substituting a record can move it from one (cell, arm) to another:

* counts: discrete Laplace, L1 sensitivity :data:`COUNT_SENSITIVITY` = 2 (one count -1, another
  +1), scale 2/eps_count; the paper's ``COUNT + Lap(2/eps)`` is the add/remove calibration
  (sensitivity 1 at eps/2), which audits at twice its epsilon under substitution;
* sums: Laplace on the sums of values clipped to their declared bounds, L1 sensitivity
  :func:`sum_sensitivity`: ``sum_j (hi_j - lo_j)`` when there is one cell (the record stays in it),
  ``2 sum_j max(|lo_j|, |hi_j|)`` otherwise (it leaves one cell and enters another).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from collabcausal.errors import InputError
from collabcausal.estimators.dp.mechanisms import clip, discrete_laplace, laplace
from collabcausal.estimators.validation import check_bounds, check_epsilon, check_matrix

COUNT_SENSITIVITY = 2
"""L1 sensitivity of a histogram of counts under substitution: one count down, another up."""
OUTCOME = "@outcome"
"""Reserved column name of the outcome in DP query specs (covariates are named by the table)."""


@dataclass(frozen=True)
class NoisyAggregates:
    """Noisy counts and sums of a partition, possibly split by arm.

    Attributes
    ----------
    counts : ndarray of shape (n_cells, n_arms)
        Integer noisy counts (may be zero or negative).
    sums : ndarray of shape (n_cells, n_arms, n_columns)
        Noisy sums of each clipped column.
    n_clipped : tuple of int
        Entries moved by clipping, per column. Computed from private data: kept by the data
        holder (ledger annotation), never released.
    """

    counts: NDArray[np.float64]
    sums: NDArray[np.float64]
    n_clipped: tuple[int, ...] = ()

    def __add__(self, other: NoisyAggregates) -> NoisyAggregates:
        """Sum two parties' answers (horizontal split: each answers on its own rows)."""
        if self.counts.shape != other.counts.shape or self.sums.shape != other.sums.shape:
            raise InputError(
                f"cannot add aggregates of shapes {self.counts.shape}/{self.sums.shape} and "
                f"{other.counts.shape}/{other.sums.shape}",
                "ask every party the same query",
            )
        return NoisyAggregates(self.counts + other.counts, self.sums + other.sums)


def sum_sensitivity(bounds: Sequence[tuple[float, float]], n_cells: int = 1) -> float:
    """L1 sensitivity of the column sums of ``n_cells`` disjoint cells under substitution of one record.

    In one cell a substituted record changes column j by at most ``hi_j - lo_j``. Across cells it
    leaves one cell (``|v_j| <= max|bound_j|`` removed) and enters another (as much added), so
    ``2 sum_j max(|lo_j|, |hi_j|)``, which is at least ``sum_j (hi_j - lo_j)``.
    """
    if n_cells == 1:
        return float(sum(hi - lo for lo, hi in bounds))
    return float(2 * sum(max(abs(lo), abs(hi)) for lo, hi in bounds))


def noisy_aggregates(
    cells: ArrayLike,
    n_cells: int,
    epsilon: float,
    *,
    arms: ArrayLike | None = None,
    values: ArrayLike | None = None,
    bounds: Sequence[tuple[float, float]] = (),
    rng: np.random.Generator | None = None,
) -> NoisyAggregates:
    """Epsilon-DP counts (and sums of ``values``) per cell, or per (cell, arm) when ``arms`` given.

    Epsilon-DP under substitution of one record (module docstring for the sensitivities).

    Parameters
    ----------
    cells : array of int, shape (n,)
        Cell index of each subject, in ``0..n_cells-1`` (from a public partition).
    n_cells : int
    epsilon : float
        Budget of the whole release.
    arms : array of 0/1, shape (n,), optional
        Treatment arm of each subject; the output then has two arms (control, treated).
    values : array of shape (n, q), optional
        Columns to sum; each is clipped to its entry of ``bounds`` first.
    bounds : sequence of (low, high)
        One per column of ``values``.
    rng : numpy Generator, optional
        Insecure reproducible noise for simulations (see :mod:`.mechanisms`).
    """
    eps = check_epsilon(epsilon)
    cell = np.asarray(cells, dtype=np.int64).ravel()
    if cell.size and (cell.min() < 0 or cell.max() >= n_cells):
        raise InputError(f"cell indices must lie in [0, {n_cells}), got {cell.min()}..{cell.max()}", "fix it")
    arm = np.zeros(cell.size, dtype=np.int64) if arms is None else np.asarray(arms, dtype=np.int64).ravel()
    n_arms = 1 if arms is None else 2
    if arm.size != cell.size:
        raise InputError(f"{arm.size} arms for {cell.size} subjects", "pass one arm per subject")
    index = cell * n_arms + arm
    raw_counts = np.bincount(index, minlength=n_cells * n_arms).reshape(n_cells, n_arms)
    data = np.zeros((cell.size, 0)) if values is None else check_matrix(values, "values", n_rows=cell.size)
    if data.shape[1] == 0:
        counts = discrete_laplace(raw_counts, COUNT_SENSITIVITY, eps, rng=rng).astype(np.float64)
        return NoisyAggregates(counts, np.zeros((n_cells, n_arms, 0)))
    boxes = [check_bounds(b) for b in bounds]
    if len(boxes) != data.shape[1]:
        raise InputError(f"{data.shape[1]} summed columns but {len(boxes)} bounds", "give one (low, high) per column")
    clipped = [clip(data[:, j], *boxes[j]) for j in range(data.shape[1])]
    raw_sums = np.stack(
        [np.bincount(index, weights=col, minlength=n_cells * n_arms) for col, _ in clipped], axis=-1
    ).reshape(n_cells, n_arms, data.shape[1])
    counts = discrete_laplace(raw_counts, COUNT_SENSITIVITY, eps / 2.0, rng=rng).astype(np.float64)
    sums = laplace(raw_sums, sum_sensitivity(boxes, n_cells * n_arms), eps / 2.0, rng=rng)
    return NoisyAggregates(counts, sums, tuple(n for _, n in clipped))
