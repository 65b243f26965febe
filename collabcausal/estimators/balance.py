"""Covariate balance (paper 003, eqs. 42–45) and propensity inconsistency (eqs. 40–41).

Balance is computed from additive per-arm sufficient statistics (:class:`ArmMoments`), so the
moments of different row groups or parties add up exactly to those of the pooled sample and
one formula (:func:`smd_from_moments`) serves every caller.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike, NDArray

from collabcausal.errors import InputError, NumericalError
from collabcausal.estimators.blocks import ROW_BLOCK, row_blocks
from collabcausal.estimators.validation import check_matrix, check_treatment, check_vector, check_weights

if TYPE_CHECKING:
    import pandas as pd


@dataclass(frozen=True)
class ArmMoments:
    """Weighted sufficient statistics per arm (row 0 control, row 1 treated) and covariate.

    Attributes
    ----------
    sum_w : ndarray of shape (2,)
        Sum of weights per arm.
    sum_w2 : ndarray of shape (2,)
        Sum of squared weights per arm.
    sum_wx : ndarray of shape (2, m)
        Sum of w * x per arm and covariate.
    sum_wx2 : ndarray of shape (2, m)
        Sum of w * x^2 per arm and covariate.

    Moments of disjoint sets of subjects combine with ``+``. The moments of k samples (weightings
    of the same subjects) computed together stack their arms: fields of shape (2k,) and (2k, m),
    sample s in rows 2s (control) and 2s + 1 (treated); :meth:`by_sample` gives them a leading
    axis of samples, (k, 2) and (k, 2, m) (a stacked ``weighted_moments`` reply), in which
    :func:`smd_from_moments` reads all k samples at once.
    """

    sum_w: NDArray[np.float64]
    sum_w2: NDArray[np.float64]
    sum_wx: NDArray[np.float64]
    sum_wx2: NDArray[np.float64]

    def __add__(self, other: ArmMoments) -> ArmMoments:
        if not isinstance(other, ArmMoments):
            return NotImplemented
        if other.sum_wx.shape != self.sum_wx.shape:
            raise InputError(
                f"cannot add moments of {self.sum_wx.shape[-1]} and {other.sum_wx.shape[-1]} covariates",
                "combine moments of the same covariates, in the same order",
            )
        return ArmMoments(
            self.sum_w + other.sum_w,
            self.sum_w2 + other.sum_w2,
            self.sum_wx + other.sum_wx,
            self.sum_wx2 + other.sum_wx2,
        )

    def by_sample(self) -> ArmMoments:
        """The moments of k stacked samples (fields (2k,) and (2k, m)) with a leading axis of the samples:
        fields (k, 2) and (k, 2, m), views of these."""
        k = self.sum_w.shape[0] // 2
        return ArmMoments(*(v.reshape(k, 2, *v.shape[1:]) for v in vars(self).values()))


SMD_THRESHOLD = 0.1
"""|SMD| below this is the usual "balanced" threshold (Austin 2009): the Love plot's reference line,
and the noise sd above which a DP SMD cannot tell balance from imbalance."""


def weighted_moments(X: ArrayLike, t: ArrayLike, weights: ArrayLike | None = None) -> ArmMoments:
    """The :class:`ArmMoments` of covariates ``X`` (n x m) by arm, with per-subject weights.

    Parameters
    ----------
    X : array-like of shape (n, m)
    t : array-like of shape (n,)
        Treatment, coded 0/1. (A row group may hold one arm only, so both arms are not required.)
    weights : array-like of shape (n,) or None
        Non-negative weights (IPW weights, match weights); None means all ones.
    """
    X = check_matrix(X, "X")
    n = X.shape[0]
    t = check_vector(t, "treatment", n=n)
    if not ((t == 0.0) | (t == 1.0)).all():
        raise InputError("treatment must be coded 0/1", "recode the treatment column to 0 (control) and 1 (treated)")
    return arm_moments(X, t, np.ones(n) if weights is None else check_weights(weights, "weights", n=n))


def arm_moments(X: NDArray[np.float64], t: NDArray, w: NDArray[np.float64]) -> ArmMoments:
    """:func:`weighted_moments` of inputs already checked: ``X`` a finite float matrix, ``t`` its rows'
    arms (0/1) and ``w`` their finite non-negative weights (a party's own validated table, say).
    """
    buffer = np.empty((2, min(ROW_BLOCK, X.shape[0])))
    return block_arm_moments(X, lambda rows: arm_weights(w[rows], t[rows], buffer[:, : rows.stop - rows.start]))


def arm_weights(w: NDArray[np.float64], t: NDArray, out: NDArray[np.float64] | None = None) -> NDArray[np.float64]:
    """The weight of each subject in each arm: exactly ``w * (t == arm)``, ``t`` being 0 or 1.

    ``w`` of shape (n,) gives shape (2, n) (control, treated); ``w`` of shape (k, n), k samples'
    weights of the same subjects, gives shape (2k, n): rows ``2s`` and ``2s + 1`` are sample s's
    control and treated weights (the layout :func:`block_arm_moments` reads). Written into ``out``
    when given (a reused buffer), else into a new array.
    """
    stacked = w if w.ndim == 2 else w[None, :]
    out = np.empty((2 * stacked.shape[0], t.shape[0])) if out is None else out
    np.multiply(stacked, t, out=out[1::2])
    np.subtract(stacked, out[1::2], out=out[0::2])
    return out


def block_arm_moments(
    X: NDArray[np.float64],
    weights_of: Callable[[slice], NDArray[np.float64]],
    samples: int = 1,
    rows: NDArray[np.int64] | None = None,
) -> ArmMoments:
    """The :class:`ArmMoments` of the rows of ``X`` under ``samples`` weightings, stacked, ``weights_of(block)``
    giving a block's arm weights (2 samples x rows, in the layout of :func:`arm_weights`).

    ``rows`` (optional) are the rows of ``X`` weighed, in order (a repeated row counts once per
    repeat), gathered a block at a time; all rows of ``X`` in order by default. Block by block of
    rows, the sums accumulated over the blocks: no temporary of n rows, neither ``X * X`` nor the
    arms' weights. The samples share each block's products (one matrix product for all of them).
    """
    total = None
    for block in row_blocks(X.shape[0] if rows is None else rows.shape[0]):
        A = weights_of(block)
        Z = X[block] if rows is None else X.take(rows[block], axis=0)  # a twentieth of X[rows]'s time (numpy 2.4)
        part = ArmMoments(A.sum(axis=1), np.vecdot(A, A), A @ Z, A @ (Z * Z))
        total = part if total is None else total + part
    if total is None:  # no rows
        return ArmMoments(np.zeros(2 * samples), np.zeros(2 * samples), *np.zeros((2, 2 * samples, X.shape[1])))
    return total


def smd_from_moments(m: ArmMoments, *, noisy: bool = False) -> NDArray[np.float64]:
    """Standardized mean differences from arm moments (paper 003, eqs. 42–44).

    ``SMD_k = (mean1_k - mean0_k) / sqrt((var1_k + var0_k) / 2)`` (eq. 42) with weighted means
    ``sum_w x / sum_w`` (eq. 43) and the unbiased reliability-weights variance (eq. 44)::

        var = sum_w / (sum_w^2 - sum_w2) * sum_k w_k (x_k - mean)^2

    which is the usual ``ddof=1`` variance for unit weights and does not change when all weights
    are multiplied by a constant. ``sum w (x - mean)^2`` is computed as ``sum_wx2 - sum_wx^2 /
    sum_w``. A covariate constant in both arms gets SMD 0 (equal means) or +/-inf.

    With ``noisy`` (DP moments, ``dp_weighted_moments``) an arm's spread ``sum_wx2 - sum_wx^2 /
    sum_w <= 0`` is the noise's doing, not a constant covariate: a difference of noisy sums goes
    negative when the noise exceeds the arm's spread (heavy matching weights make the noise large),
    and flooring it at 0 gave pooled sd 0 and SMD +/-inf. The SMD is then undefined: NaN.

    Moments with a leading axis of k samples (fields (k, 2) and (k, 2, m)) give the (k, m) SMDs of
    every sample in one pass.
    """
    sw, sw2 = m.sum_w[..., None], m.sum_w2[..., None]  # the arms on axis -2, as in sum_wx
    definite = sw**2 - sw2
    undefined = definite[..., 0] <= 0.0  # per (sample and) arm
    if undefined.any():
        first = undefined.reshape(-1, 2)[undefined.reshape(-1, 2).any(axis=1)][0]  # the first such sample's arms
        arm = "treated" if first[1] else "control"
        raise NumericalError(
            f"the {arm} arm has fewer than two subjects with positive weight: its variance is undefined",
            "check the weights or the matching (at least two distinct subjects are needed per arm)",
        )
    mean = m.sum_wx / sw
    spread = m.sum_wx2 - m.sum_wx * mean
    var = np.maximum(spread, 0.0) * (sw / definite)
    diff = mean[..., 1, :] - mean[..., 0, :]
    pooled = np.sqrt((var[..., 1, :] + var[..., 0, :]) / 2.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(pooled > 0.0, diff / np.where(pooled > 0.0, pooled, 1.0), np.sign(diff) * np.inf)
    out[(pooled == 0.0) & (diff == 0.0)] = 0.0
    if noisy:
        out[(spread <= 0.0).any(axis=-2)] = np.nan
    return out


def smd_noise_sd(m: ArmMoments, sigma: ArrayLike) -> NDArray[np.float64]:
    """First-order sd of :func:`smd_from_moments` when ``sum_wx`` and ``sum_wx2`` carry noise.

    The noise is independent ``N(0, sigma_k^2)`` on each of the four sums of covariate ``k``
    (``sum_wx`` and ``sum_wx2`` of both arms; ``sum_w`` and ``sum_w2`` exact), as released by
    ``dp_weighted_moments``. By the delta method on eqs. 42-44, with ``c_a = sum_w / (sum_w^2 -
    sum_w2)``, ``p`` the pooled sd and ``s_a = -1, +1`` for control, treated::

        d SMD / d sum_wx_a  = s_a / (sum_w_a p) + SMD mean_a c_a / (2 p^2)
        d SMD / d sum_wx2_a = -SMD c_a / (4 p^2)

    and the sd is ``sigma_k`` times the norm of these four derivatives. The leading term is
    ``sigma sqrt(1/sum_w_0^2 + 1/sum_w_1^2) / p``: the noise shrinks as the arms' total weight grows
    relative to the heaviest subject's (the sensitivity). Meaningful when the moments are centred
    (``mean_a`` small, as ``dp_weighted_moments`` returns them) and the noise is small against them;
    NaN where the SMD is undefined (an arm's noisy spread ``<= 0``).
    """
    sigma = np.broadcast_to(np.asarray(sigma, dtype=np.float64), m.sum_wx.shape[1:])
    value = smd_from_moments(m, noisy=True)
    sw = m.sum_w[:, None]
    c = sw / (sw**2 - m.sum_w2[:, None])
    mean = m.sum_wx / sw
    var = np.maximum(m.sum_wx2 - m.sum_wx * mean, 0.0) * c
    p2 = (var[0] + var[1]) / 2.0
    sign = np.array([[-1.0], [1.0]])
    with np.errstate(divide="ignore", invalid="ignore"):
        d_first = sign / (sw * np.sqrt(p2)) + value * mean * c / (2.0 * p2)
        d_second = -value * c / (4.0 * p2)
        sd = sigma * np.sqrt((d_first**2).sum(axis=0) + (d_second**2).sum(axis=0))
    return np.where(np.isnan(value) | ~(p2 > 0.0), np.nan, sd)  # an undefined SMD has no noise sd


def smd(X: ArrayLike, t: ArrayLike, weights: ArrayLike | None = None) -> NDArray[np.float64] | pd.Series:
    """Standardized mean difference of each covariate (paper 003, eq. 42; weighted: eqs. 43–44).

    For PSM pass the ``match_weights`` diagnostic of :func:`~collabcausal.estimators.matching.psm`
    (the matched sample); for IPW the ``weights`` of :func:`~collabcausal.estimators.weighting.ipw`.
    A DataFrame ``X`` gives a pandas Series indexed by its column names, an array an array.
    """
    values = smd_from_moments(weighted_moments(X, check_treatment(t), weights))
    if hasattr(X, "columns"):
        import pandas as pd

        return pd.Series(values, index=X.columns, name="smd")
    return values


def masmd(X: ArrayLike, t: ArrayLike, weights: ArrayLike | None = None) -> float:
    """Maximum absolute standardized mean difference ``max_k |SMD_k|`` (paper 003, eq. 45)."""
    return float(np.max(np.abs(smd(X, t, weights))))


def propensity_inconsistency(e: ArrayLike, e_ref: ArrayLike) -> float:
    """Mean absolute difference of propensities, ``(1/n) sum_k |e_k - e_ref_k|`` (paper 003, eqs. 40–41).

    ``e_ref`` is the true propensity (eq. 40) or the centralized-analysis propensity (eq. 41).
    """
    e = check_vector(e, "propensity")
    ref = check_vector(e_ref, "reference propensity", n=e.size)
    return float(np.mean(np.abs(e - ref)))
