"""Influence functions of stacked M-estimators: an effect estimated after its nuisance models.

An effect tau solves ``mean_k g_k(tau, gamma) = 0`` after nuisance parameters gamma (the
logistic propensity, the outcome regressions) solved their own estimating equations. The
stacked M-estimation sandwich ``A^{-1} B A^{-T} / n`` (Stefanski & Boos 2002, "The calculus of
M-estimation"; Lunceford & Davidian 2004, section 3.2 for IPW and AIPW) gives for tau the
influence function

    IF_k = -(g_k + sum_j J_j IF_j,k) / mean(dg/dtau),    J_j = mean_k dg_k/dgamma_j,

where ``IF_j`` is nuisance j's own influence function, and ``se = sqrt(sum_k IF_k^2) / n``
(the tau entry of the sandwich, with B the empirical second moment). This module supplies the
nuisance pieces: :class:`LogisticNuisance` (an unpenalized logistic regression with an intercept,
e.g. :class:`~collabcausal.estimators.propensity.LogisticPropensity`) and :class:`OlsNuisance`
(ordinary least squares with an intercept on one arm).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike, NDArray

from collabcausal.errors import InputError
from collabcausal.estimators.validation import check_matrix

_SCORE_TOL = 1e-6  # largest |mean score| on the standardized design of a logistic MLE


def _standardized_design(X: NDArray[np.float64]) -> NDArray[np.float64]:
    """``[1, (X - mean) / sd]``: the same column space as ``[1, X]``, well scaled.

    Influence functions are invariant to invertible reparametrizations of a nuisance model, so
    working on the standardized design only improves the numerics (collaborative
    representations are badly scaled).
    """
    center = X.mean(axis=0)
    scale = X.std(axis=0)
    scale[scale == 0.0] = 1.0
    return np.column_stack([np.ones(X.shape[0]), (X - center) / scale])


class LogisticNuisance:
    """A logistic propensity ``e = expit([1, X] beta)`` fitted by unpenalized maximum likelihood.

    Its estimating equation is the score ``s_k = x_k (t_k - e_k)``, so
    ``IF_beta,k = H^{-1} s_k`` with ``H = mean_k e_k (1 - e_k) x_k x_k'`` (the Fisher
    information per subject).

    Attributes
    ----------
    design : ndarray of shape (n, m + 1)
        The standardized design ``[1, X]`` (same column space, better scaled).
    information_inverse : ndarray of shape (m + 1, m + 1)
        ``H^{-1}`` on that design.
    influence : ndarray of shape (n, m + 1)
        ``IF_beta`` per subject.

    Parameters
    ----------
    X : array-like of shape (n, m)
        The covariates the propensity model was fitted on (without the intercept column).
    t : ndarray of shape (n,)
        Treatment, 0/1.
    e : ndarray of shape (n,)
        The fitted, unclipped propensities.

    Raises
    ------
    InputError
        ``e`` does not solve the score equations on ``X`` (clipped, penalized, or fitted on other
        covariates): the correction would be wrong.
    """

    def __init__(self, X: ArrayLike, t: NDArray[np.int8], e: NDArray[np.float64]) -> None:
        self.design = _standardized_design(check_matrix(X, "X_propensity", n_rows=t.size))
        residual = t - e
        score = self.design.T @ residual / t.size
        if np.max(np.abs(score)) > _SCORE_TOL:
            raise InputError(
                f"the propensities are not the unpenalized logistic fit on X_propensity (mean score up to "
                f"{np.max(np.abs(score)):.2g})",
                "pass the unclipped predict_propensity of LogisticPropensity() fitted on X_propensity, or "
                "X_propensity=None to treat the propensity as known",
            )
        self.e = e
        self.information_inverse = np.linalg.pinv(self.design.T @ (self.design * (e * (1.0 - e))[:, None]) / t.size)
        self.influence = (self.design * residual[:, None]) @ self.information_inverse

    def jacobian(self, dg_deta: NDArray[np.float64]) -> NDArray[np.float64]:
        """``mean_k dg_k/dbeta`` from ``dg_k/deta_k`` (eta the linear predictor, logit of e)."""
        return self.design.T @ dg_deta / dg_deta.size


class OlsNuisance:
    """An outcome regression ``m(x) = [1, x] alpha`` fitted by least squares on one arm.

    Its estimating equation is ``1{arm_k} x_k (y_k - m(x_k))``, so
    ``IF_alpha,k = G^{-1} 1{arm_k} x_k (y_k - m(x_k))`` with ``G = mean_k 1{arm_k} x_k x_k'``
    (a pseudo-inverse when the covariates are collinear, matching the minimum-norm fit).

    Parameters
    ----------
    X : ndarray of shape (n, m)
    y : ndarray of shape (n,)
    arm : ndarray of bool, shape (n,)
        The subjects the regression was fitted on.
    fitted : ndarray of shape (n,)
        Its predictions ``m(x_k)`` for every subject.
    """

    def __init__(
        self, X: NDArray[np.float64], y: NDArray[np.float64], arm: NDArray[np.bool_], fitted: NDArray[np.float64]
    ) -> None:
        self.design = _standardized_design(X)
        on_arm = self.design * arm[:, None]
        gram = on_arm.T @ self.design / y.size
        self.influence = (on_arm * (y - fitted)[:, None]) @ np.linalg.pinv(gram)

    def jacobian(self, dg_dm: NDArray[np.float64]) -> NDArray[np.float64]:
        """``mean_k dg_k/dalpha`` from ``dg_k/dm_k`` (m_k the fitted outcome of subject k)."""
        return self.design.T @ dg_dm / dg_dm.size


def stacked_influence(
    g: NDArray[np.float64],
    dg_dtau: float,
    nuisances: Sequence[tuple[LogisticNuisance | OlsNuisance, NDArray[np.float64]]] = (),
) -> NDArray[np.float64]:
    """Influence function of tau, ``-(g + sum_j IF_j J_j') / mean(dg/dtau)`` (module docstring).

    Parameters
    ----------
    g : ndarray of shape (n,)
        The estimating function of tau per subject, at the estimates.
    dg_dtau : float
        ``mean_k dg_k/dtau`` (e.g. -1 for ``g = phi - tau``).
    nuisances : sequence of (nuisance, dg_dindex)
        Each estimated nuisance with the derivative of ``g_k`` with respect to its per-subject
        index (the logit ``eta_k`` of a :class:`LogisticNuisance`, the prediction ``m_k`` of an
        :class:`OlsNuisance`). Empty: the nuisances are treated as known.

    Returns
    -------
    ndarray of shape (n,)
        With ``mean(IF) = 0`` up to rounding, ``tau_hat - tau ~ mean(IF)`` and
        ``se = sqrt(sum IF^2) / n``.
    """
    total = np.array(g, dtype=np.float64)
    for nuisance, dg_dindex in nuisances:
        total += nuisance.influence @ nuisance.jacobian(dg_dindex)
    return -total / dg_dtau
