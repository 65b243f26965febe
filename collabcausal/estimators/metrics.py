"""Accuracy metrics for heterogeneous treatment effects."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from collabcausal.estimators.validation import check_vector


def pehe(tau_true: ArrayLike, tau_hat: ArrayLike) -> float:
    """Precision in estimating heterogeneous effects: sqrt(mean((tau_hat - tau)^2)).

    Hill (2011); the root form used by paper 001 (eps-ADUM, section 5) and paper 004.
    """
    t = check_vector(tau_true, "tau_true")
    h = check_vector(tau_hat, "tau_hat", n=t.size)
    return float(np.sqrt(np.mean((h - t) ** 2)))


def uplift_curve(y: ArrayLike, t: ArrayLike, score: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """The uplift curve of a ranking (Rzepakowski & Jaroszewicz 2010; paper 001, section 1.2.2).

    Subjects are sorted by decreasing ``score``; after targeting the first k of them the curve is
    ``(R_T(k)/N_T(k) - R_C(k)/N_C(k)) * k``, with R the summed outcomes and N the counts of treated
    (T) and control (C) subjects among the first k (an arm not yet seen contributes 0). Ties in
    ``score`` are broken by input order.

    Returns
    -------
    k : ndarray of shape (n + 1,)
        0, 1, ..., n subjects targeted.
    uplift : ndarray of shape (n + 1,)
        The curve, 0 at k = 0; its last value is n times the difference in arm means.
    """
    out = check_vector(y, "y")
    treat = check_vector(t, "t", n=out.size)
    s = check_vector(score, "score", n=out.size)
    order = np.argsort(-s, kind="stable")
    yt, tt = out[order], treat[order]
    n_t, n_c = np.cumsum(tt), np.cumsum(1.0 - tt)
    r_t, r_c = np.cumsum(yt * tt), np.cumsum(yt * (1.0 - tt))
    mean_t = np.divide(r_t, n_t, out=np.zeros_like(r_t), where=n_t > 0)
    mean_c = np.divide(r_c, n_c, out=np.zeros_like(r_c), where=n_c > 0)
    k = np.arange(out.size + 1, dtype=np.float64)
    return k, np.concatenate([[0.0], (mean_t - mean_c) * k[1:]])


def auuc(y: ArrayLike, t: ArrayLike, score: ArrayLike, *, normalize: bool = True) -> float:
    """Area under the uplift curve (Jaskowski & Jaroszewicz 2012), trapezoidal rule.

    With ``normalize`` (default) the area is divided by n^2, i.e. computed on the axes
    (fraction targeted, uplift per subject), so it is comparable across sample sizes.
    """
    k, curve = uplift_curve(y, t, score)
    area = float(np.sum((curve[1:] + curve[:-1]) / 2.0))
    n = k[-1]
    return area / n**2 if normalize else area
