"""Inverse probability weighting (IPW) for the ATE and the ATT, Horvitz–Thompson or Hajek.

Weights (paper 003 section 3; DESIGN.md "Estimators"): for the ATE 1/e for the treated and
1/(1-e) for the controls; for the ATT 1 for the treated and e/(1-e) for the controls.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from collabcausal.estimators.results import EffectEstimate, wald_interval
from collabcausal.estimators.sandwich import LogisticNuisance, logistic_nuisance, stacked_influence
from collabcausal.estimators.validation import check_estimand, check_propensity, check_treatment, check_vector


def ipw_weights(t: ArrayLike, e: ArrayLike, estimand: str = "ate", normalized: bool = True) -> NDArray[np.float64]:
    """Inverse probability weights per subject.

    Parameters
    ----------
    t : array-like of shape (n,)
        Treatment, coded 0/1.
    e : array-like of shape (n,)
        Propensity scores in (0, 1).
    estimand : {"ate", "att"}
        ATE: ``1/e`` (treated), ``1/(1-e)`` (control). ATT: ``1`` (treated), ``e/(1-e)`` (control).
    normalized : bool, default True
        Hajek form: each arm's weights are rescaled to sum to that arm's size (mean weight 1 in
        each arm), so a weighted arm mean is ``sum(w y) / sum(w)``. False: the raw
        Horvitz–Thompson weights above.

    Returns
    -------
    ndarray of shape (n,)
    """
    estimand = check_estimand(estimand)
    t = check_treatment(t)
    e = check_propensity(e, "propensity", n=t.size)
    return _weights(t == 1, e, estimand, normalized)


def ipw(
    y: ArrayLike,
    t: ArrayLike,
    e: ArrayLike,
    estimand: str = "ate",
    normalized: bool = True,
    *,
    alpha: float = 0.05,
    X_propensity: ArrayLike | LogisticNuisance | None = None,
    check_input: bool = True,
) -> EffectEstimate:
    """IPW estimate of the ATE or ATT: the difference of weighted arm means.

    Each arm mean solves ``sum_k (r_ak y_k - mu_a d_ak) = 0`` with the raw weights ``r`` of
    :func:`ipw_weights` (``normalized=False``) and the denominator ``d = r`` (Hajek,
    ``normalized=True``) or, for Horvitz–Thompson, ``d = 1`` (ATE) or the treated indicator (ATT,
    so the denominator is n1). The estimate is ``mu_1 - mu_0``.

    Standard error from the stacked M-estimation sandwich (Lunceford & Davidian 2004, section
    3.2; :mod:`collabcausal.estimators.sandwich`): with ``X_propensity`` the propensity is taken
    as the unpenalized logistic fit on ``[1, X_propensity]`` and its estimation is accounted for
    (the score equations are stacked with the arm means); without it the propensity is treated as
    known, which for an estimated logistic propensity overstates the ATE's SE (measured ~40% on a
    well-specified DGP; docs/estimators.md). The interval is the normal (Wald) interval.

    Parameters
    ----------
    y, t, e : array-like of shape (n,)
        Outcomes, treatment (0/1), propensity scores in (0, 1).
    estimand : {"ate", "att"}
    normalized : bool, default True
        Hajek (True) or Horvitz–Thompson (False).
    alpha : float, default 0.05
        Level of the normal interval.
    X_propensity : array-like of shape (n, m) or LogisticNuisance, optional
        Covariates the propensity was fitted on by ``LogisticPropensity()`` (unpenalized, with an
        intercept, unclipped); checked through the score equations. Or their
        :class:`~collabcausal.estimators.sandwich.LogisticNuisance`, shared by the estimators on one propensity.
    check_input : bool, default True
        Check ``y``, ``t`` and ``e``; False takes them as checked already
        (:func:`~collabcausal.estimators.matching.psm`).

    Returns
    -------
    EffectEstimate
        method ``"ipw-hajek"`` or ``"ipw-ht"``; diagnostics ``weights`` (the weights of
        :func:`ipw_weights` used), ``mean_treated``/``mean_control`` (the weighted arm means),
        ``ess_treated``/``ess_control`` (Kish effective sample sizes), ``influence`` (the influence
        function per subject, ``se = sqrt(sum IF^2) / n``) and ``se_kind``
        (``"propensity estimated"`` or ``"propensity known"``).
    """
    estimand = check_estimand(estimand)
    if check_input:
        t = check_treatment(t)
        y = check_vector(y, "y", n=t.size)
        e = check_propensity(e, "propensity", n=t.size)
    n = t.size
    logistic = None if X_propensity is None else logistic_nuisance(X_propensity, t, e)
    is_t = t == 1
    raw = _weights(is_t, e, estimand, normalized=False)
    w = _normalize(raw.copy(), is_t) if normalized else raw
    draw = None  # d raw weight / d logit(e), with the propensity estimated only
    if logistic is not None and estimand == "ate":  # 1/e -> -(1-e)/e, 1/(1-e) -> e/(1-e)
        draw = np.where(is_t, -(1.0 - e) / e, e / (1.0 - e))
    elif logistic is not None:  # ATT: e/(1-e) -> itself
        draw = np.where(is_t, 0.0, raw)
    means, influence = [], None
    for arm in (is_t, ~is_t):
        r = np.where(arm, raw, 0.0)
        d = r if normalized else (is_t.astype(np.float64) if estimand == "att" else np.ones(n))
        total = d.sum()  # the arm mean's denominator
        mu = float(r @ y / total)
        g = r * y
        g -= mu * d
        dg_dtau = -(total / n)
        del r, d  # the arm's per-subject arrays, before the nuisance's are built
        nuisances = []
        if draw is not None:
            nuisances.append((logistic, _index_derivative(np.where(arm, draw, 0.0), y, mu, normalized)))
        arm_influence = stacked_influence(g, dg_dtau, nuisances)
        if influence is None:  # the treated arm's mean enters with +, the controls' with -
            influence = arm_influence
        else:
            influence -= arm_influence
        means.append(mu)
    mu1, mu0 = means
    se = float(np.sqrt(influence @ influence) / n)
    estimate = mu1 - mu0
    lo, hi = wald_interval(estimate, se, alpha)
    w1 = np.where(is_t, w, 0.0)
    w0 = w - w1
    n1 = int(np.count_nonzero(is_t))
    return EffectEstimate(
        estimate=estimate,
        se=se,
        ci_low=lo,
        ci_high=hi,
        estimand=estimand,
        method="ipw-hajek" if normalized else "ipw-ht",
        n_treated=n1,
        n_control=n - n1,
        diagnostics={
            "weights": w,
            "mean_treated": mu1,
            "mean_control": mu0,
            "ess_treated": float(w1.sum() ** 2 / (w1 @ w1)),
            "ess_control": float(w0.sum() ** 2 / (w0 @ w0)),
            "influence": influence,
            "se_kind": "propensity known" if logistic is None else "propensity estimated",
        },
    )


def _index_derivative(
    dr: NDArray[np.float64], y: NDArray[np.float64], mu: float, normalized: bool
) -> NDArray[np.float64]:
    """``dg/deta`` of one arm's ``g = r y - mu d``: ``dr y - mu dd``, ``dd = dr`` (Hajek) or 0 (Horvitz-Thompson).

    ``dr`` (the arm's derivatives of its raw weights) is overwritten.
    """
    out = dr * y
    if normalized:
        dr *= mu
        out -= dr
    return out


def _weights(
    is_t: NDArray[np.bool_], e: NDArray[np.float64], estimand: str, normalized: bool
) -> NDArray[np.float64]:
    if estimand == "ate":
        w = np.where(is_t, 1.0 / e, 1.0 / (1.0 - e))
    else:
        w = np.where(is_t, 1.0, e / (1.0 - e))
    return _normalize(w, is_t) if normalized else w


def _normalize(w: NDArray[np.float64], is_t: NDArray[np.bool_]) -> NDArray[np.float64]:
    """Rescale the weights ``w`` in place to mean 1 in each arm (Hajek; ``is_t`` marks the treated); returns ``w``."""
    n1 = np.count_nonzero(is_t)
    w *= np.where(is_t, n1 / w[is_t].sum(), (is_t.size - n1) / w[~is_t].sum())
    return w
