"""eps-ADUM: the epsilon-DP aggregated-data uplift model (paper 001, Algorithm 1).

For a public partition pi with p cells, the model releases, per cell k and arm t, a noisy count
``C_kt`` and outcome sum ``S_kt`` (Algorithm 1, lines 5-6: the paper's ``COUNT + Lap(2/eps)`` and
``SUM(y) + Lap(2 D_y/eps)`` for add/remove; calibrated here for substitution of one record,
``Lap(4/eps)`` (discrete) and ``Lap(4 D_y/eps)``, see :mod:`.aggregates`), and predicts
``u_k = S_k1/C_k1 - S_k0/C_k0`` (lines 7-9) for every x in cell k (line 15, eq. 6).

Noisy counts can be tiny, zero or negative, which the paper leaves open. We post-process (free
under DP): a cell-arm mean is ``clip(S_kt / C_kt, lo, hi)`` when ``C_kt >= min_count`` and the
pooled arm mean ``clip(sum_k S_kt / sum_k C_kt, lo, hi)`` otherwise (``(lo, hi)`` the declared
outcome bounds). An empty cell therefore predicts the pooled uplift instead of noise.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike, NDArray
from sklearn.base import BaseEstimator

from collabcausal.errors import InputError
from collabcausal.estimators.dp.aggregates import NoisyAggregates, noisy_aggregates
from collabcausal.estimators.dp.partitions import Partition
from collabcausal.estimators.validation import (
    check_bounds,
    check_epsilon,
    check_is_fitted,
    check_matrix,
    check_treatment,
    check_vector,
)


class EpsADUM(BaseEstimator):
    """The eps-ADUM uplift model on a fixed public partition.

    Parameters
    ----------
    partition : Partition
        Public partition of the covariates (regular cut, grid or DP k-means centers).
    epsilon : float
        Budget of the COUNT and SUM release (eps/2 each, parallel across cells and arms).
    outcome_bounds : (low, high)
        Declared outcome range; outcomes are clipped to it (D_y = max(|low|, |high|)).
    min_count : float
        Noisy counts below this use the pooled arm mean (module docstring).
    rng : numpy Generator, optional
        Reproducible, insecure noise for simulations; ``None`` draws from OpenDP.

    Attributes
    ----------
    aggregates_ : NoisyAggregates
        The released counts (p, 2) and sums (p, 2, 1).
    means_ : ndarray of shape (p, 2)
        Post-processed arm means per cell (control, treated).
    uplift_ : ndarray of shape (p,)
    n_clipped_ : int
        Outcomes moved by clipping (only known when fitted on raw data).
    """

    def __init__(
        self,
        partition: Partition,
        epsilon: float,
        outcome_bounds: tuple[float, float],
        *,
        min_count: float = 1.0,
        rng: np.random.Generator | None = None,
    ) -> None:
        self.partition = partition
        self.epsilon = epsilon
        self.outcome_bounds = outcome_bounds
        self.min_count = min_count
        self.rng = rng

    def fit(self, X: ArrayLike, t: ArrayLike, y: ArrayLike) -> EpsADUM:
        """Release the DP aggregates of one data holder's rows and fit (Algorithm 1, TRAIN).

        ``X`` holds the partition's columns, in order.
        """
        arr = check_matrix(X, "X")
        treat = check_treatment(t, n=arr.shape[0])
        out = check_vector(y, "y", n=arr.shape[0])
        aggregates = noisy_aggregates(
            self.partition.assign(arr),
            self.partition.n_cells,
            check_epsilon(self.epsilon),
            arms=treat,
            values=out[:, None],
            bounds=[check_bounds(self.outcome_bounds, "outcome_bounds")],
            rng=self.rng,
        )
        self.fit_aggregates(aggregates)
        self.n_clipped_ = aggregates.n_clipped[0]
        return self

    def fit_aggregates(self, aggregates: NoisyAggregates) -> EpsADUM:
        """Fit from released aggregates (e.g. the sum of the parties' noisy answers); no privacy cost."""
        lo, hi = check_bounds(self.outcome_bounds, "outcome_bounds")
        p = self.partition.n_cells
        counts = np.asarray(aggregates.counts, dtype=np.float64)
        sums = np.asarray(aggregates.sums, dtype=np.float64)
        if counts.shape != (p, 2) or sums.shape != (p, 2, 1):
            raise InputError(
                f"aggregates of shape {counts.shape}/{sums.shape} do not fit a {p}-cell partition by arm",
                "release counts (p, 2) and outcome sums (p, 2, 1)",
            )
        self.aggregates_ = aggregates
        self.means_ = arm_means(counts, sums[:, :, 0], (lo, hi), self.min_count)
        self.uplift_ = self.means_[:, 1] - self.means_[:, 0]
        return self

    def predict(self, X: ArrayLike) -> NDArray[np.float64]:
        """Uplift of each row of ``X``: the uplift of its cell (Algorithm 1, PREDICT)."""
        check_is_fitted(self, "uplift_", "fit() or fit_aggregates()")
        return self.uplift_[self.partition.assign(X)]


def arm_means(
    counts: NDArray[np.float64], sums: NDArray[np.float64], bounds: Sequence[float], min_count: float
) -> NDArray[np.float64]:
    """Post-processed means ``S/C`` per (cell, arm), pooled where ``C < min_count``, clipped to bounds."""
    lo, hi = bounds
    pooled = np.clip(sums.sum(axis=0) / np.maximum(counts.sum(axis=0), 1.0), lo, hi)
    ok = counts >= max(float(min_count), np.finfo(float).tiny)
    cell = np.divide(sums, counts, out=np.zeros_like(sums), where=ok)
    return np.where(ok, np.clip(cell, lo, hi), pooled[None, :])
