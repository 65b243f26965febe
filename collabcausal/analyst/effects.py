"""Propensity scores and effect estimates on any feature matrix.

One path serves every setting: the collaborative representation X^ of a DC-QE study and, in
simulations, the raw covariates of the centralized (CA) and individual (IA) analyses
(paper 003, section 5.1: logistic regression on [1, features], eq. 32).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from collabcausal.errors import InputError
from collabcausal.estimators.doubly_robust import aipw
from collabcausal.estimators.matching import psm
from collabcausal.estimators.propensity import LogisticPropensity
from collabcausal.estimators.results import EffectEstimate
from collabcausal.estimators.sandwich import LogisticNuisance
from collabcausal.estimators.validation import check_features, check_treatment, check_vector
from collabcausal.estimators.weighting import ipw

ESTIMATORS: tuple[str, ...] = ("psm", "ipw", "aipw")
BALANCED_ESTIMATORS: frozenset[str] = frozenset({"psm", "ipw"})
"""The estimators that define a balanced sample (:meth:`EffectBundle.balance_weights` is not None)."""


@dataclass(frozen=True, eq=False)
class EffectBundle:
    """Propensity scores and one estimate per requested estimator."""

    propensity: NDArray[np.float64]
    estimates: dict[str, EffectEstimate]

    def balance_weights(self, estimator: str) -> NDArray[np.float64] | None:
        """Weights defining the estimator's balanced sample (PSM match counts, IPW weights)."""
        diag = self.estimates[estimator].diagnostics
        for key in ("match_weights", "weights"):
            if key in diag:
                return np.asarray(diag[key], dtype=np.float64)
        return None


def check_estimators(names: Sequence[str]) -> tuple[str, ...]:
    """Validate estimator names."""
    names = tuple(str(n).lower() for n in names)
    unknown = [n for n in names if n not in ESTIMATORS]
    if unknown or not names:
        raise InputError(
            f"unknown estimator {unknown[0] if unknown else '(none)'!r}", f"use some of {list(ESTIMATORS)}"
        )
    return names


def estimate_effects(
    features: NDArray[np.float64],
    treatment: NDArray[np.int8],
    outcome: NDArray[np.float64],
    *,
    estimand: str = "ate",
    estimators: Sequence[str] = ESTIMATORS,
    clip: tuple[float, float] | None = None,
    analytic_se: bool = True,
    start_logit: NDArray[np.float64] | None = None,
) -> EffectBundle:
    """Fit the propensity model on ``features`` and run the requested estimators.

    Parameters
    ----------
    features : ndarray (n, k)
        X^ (DC-QE) or raw covariates (CA / IA).
    treatment, outcome : ndarray (n,)
    estimand : {"ate", "att"}
    estimators : sequence of {"psm", "ipw", "aipw"}
        DC-QE(PSM), DC-QE(IPW) (normalized weights) and AIPW with linear outcome models on the
        same features (a doubly robust step beyond paper 003).
    clip : (low, high), optional
        Clip propensities (none by default, as in the paper).
    analytic_se : bool
        Compute the analytic standard errors with the propensity's estimation accounted for
        (PSM: Abadie-Imbens 2006 with the 2016 correction; IPW and AIPW: the stacked sandwich).
        False (inside a bootstrap, where they go unused) skips PSM's and AIPW's (and their
        influence values, :mod:`~collabcausal.estimators.intervals`' BCa input) and leaves IPW's
        with the propensity treated as known. With ``clip`` the propensity is treated as known.
    start_logit : ndarray (n,), optional
        A guess of the propensity logits (a bootstrap resample's full-sample logits,
        :func:`~collabcausal.analyst.dcqe.resampled_logits`) for Newton to start from: fewer
        iterations, the same fit (:meth:`LogisticPropensity.fit`).
    """
    # the inputs are checked once here, and the estimators told so (check_input=False)
    model = LogisticPropensity(clip=clip)
    X = check_features(model, features, reset=True)  # the checks and bookkeeping of the model's fit
    t = check_treatment(treatment, n=X.shape[0])
    y = check_vector(outcome, "y", n=t.size)
    start = None if start_logit is None else check_vector(start_logit, "start_logit", n=t.size)
    e = model.fit(X, t, start_logit=start, check_input=False).predict_propensity(X, check_input=False)
    # one propensity nuisance (design, information) serves every estimator's standard error
    X_e = LogisticNuisance(X, t, e) if analytic_se and clip is None else None
    run = {
        "psm": lambda: psm(y, t, e, estimand=estimand, compute_se=analytic_se, X_propensity=X_e, check_input=False),
        "ipw": lambda: ipw(y, t, e, estimand=estimand, normalized=True, X_propensity=X_e, check_input=False),
        "aipw": lambda: aipw(
            y, t, e, X, estimand=estimand, X_propensity=X_e, compute_se=analytic_se, check_input=False
        ),
    }
    return EffectBundle(e, {name: run[name]() for name in check_estimators(estimators)})
