"""scikit-learn-style estimators of the ATE or ATT from (Y, T, X): a propensity model plus PSM, IPW or AIPW.

Each class fits its propensity model on X (default :class:`LogisticPropensity`, paper 003 eq. 32)
and hands the fitted propensities to the estimator function of :mod:`.matching`,
:mod:`.weighting` or :mod:`.doubly_robust`, so the numbers are exactly those of
:func:`~collabcausal.estimators.matching.psm`, :func:`~collabcausal.estimators.weighting.ipw` and
:func:`~collabcausal.estimators.doubly_robust.aipw` on the same propensities. They add what a
scikit-learn or EconML user expects: ``clone``/``get_params``, ``fit(Y, T, X=...)`` returning
self, the estimand (ATE or ATT) as a parameter, ``ate()``/``att()`` and
``ate_interval(alpha=)``/``att_interval(alpha=)`` -> ``(lower, upper)``, ``summary()``, and the
column names of a DataFrame kept in ``feature_names_in_``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from sklearn.base import BaseEstimator, clone

from collabcausal.errors import InputError
from collabcausal.estimators.doubly_robust import aipw
from collabcausal.estimators.matching import psm
from collabcausal.estimators.propensity import LogisticPropensity
from collabcausal.estimators.results import EffectEstimate
from collabcausal.estimators.validation import (
    check_estimand,
    check_features,
    check_is_fitted,
    check_treatment,
    check_vector,
)
from collabcausal.estimators.weighting import ipw

if TYPE_CHECKING:
    import pandas as pd


class _PropensityScoreEstimator(BaseEstimator, ABC):
    """Fit the propensity model, then the effect; EconML-style accessors on top.

    Subclasses implement ``_estimate(y, t, e, X, alpha) -> EffectEstimate``.
    """

    def fit(self, Y: ArrayLike, T: ArrayLike, *, X: ArrayLike) -> _PropensityScoreEstimator:
        """Fit the propensity model on ``X`` and estimate the effect; returns self.

        Parameters
        ----------
        Y, T : array-like of shape (n,)
            Outcomes and treatment (0/1).
        X : array-like or DataFrame of shape (n, m)
            Covariates of the propensity model (and of the outcome models of AIPW).
        """
        check_estimand(self.estimand)
        Xa = check_features(self, X, reset=True)
        t = check_treatment(T, "T", n=Xa.shape[0])
        y = check_vector(Y, "Y", n=Xa.shape[0])
        model = LogisticPropensity() if self.propensity_model is None else self.propensity_model
        self.propensity_model_ = clone(model).fit(Xa, t)
        e = np.asarray(self.propensity_model_.predict_proba(Xa), dtype=float)[:, 1]
        if self.clip is not None:
            e = np.clip(e, self.clip, 1.0 - self.clip)
        self.propensity_ = e
        self._fit_data = (y, t, e, Xa)  # for intervals at other levels
        self.result_ = self._estimate(y, t, e, Xa, 0.05)
        return self

    @abstractmethod
    def _estimate(self, y: NDArray, t: NDArray, e: NDArray, X: NDArray, alpha: float) -> EffectEstimate:
        """The effect from outcomes, treatment, propensities and covariates, interval at level 1 - alpha."""

    def _result(self, estimand: str) -> EffectEstimate:
        check_is_fitted(self, "result_", "fit(Y, T, X=...)")
        if self.result_.estimand != estimand:
            raise InputError(
                f"this {type(self).__name__} estimates the {self.result_.estimand.upper()}, not the "
                f"{estimand.upper()}",
                f"set estimand={estimand!r} and fit again",
            )
        return self.result_

    def _interval(self, estimand: str, alpha: float) -> tuple[float, float]:
        self._result(estimand)
        res = self._estimate(*self._fit_data, alpha)
        if res.ci_low is None:
            raise InputError(
                f"{res.method} has no analytic standard error here (an arm with a single subject)",
                "use the bootstrap (collabcausal.estimators.bootstrap)",
            )
        return float(res.ci_low), float(res.ci_high)

    def ate(self) -> float:
        """The ATE estimate (``estimand="ate"``)."""
        return float(self._result("ate").estimate)

    def att(self) -> float:
        """The ATT estimate (``estimand="att"``)."""
        return float(self._result("att").estimate)

    def ate_interval(self, alpha: float = 0.05) -> tuple[float, float]:
        """``(lower, upper)`` of the ATE at level ``1 - alpha`` (the estimator's analytic interval)."""
        return self._interval("ate", alpha)

    def att_interval(self, alpha: float = 0.05) -> tuple[float, float]:
        """``(lower, upper)`` of the ATT at level ``1 - alpha`` (the estimator's analytic interval)."""
        return self._interval("att", alpha)

    def summary(self, alpha: float = 0.05) -> pd.DataFrame:
        """The estimate as a one-row table: ``point_estimate``, ``stderr``, ``ci_lower``, ``ci_upper``."""
        import pandas as pd

        check_is_fitted(self, "result_", "fit(Y, T, X=...)")
        res = self._estimate(*self._fit_data, alpha)
        row = [res.estimate, *(np.nan if v is None else v for v in (res.se, res.ci_low, res.ci_high))]
        table = pd.DataFrame([row], index=[res.estimand], columns=["point_estimate", "stderr", "ci_lower", "ci_upper"])
        table.index.name = f"{type(self).__name__} ({res.method}, n={res.n_treated + res.n_control}, alpha={alpha:g})"
        return table


class PropensityScoreMatching(_PropensityScoreEstimator):
    """Propensity-score matching with replacement, tied matches averaged (:func:`.matching.psm`).

    Parameters
    ----------
    estimand : {"ate", "att"}, default "ate"
    propensity_model : classifier, optional
        Fitted (a clone) on (X, T); its ``predict_proba(X)[:, 1]`` is the propensity. Default
        :class:`LogisticPropensity` (paper 003, eq. 32).
    clip : float, optional
        Propensities clipped to ``[clip, 1 - clip]``.
    caliper : float, optional
        Maximum propensity distance of a match (:func:`.matching.psm`).

    Attributes
    ----------
    propensity_model_, propensity_ : the fitted model and the propensities, shape (n,)
    result_ : EffectEstimate
        With the Abadie–Imbens standard error and a 95% interval.
    n_features_in_, feature_names_in_ : the covariates seen in ``fit``
    """

    def __init__(
        self,
        estimand: str = "ate",
        propensity_model: Any = None,
        clip: float | None = None,
        caliper: float | None = None,
    ) -> None:
        self.estimand = estimand
        self.propensity_model = propensity_model
        self.clip = clip
        self.caliper = caliper

    def _estimate(self, y: NDArray, t: NDArray, e: NDArray, X: NDArray, alpha: float) -> EffectEstimate:
        return psm(y, t, e, self.estimand, self.caliper, alpha=alpha)


class InverseProbabilityWeighting(_PropensityScoreEstimator):
    """Inverse probability weighting, Hajek or Horvitz–Thompson (:func:`.weighting.ipw`).

    Parameters
    ----------
    estimand : {"ate", "att"}, default "ate"
    propensity_model : classifier, optional
        As in :class:`PropensityScoreMatching`.
    clip : float, optional
        Propensities clipped to ``[clip, 1 - clip]``.
    normalized : bool, default True
        Hajek (True) or Horvitz–Thompson weights.
    """

    def __init__(
        self, estimand: str = "ate", propensity_model: Any = None, clip: float | None = None, normalized: bool = True
    ) -> None:
        self.estimand = estimand
        self.propensity_model = propensity_model
        self.clip = clip
        self.normalized = normalized

    def _estimate(self, y: NDArray, t: NDArray, e: NDArray, X: NDArray, alpha: float) -> EffectEstimate:
        return ipw(y, t, e, self.estimand, self.normalized, alpha=alpha)


class AugmentedIPW(_PropensityScoreEstimator):
    """Doubly robust AIPW (:func:`.doubly_robust.aipw`): propensity and outcome models on X.

    Parameters
    ----------
    estimand : {"ate", "att"}, default "ate"
    propensity_model : classifier, optional
        As in :class:`PropensityScoreMatching`.
    outcome_model : regressor, optional
        Cloned and fitted per arm; default ordinary least squares.
    clip : float, optional
        Propensities clipped to ``[clip, 1 - clip]``.
    """

    def __init__(
        self, estimand: str = "ate", propensity_model: Any = None, outcome_model: Any = None, clip: float | None = None
    ) -> None:
        self.estimand = estimand
        self.propensity_model = propensity_model
        self.outcome_model = outcome_model
        self.clip = clip

    def _estimate(self, y: NDArray, t: NDArray, e: NDArray, X: NDArray, alpha: float) -> EffectEstimate:
        return aipw(y, t, e, X, self.estimand, self.outcome_model, alpha=alpha)
