"""Augmented IPW (doubly robust) estimates of the ATE and the ATT.

Consistent when either the propensity model or the outcome regressions are right.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from sklearn.base import clone

from collabcausal.errors import InputError
from collabcausal.estimators.blocks import AffineDesign
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
    check_input: bool = True,
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
    check_input : bool, default True
        Check ``y``, ``t``, ``e`` and ``X``; False takes them as checked already (``X`` a finite
        float64 matrix of one row per subject; :func:`~collabcausal.estimators.matching.psm`).

    Returns
    -------
    EffectEstimate
        method ``"aipw"``; diagnostics ``mu0_hat`` (and for the ATE ``mu1_hat``: the outcome
        predictions for every subject), ``outcome_model`` (its class name), ``influence`` (the
        influence function per subject) and ``se_kind`` (which nuisances were stacked).
    """
    estimand = check_estimand(estimand)
    if check_input:
        t = check_treatment(t)
        y = check_vector(y, "y", n=t.size)
        e = check_propensity(e, "propensity", n=t.size)
        X = check_matrix(X, "X", n_rows=t.size)
    n = t.size
    is_t = t == 1
    n1 = int(np.count_nonzero(is_t))
    logistic = None if X_propensity is None or not compute_se else logistic_nuisance(X_propensity, t, e)
    if outcome_model is not None:
        design = None
    elif logistic is not None and logistic.covariates is X:  # the propensity's design serves
        design = logistic.design
    else:
        design = standardized_design(X)
    m0, ols0 = _fit_arm(outcome_model, X, y, ~is_t, "control", design)
    diagnostics = {
        "mu0_hat": m0,
        "outcome_model": "LinearRegression" if outcome_model is None else type(outcome_model).__name__,
    }
    def odds() -> NDArray[np.float64]:  # e / (1 - e), formed where needed rather than kept
        return e / (1.0 - e)

    if estimand == "ate":
        m1, ols1 = _fit_arm(outcome_model, X, y, is_t, "treated", design)
        g = m1 - m0
        g += _residual_terms(y, m1, m0, e, is_t)  # phi, then g = phi - ATE in place
        estimate = float(g.sum() / n)
        g -= estimate
        dg_dtau = -1.0
        outcome_terms = [
            (ols1, lambda: np.where(is_t, 1.0 - 1.0 / e, 1.0)),
            (ols0, lambda: np.where(is_t, -1.0, odds())),
            (logistic, lambda: _logistic_index_terms(y, m1, m0, odds(), is_t)),
        ]
        diagnostics["mu1_hat"] = m1
    else:
        g = np.where(is_t, 1.0, -odds()) * (y - m0)  # a, then g = a - ATT t in place
        estimate = float(g.sum() / n1)
        g -= estimate * is_t
        dg_dtau = -n1 / n
        outcome_terms = [
            (ols0, lambda: np.where(is_t, -1.0, odds())),
            (logistic, lambda: np.where(is_t, 0.0, -odds() * (y - m0))),
        ]
    if not compute_se:
        diagnostics["se_kind"] = "not computed"
        return EffectEstimate(
            estimate, None, None, None, estimand, "aipw", n1, n - n1, diagnostics=diagnostics
        )
    # each derivative is built when its term is added (stacked_influence), not all at once
    terms = ((nuisance, dg()) for nuisance, dg in outcome_terms if nuisance is not None)
    influence = stacked_influence(g, dg_dtau, terms)
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
        n_treated=n1,
        n_control=n - n1,
        diagnostics=diagnostics,
    )


def _residual_terms(
    y: NDArray[np.float64],
    m1: NDArray[np.float64],
    m0: NDArray[np.float64],
    e: NDArray[np.float64],
    is_t: NDArray[np.bool_],
) -> NDArray[np.float64]:
    """The ATE's weighted residuals: ``(y - m1) / e`` for the treated, ``-(y - m0) / (1 - e)`` for the controls."""
    out = y - m1
    out /= e
    control = y - m0
    np.negative(control, out=control)
    control /= 1.0 - e
    np.copyto(out, control, where=~is_t)
    return out


def _logistic_index_terms(
    y: NDArray[np.float64],
    m1: NDArray[np.float64],
    m0: NDArray[np.float64],
    odds: NDArray[np.float64],
    is_t: NDArray[np.bool_],
) -> NDArray[np.float64]:
    """The ATE's ``dphi/deta``: ``-(y - m1) / odds`` for the treated, ``-(y - m0) odds`` for the controls.

    ``odds`` (``e / (1 - e)``) is overwritten.
    """
    out = y - m1
    np.negative(out, out=out)
    out /= odds
    control = np.subtract(y, m0)
    np.negative(control, out=control)
    np.multiply(control, odds, out=odds)
    np.copyto(out, odds, where=~is_t)
    return out


def _fit_arm(
    model: Any,
    X: NDArray[np.float64],
    y: NDArray[np.float64],
    arm: NDArray[np.bool_],
    name: str,
    design: AffineDesign | None,
) -> tuple[NDArray[np.float64], OlsNuisance | None]:
    """Fit the outcome regression on one arm: its predictions for every subject, and its nuisance.

    ``model`` None is least squares on ``design`` (:class:`~collabcausal.estimators.sandwich.OlsNuisance`,
    returned too); a custom model is fitted on ``X`` and has no nuisance (treated as known).
    """
    if model is not None:
        return np.asarray(clone(model).fit(X[arm], y[arm]).predict(X), dtype=np.float64).ravel(), None
    n_arm = int(np.count_nonzero(arm))
    if n_arm <= X.shape[1]:
        raise InputError(
            f"the {name} arm has {n_arm} subjects for {X.shape[1]} covariates: too few for a linear outcome regression",
            "reduce the covariates or pass a regularized outcome_model (e.g. sklearn Ridge)",
        )
    ols = OlsNuisance(design, y, arm)
    return ols.fitted, ols
