"""Augmented IPW (doubly robust) estimates of the ATE and the ATT.

Consistent when either the propensity model or the outcome regressions are right.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from sklearn.base import clone

from collabcausal.errors import InputError
from collabcausal.estimators.blocks import row_blocks
from collabcausal.estimators.results import EffectEstimate, wald_interval
from collabcausal.estimators.sandwich import (
    LogisticNuisance,
    OlsNuisance,
    logistic_nuisance,
    stacked_influence,
    standardized_design,
)
from collabcausal.estimators.validation import (
    check_estimand,
    check_matrix,
    check_propensity,
    check_treatment,
    check_vector,
)

_NORMAL_EQUATIONS_MAX_COND = 1e8  # above this, solve the least squares by SVD instead


def aipw(
    y: ArrayLike,
    t: ArrayLike,
    e: ArrayLike,
    X: ArrayLike,
    estimand: str = "ate",
    outcome_model: Any = None,
    *,
    alpha: float = 0.05,
    X_propensity: ArrayLike | LogisticNuisance | None = None,
    compute_se: bool = True,
) -> EffectEstimate:
    """Doubly robust (AIPW) estimate of the ATE or ATT.

    Outcome regressions m_1, m_0 are fitted separately on the treated and the control subjects
    and predicted for everybody.

    ATE (Robins, Rotnitzky & Zhao 1994; Lunceford & Davidian 2004)::

        phi_k = m1(x_k) - m0(x_k) + t_k (y_k - m1(x_k)) / e_k - (1 - t_k) (y_k - m0(x_k)) / (1 - e_k)
        ATE = mean(phi),  psi_k = phi_k - ATE

    ATT (Moodie et al. 2018; the unnormalized form of Sant'Anna & Zhao 2020)::

        a_k = (t_k - (1 - t_k) e_k / (1 - e_k)) (y_k - m0(x_k))
        ATT = sum(a) / n1,  psi_k = (a_k - ATT t_k) / (n1 / n)

    Standard error ``sqrt(sum IF^2) / n`` from the stacked M-estimation sandwich (Lunceford &
    Davidian 2004, section 3.2; :mod:`collabcausal.estimators.sandwich`): the linear outcome
    regressions (``outcome_model=None``) are always stacked, and with ``X_propensity`` so is the
    logistic propensity, so the SE stays valid when one of the two models is misspecified. A
    custom ``outcome_model`` is treated as known (its estimating equations are not available).

    Parameters
    ----------
    y, t, e : array-like of shape (n,)
        Outcomes, treatment (0/1), propensity scores in (0, 1).
    X : array-like of shape (n, m)
        Covariates of the outcome regressions.
    estimand : {"ate", "att"}
    outcome_model : scikit-learn regressor or None
        Cloned and fitted once per arm. None: ordinary least squares with an intercept (the same
        fit as ``sklearn.linear_model.LinearRegression``, solved by the normal equations of the
        standardized covariates when they are well conditioned and by ``numpy.linalg.lstsq``
        otherwise, to keep bootstrap loops fast).
    alpha : float, default 0.05
        Level of the normal interval.
    X_propensity : array-like of shape (n, k) or LogisticNuisance, optional
        Covariates the propensity was fitted on by ``LogisticPropensity()`` (unpenalized, with an
        intercept, unclipped; checked through the score equations), or their
        :class:`~collabcausal.estimators.sandwich.LogisticNuisance`, shared by the estimators on one
        propensity. None: e treated as known.
    compute_se : bool, default True
        Compute the standard error and the influence values (False skips the stacked sandwich,
        e.g. inside a bootstrap loop, where only the estimate is used: ``se`` is None).

    Returns
    -------
    EffectEstimate
        method ``"aipw"``; diagnostics ``mu0_hat`` (and for the ATE ``mu1_hat``: the outcome
        predictions for every subject), ``outcome_model`` (its class name), ``influence`` (the
        influence function per subject) and ``se_kind`` (which nuisances were stacked).
    """
    estimand = check_estimand(estimand)
    t = check_treatment(t)
    n = t.size
    y = check_vector(y, "y", n=n)
    e = check_propensity(e, "propensity", n=n)
    X = check_matrix(X, "X", n_rows=n)
    is_t = t == 1
    m0 = _predict_arm(outcome_model, X, y, ~is_t, "control")
    diagnostics = {
        "mu0_hat": m0,
        "outcome_model": "LinearRegression" if outcome_model is None else type(outcome_model).__name__,
    }
    odds = e / (1.0 - e)
    if estimand == "ate":
        m1 = _predict_arm(outcome_model, X, y, is_t, "treated")
        phi = m1 - m0 + np.where(is_t, (y - m1) / e, -(y - m0) / (1.0 - e))
        estimate = float(phi.mean())
        g, dg_dtau = phi - estimate, -1.0
        dg_deta = np.where(is_t, -(y - m1) / odds, -(y - m0) * odds)
        outcome_terms = [(is_t, m1, np.where(is_t, 1.0 - 1.0 / e, 1.0)), (~is_t, m0, np.where(is_t, -1.0, odds))]
        diagnostics["mu1_hat"] = m1
    else:
        a = np.where(is_t, 1.0, -odds) * (y - m0)
        estimate = float(a.sum() / is_t.sum())
        g, dg_dtau = a - estimate * is_t, -float(is_t.mean())
        dg_deta = np.where(is_t, 0.0, -odds * (y - m0))
        outcome_terms = [(~is_t, m0, np.where(is_t, -1.0, odds))]
    if not compute_se:
        diagnostics["se_kind"] = "not computed"
        return EffectEstimate(
            estimate, None, None, None, estimand, "aipw", int(is_t.sum()), int(n - is_t.sum()), diagnostics=diagnostics
        )
    logistic = None if X_propensity is None else logistic_nuisance(X_propensity, t, e)
    nuisances: list[tuple[LogisticNuisance | OlsNuisance, NDArray[np.float64]]] = []
    if outcome_model is None:
        same = logistic is not None and logistic.covariates is X  # the propensity's design serves
        design = logistic.design if same else standardized_design(X)
        nuisances += [(OlsNuisance(design, y, arm, fit), dg_dm) for arm, fit, dg_dm in outcome_terms]
    if logistic is not None:
        nuisances.append((logistic, dg_deta))
    influence = stacked_influence(g, dg_dtau, nuisances)
    se = float(np.sqrt(influence @ influence) / n)
    diagnostics["influence"] = influence
    diagnostics["se_kind"] = ", ".join(
        [
            "outcome models " + ("estimated" if outcome_model is None else "known"),
            "propensity " + ("known" if logistic is None else "estimated"),
        ]
    )
    lo, hi = wald_interval(estimate, se, alpha)
    return EffectEstimate(
        estimate=estimate,
        se=se,
        ci_low=lo,
        ci_high=hi,
        estimand=estimand,
        method="aipw",
        n_treated=int(is_t.sum()),
        n_control=int(n - is_t.sum()),
        diagnostics=diagnostics,
    )


def _predict_arm(
    model: Any, X: NDArray[np.float64], y: NDArray[np.float64], arm: NDArray[np.bool_], name: str
) -> NDArray[np.float64]:
    """Fit the outcome regression on one arm and predict it for every subject."""
    if model is not None:
        return np.asarray(clone(model).fit(X[arm], y[arm]).predict(X), dtype=np.float64).ravel()
    Xa = X[arm]
    if Xa.shape[0] <= Xa.shape[1]:
        raise InputError(
            f"the {name} arm has {Xa.shape[0]} subjects for {Xa.shape[1]} covariates: too few for "
            "a linear outcome regression",
            "reduce the covariates or pass a regularized outcome_model (e.g. sklearn Ridge)",
        )
    mean = Xa.mean(axis=0)
    Xs = np.subtract(Xa, mean, out=Xa)  # Xa is this function's copy
    scale = np.sqrt(np.einsum("ij,ij->j", Xs, Xs) / Xs.shape[0])
    scale[scale == 0.0] = 1.0
    Xs /= scale
    yc = y[arm] - y[arm].mean()
    gram = Xs.T @ Xs
    if np.linalg.cond(gram) < _NORMAL_EQUATIONS_MAX_COND:  # fast and accurate enough here
        coef = np.linalg.solve(gram, Xs.T @ yc)
    else:  # ill-conditioned or collinear: minimum-norm least squares, like LinearRegression
        coef = np.linalg.lstsq(Xs, yc, rcond=None)[0]
    fitted = np.empty(X.shape[0])
    for rows in row_blocks(X.shape[0]):
        fitted[rows] = ((X[rows] - mean) / scale) @ coef
    return y[arm].mean() + fitted
