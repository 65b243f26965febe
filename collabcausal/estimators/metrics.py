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
