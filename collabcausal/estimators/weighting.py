"""Inverse probability weighting (IPW) for the ATE and the ATT, Horvitz–Thompson or Hajek.

Weights (paper 003 section 3; DESIGN.md "Estimators"): for the ATE 1/e for the treated and
1/(1-e) for the controls; for the ATT 1 for the treated and e/(1-e) for the controls.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from collabcausal.estimators.results import EffectEstimate, wald_interval
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
    return _weights(t, e, estimand, normalized)


def ipw(
    y: ArrayLike,
    t: ArrayLike,
    e: ArrayLike,
    estimand: str = "ate",
    normalized: bool = True,
    *,
    alpha: float = 0.05,
) -> EffectEstimate:
    """IPW estimate of the ATE or ATT: the difference of weighted arm means.

    Each arm mean is ``mu_a = sum_k w_k y_k / sum_k d_k`` over the subjects of arm a, with the
    weights ``w`` of :func:`ipw_weights` and the denominator ``d = w`` (Hajek, ``normalized=True``)
    or, for Horvitz–Thompson, ``d = 1`` over all n subjects (ATE) or the treated indicator (ATT,
    so the denominator is n1). The estimate is ``mu_1 - mu_0``.

    Standard error from the influence function with the propensity treated as known:
    ``psi_k = sum_a (w_ak y_k - mu_a d_ak) / mean(d_a)`` (with the sign of the arm), and
    ``se = sqrt(sum_k psi_k^2) / n``. It ignores the estimation of e, which for an
    estimated logistic propensity makes it conservative for the ATE (Lunceford & Davidian 2004);
    use the bootstrap for the paper's analyses. The interval is the normal (Wald) interval.

    Returns
    -------
    EffectEstimate
        method ``"ipw-hajek"`` or ``"ipw-ht"``; diagnostics ``weights`` (the weights of
        :func:`ipw_weights` used), ``mean_treated``/``mean_control`` (the weighted arm means) and
        ``ess_treated``/``ess_control`` (Kish effective sample sizes).
    """
    estimand = check_estimand(estimand)
    t = check_treatment(t)
    n = t.size
    y = check_vector(y, "y", n=n)
    e = check_propensity(e, "propensity", n=n)
    w = _weights(t, e, estimand, normalized)
    is_t = t == 1
    w1 = np.where(is_t, w, 0.0)
    w0 = w - w1
    if normalized:
        d1, d0 = w1, w0
    else:
        d1 = is_t.astype(np.float64) if estimand == "att" else np.ones(n)
        d0 = d1
    mu1 = float(w1 @ y / d1.sum())
    mu0 = float(w0 @ y / d0.sum())
    psi = (w1 * y - mu1 * d1) / d1.mean() - (w0 * y - mu0 * d0) / d0.mean()
    se = float(np.sqrt(psi @ psi) / n)
    estimate = mu1 - mu0
    lo, hi = wald_interval(estimate, se, alpha)
    return EffectEstimate(
        estimate=estimate,
        se=se,
        ci_low=lo,
        ci_high=hi,
        estimand=estimand,
        method="ipw-hajek" if normalized else "ipw-ht",
        n_treated=int(is_t.sum()),
        n_control=int(n - is_t.sum()),
        diagnostics={
            "weights": w,
            "mean_treated": mu1,
            "mean_control": mu0,
            "ess_treated": float(w1.sum() ** 2 / (w1 @ w1)),
            "ess_control": float(w0.sum() ** 2 / (w0 @ w0)),
        },
    )


def _weights(t: NDArray[np.int8], e: NDArray[np.float64], estimand: str, normalized: bool) -> NDArray[np.float64]:
    is_t = t == 1
    if estimand == "ate":
        w = np.where(is_t, 1.0 / e, 1.0 / (1.0 - e))
    else:
        w = np.where(is_t, 1.0, e / (1.0 - e))
    if normalized:
        n1 = np.count_nonzero(is_t)
        w[is_t] *= n1 / w[is_t].sum()
        w[~is_t] *= (t.size - n1) / w[~is_t].sum()
    return w
