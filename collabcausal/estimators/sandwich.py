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

from collections.abc import Iterable
from functools import cached_property

import numpy as np
from numpy.typing import ArrayLike, NDArray

from collabcausal.errors import InputError
from collabcausal.estimators.blocks import AffineDesign, centred_gram, column_means
from collabcausal.estimators.small_systems import eigvalsh, solve
from collabcausal.estimators.validation import check_matrix

_SCORE_TOL = 1e-6  # largest |mean score| on the standardized design of a logistic MLE
_NORMAL_EQUATIONS_MAX_COND = 1e8  # above this, an outcome regression is solved by SVD instead


def standardized_design(X: NDArray[np.float64]) -> AffineDesign:
    """``[1, (X - mean) / sd]``: the same column space as ``[1, X]``, well scaled.

    Influence functions are invariant to invertible reparametrizations of a nuisance model, so
    working on the standardized design only improves the numerics (collaborative
    representations are badly scaled). Never formed (:class:`~collabcausal.estimators.blocks.AffineDesign`):
    its products are taken from X.
    """
    center = column_means(X)
    scale = np.sqrt(np.diag(centred_gram(X, center)) / X.shape[0])
    scale[scale == 0.0] = 1.0
    return AffineDesign(X, center, scale)


class LogisticNuisance:
    """A logistic propensity ``e = expit([1, X] beta)`` fitted by unpenalized maximum likelihood.

    Its estimating equation is the score ``s_k = x_k (t_k - e_k)``, so
    ``IF_beta,k = H^{-1} s_k`` with ``H = mean_k e_k (1 - e_k) x_k x_k'`` (the Fisher
    information per subject). One instance serves every estimator on the same propensity
    (:func:`logistic_nuisance`).

    Attributes
    ----------
    covariates : ndarray of shape (n, m)
        ``X`` as given (checked), to recognise an outcome regression on the same covariates.
    design : AffineDesign of shape (n, m + 1)
        The standardized design ``[1, X]`` (same column space, better scaled; :func:`standardized_design`).
    information_inverse : ndarray of shape (m + 1, m + 1)
        ``H^{-1}`` on that design.
    t, e : ndarray of shape (n,)
        The treatment and propensities it was checked against.

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
        self.covariates = check_matrix(X, "X_propensity", n_rows=t.size)
        self.design = standardized_design(self.covariates)
        score = self.design.tdot(t - e) / t.size
        if np.max(np.abs(score)) > _SCORE_TOL:
            raise InputError(
                f"the propensities are not the unpenalized logistic fit on X_propensity (mean score up to "
                f"{np.max(np.abs(score)):.2g})",
                "pass the unclipped predict_propensity of LogisticPropensity() fitted on X_propensity, or "
                "X_propensity=None to treat the propensity as known",
            )
        self.t, self.e = t, e
        self.information_inverse = np.linalg.pinv(self.design.weighted_gram(e * (1.0 - e)) / t.size)

    def influence_times(self, J: NDArray[np.float64]) -> NDArray[np.float64]:
        """``IF_beta,k' J`` per subject (``IF_beta`` itself, n x (m + 1), is never formed)."""
        out = self.design.dot(self.information_inverse @ J)
        out *= self.t - self.e  # the residual, formed when needed rather than kept
        return out

    def jacobian(self, dg_deta: NDArray[np.float64]) -> NDArray[np.float64]:
        """``mean_k dg_k/dbeta`` from ``dg_k/deta_k`` (eta the linear predictor, logit of e)."""
        return self.design.tdot(dg_deta) / dg_deta.size


def logistic_nuisance(
    X_propensity: ArrayLike | LogisticNuisance, t: NDArray[np.int8], e: NDArray[np.float64]
) -> LogisticNuisance:
    """The :class:`LogisticNuisance` of ``X_propensity``: built from covariates, or one already built.

    Estimators on one propensity share one nuisance (its design and information are computed
    once); a shared one must have been built for the same ``t`` and ``e``.

    Raises
    ------
    InputError
        A given nuisance was built for another treatment or other propensities.
    """
    if not isinstance(X_propensity, LogisticNuisance):
        return LogisticNuisance(X_propensity, t, e)
    if not (np.array_equal(X_propensity.t, t) and np.array_equal(X_propensity.e, e)):
        raise InputError(
            "X_propensity is a LogisticNuisance of another treatment or other propensities",
            "pass the covariates, or the nuisance built for these t and e",
        )
    return X_propensity


