"""Propensity-score matching: 1:1 nearest neighbour on |e_k - e_l|, with replacement.

Paper 003 (section 3 and DESIGN.md "Estimators"): the unobserved potential outcome of a subject is
the observed outcome of its nearest neighbour in the other arm on the propensity score,

    ATE = (1/n) sum_k (Y^_k(1) - Y^_k(0)),        ATT = (1/n1) sum_{T_k = 1} (Y_k - Y_match(k)).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from collabcausal.errors import InputError
from collabcausal.estimators.results import EffectEstimate, wald_interval
from collabcausal.estimators.validation import check_estimand, check_propensity, check_treatment, check_vector


def nearest_neighbor_match(query_scores: ArrayLike, pool_scores: ArrayLike) -> NDArray[np.intp]:
    """For each query score, the index into ``pool_scores`` of the nearest pool score.

    O((n_query + n_pool) log(n_query + n_pool)): the pool and the queries are sorted once, and the
    sorted queries located in the sorted pool by binary search (``np.searchsorted``; sorted
    queries keep it cache-friendly); only the two pool scores around the insertion point can be
    nearest.

    Tie rule (deterministic): at equal distance the candidate with the smaller pool score wins;
    among equal pool scores the one with the lowest original index wins (the minimum index of each
    run of equal sorted scores, so the result does not depend on the sorting algorithm).

    Parameters
    ----------
    query_scores : array-like of shape (n_query,)
    pool_scores : array-like of shape (n_pool,), n_pool >= 1

    Returns
    -------
    ndarray of int, shape (n_query,)
    """
    q = check_vector(query_scores, "query_scores")
    pool = check_vector(pool_scores, "pool_scores")
    if pool.size == 0:
        raise InputError("pool_scores is empty: there is nobody to match to", "pass at least one pool score")
    order = np.argsort(pool)
    s = pool[order]
    new_run = np.empty(s.size, dtype=bool)
    new_run[0] = True
    np.not_equal(s[1:], s[:-1], out=new_run[1:])
    run_id = np.cumsum(new_run) - 1
    run_min = np.minimum.reduceat(order, np.flatnonzero(new_run))  # lowest original index per score
    q_order = np.argsort(q)
    qs = q[q_order]
    right = np.searchsorted(s, qs, side="left")  # s[right - 1] < q <= s[right]
    left = np.maximum(right - 1, 0)
    right = np.minimum(right, s.size - 1)  # beyond either end, left == right
    take_right = (s[right] - qs) < (qs - s[left])
    out = np.empty(q.size, dtype=np.intp)
    out[q_order] = run_min[run_id[np.where(take_right, right, left)]]
    return out


def psm(
    y: ArrayLike,
    t: ArrayLike,
    e: ArrayLike,
    estimand: str = "ate",
    caliper: float | None = None,
    *,
    compute_se: bool = True,
    alpha: float = 0.05,
) -> EffectEstimate:
    """Propensity-score matching estimate of the ATE or ATT (paper 003; DESIGN.md "Estimators").

    Each subject (ATE) or each treated subject (ATT) is matched 1:1, with replacement, to the
    subject of the other arm with the nearest propensity score (ties: :func:`nearest_neighbor_match`).

    Parameters
    ----------
    y : array-like of shape (n,)
        Outcomes.
    t : array-like of shape (n,)
        Treatment, coded 0/1.
    e : array-like of shape (n,)
        Propensity scores in (0, 1).
    estimand : {"ate", "att"}
    caliper : float or None
        Maximum |e_k - e_match| on the propensity scale; subjects without a match that close are
        dropped from the estimate (counted in ``diagnostics["n_unmatched"]``). None: no caliper.
    compute_se : bool, default True
        Compute the Abadie–Imbens standard error (False skips it, e.g. inside a bootstrap loop).
    alpha : float, default 0.05
        Level of the normal interval.

    Returns
    -------
    EffectEstimate
        ``se`` is the Abadie–Imbens (2006) standard error with the propensity treated as known
        (see :func:`_abadie_imbens_se`; None when an arm has a single subject or with
        ``compute_se=False``), with a normal
        interval; the paper's analyses use the bootstrap instead. ``n_treated``/``n_control`` are
        the arm sizes given.
        Diagnostics: ``match_weights`` (per subject, the weight in the matched sample used for
        balance: ATT, treated 1 and control the number of times used; ATE, 1 + the number of
        times used as a match; 0 for dropped subjects), ``matched_index`` (per subject, the index
        of its match, -1 when dropped or not matched), ``n_unmatched``, ``n_matched_controls``
        (distinct controls used) and ``n_matched_treated``.
    """
    estimand = check_estimand(estimand)
    t = check_treatment(t)
    n = t.size
    y = check_vector(y, "y", n=n)
    e = check_propensity(e, "propensity", n=n)
    if caliper is not None and not (np.isfinite(caliper) and caliper > 0.0):
        raise InputError(f"caliper must be a finite number > 0, got {caliper!r}", "pass e.g. caliper=0.05 or None")
    treated = np.flatnonzero(t == 1)
    control = np.flatnonzero(t == 0)
    query = treated if estimand == "att" else np.arange(n)
    partner = np.empty(query.size, dtype=np.intp)
    q_treated = t[query] == 1
    partner[q_treated] = control[nearest_neighbor_match(e[query[q_treated]], e[control])]
    partner[~q_treated] = treated[nearest_neighbor_match(e[query[~q_treated]], e[treated])]
    kept = np.ones(query.size, dtype=bool) if caliper is None else np.abs(e[query] - e[partner]) <= caliper
    if not kept.any():
        raise InputError(
            f"no subject has a match within the caliper {caliper:g}",
            "widen the caliper or check the overlap of the propensity scores",
        )
    q, p = query[kept], partner[kept]
    diff = np.where(t[q] == 1, y[q] - y[p], y[p] - y[q])  # Y^(1) - Y^(0) of each query subject
    weights = np.bincount(p, minlength=n).astype(np.float64)
    weights[q] += 1.0
    matched_index = np.full(n, -1, dtype=np.intp)
    matched_index[q] = p
    estimate = float(diff.mean())
    se = _abadie_imbens_se(y, t, e, p, diff, estimate, estimand) if compute_se else None
    lo, hi = (None, None) if se is None else wald_interval(estimate, se, alpha)
    return EffectEstimate(
        estimate=estimate,
        se=se,
        ci_low=lo,
        ci_high=hi,
        estimand=estimand,
        method="psm",
        n_treated=int(treated.size),
        n_control=int(control.size),
        diagnostics={
            "match_weights": weights,
            "matched_index": matched_index,
            "n_unmatched": int(query.size - q.size),
            "n_matched_treated": int(np.count_nonzero(weights[treated])),
            "n_matched_controls": int(np.count_nonzero(weights[control])),
            "caliper": caliper,
        },
    )


def _abadie_imbens_se(
    y: NDArray[np.float64],
    t: NDArray[np.int8],
    e: NDArray[np.float64],
    partner: NDArray[np.intp],
    diff: NDArray[np.float64],
    estimate: float,
    estimand: str,
) -> float | None:
    """Abadie & Imbens (2006, Econometrica 74(1), Theorem 7) variance of 1:1 matching, with replacement.

    With K_k the number of times subject k is used as a match and sigma^2_k its conditional
    outcome variance (estimated by :func:`_within_arm_variance`), over the N kept query subjects::

        ATE: V = (1/N^2) [sum (Y^_k(1) - Y^_k(0) - ATE)^2 + sum_k (K_k^2 + K_k) sigma^2_k]
        ATT: V = (1/N1^2) [sum_{T=1} (Y_k - Y_match(k) - ATT)^2 + sum_{T=0} K_k (K_k - 1) sigma^2_k]

    The propensity is treated as known (the correction of Abadie & Imbens 2016 for an estimated
    propensity is not applied). None when an arm has a single subject.
    """
    uses = np.bincount(partner, minlength=t.size).astype(np.float64)
    extra = uses * (uses + 1.0) if estimand == "ate" else np.where(t == 0, uses * (uses - 1.0), 0.0)
    involved = extra > 0.0
    sigma2 = _within_arm_variance(y, t, e)
    if np.isnan(sigma2[involved]).any():
        return None
    var = (np.sum((diff - estimate) ** 2) + extra[involved] @ sigma2[involved]) / diff.size**2
    return float(np.sqrt(var))


def _within_arm_variance(y: NDArray[np.float64], t: NDArray[np.int8], e: NDArray[np.float64]) -> NDArray[np.float64]:
    """sigma^2_k = (Y_k - Y_j)^2 / 2, j the nearest other subject of k's arm on e (Abadie & Imbens 2006, J = 1).

    Ties go to the smaller score; NaN for a subject alone in its arm.
    """
    out = np.full(t.size, np.nan)
    for arm in (0, 1):
        idx = np.flatnonzero(t == arm)
        if idx.size < 2:
            continue
        idx = idx[np.argsort(e[idx], kind="stable")]
        s, ys = e[idx], y[idx]
        gaps = np.diff(s)
        d_left = np.r_[np.inf, gaps]
        d_right = np.r_[gaps, np.inf]
        pos = np.arange(idx.size)
        neighbour = np.where(d_right < d_left, pos + 1, pos - 1)
        out[idx] = 0.5 * (ys - ys[neighbour]) ** 2
    return out