class OlsNuisance:
    """An outcome regression ``m(x) = [1, x] alpha`` fitted by least squares on one arm.

    Fitted on the standardized design by the normal equations when their Gram matrix is well
    conditioned, and by ``numpy.linalg.lstsq`` (minimum norm) otherwise: the predictions of
    ``sklearn.linear_model.LinearRegression`` on the arm. Its estimating equation is
    ``1{arm_k} x_k (y_k - m(x_k))``, so ``IF_alpha,k = G^{-1} 1{arm_k} x_k (y_k - m(x_k))`` with
    ``G = mean_k 1{arm_k} x_k x_k'`` (a pseudo-inverse when the covariates are collinear, matching
    the minimum-norm fit); the fit and the influence share G.

    Parameters
    ----------
    design : AffineDesign of shape (n, m + 1)
        :func:`standardized_design` of the covariates (both arms' regressions share it).
    y : ndarray of shape (n,)
    arm : ndarray of bool, shape (n,)
        The subjects to fit the regression on.

    Attributes
    ----------
    fitted : ndarray of shape (n,)
        Its predictions ``m(x_k)`` for every subject.
    """

    def __init__(self, design: AffineDesign, y: NDArray[np.float64], arm: NDArray[np.bool_]) -> None:
        self.design = design
        gram = design.weighted_gram(arm.astype(np.float64))
        lam = eigvalsh(gram)  # ascending: G is symmetric positive semi-definite, its condition number lam[-1] / lam[0]
        if lam[-1] < _NORMAL_EQUATIONS_MAX_COND * lam[0]:  # fast and accurate enough here
            alpha = solve(gram, design.tdot(np.where(arm, y, 0.0)))
        else:  # ill-conditioned or collinear: minimum-norm least squares, like LinearRegression
            alpha = np.linalg.lstsq(design.take(arm), y[arm], rcond=None)[0]
        self.fitted = design.dot(alpha)
        self._y, self._arm = y, arm
        self._gram = gram

    @cached_property
    def _gram_inverse(self) -> NDArray[np.float64]:
        """``G^{-1}`` (a pseudo-inverse), formed for the first influence asked for: a fit used for its
        predictions alone (an estimate without its SE) never pays for it."""
        return np.linalg.pinv(self._gram / self.fitted.size)

    def influence_times(self, J: NDArray[np.float64]) -> NDArray[np.float64]:
        """``IF_alpha,k' J`` per subject (``IF_alpha`` itself is never formed)."""
        out = self.design.dot(self._gram_inverse @ J)
        out *= self._y - self.fitted  # the residual on the arm, formed when needed rather than kept
        out[~self._arm] = 0.0
        return out

    def jacobian(self, dg_dm: NDArray[np.float64]) -> NDArray[np.float64]:
        """``mean_k dg_k/dalpha`` from ``dg_k/dm_k`` (m_k the fitted outcome of subject k)."""
        return self.design.tdot(dg_dm) / dg_dm.size


def stacked_influence(
    g: NDArray[np.float64],
    dg_dtau: float,
    nuisances: Iterable[tuple[LogisticNuisance | OlsNuisance, NDArray[np.float64]]] = (),
) -> NDArray[np.float64]:
    """Influence function of tau, ``-(g + sum_j IF_j J_j') / mean(dg/dtau)`` (module docstring).

    Parameters
    ----------
    g : ndarray of shape (n,)
        The estimating function of tau per subject, at the estimates; overwritten (the influence
        function is returned in it).
    dg_dtau : float
        ``mean_k dg_k/dtau`` (e.g. -1 for ``g = phi - tau``).
    nuisances : iterable of (nuisance, dg_dindex)
        Each estimated nuisance with the derivative of ``g_k`` with respect to its per-subject
        index (the logit ``eta_k`` of a :class:`LogisticNuisance`, the prediction ``m_k`` of an
        :class:`OlsNuisance`); a generator builds each derivative only when its term is added.
        Empty: the nuisances are treated as known.

    Returns
    -------
    ndarray of shape (n,)
        With ``mean(IF) = 0`` up to rounding, ``tau_hat - tau ~ mean(IF)`` and
        ``se = sqrt(sum IF^2) / n``.
    """
    for nuisance, dg_dindex in nuisances:
        J = nuisance.jacobian(dg_dindex)
        del dg_dindex  # released before the influence term is formed
        g += nuisance.influence_times(J)
    return np.divide(g, -dg_dtau, out=g)
