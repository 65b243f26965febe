"""The result of an effect estimate: a small frozen dataclass, plus the normal (Wald) interval."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np
from scipy.special import ndtri

from collabcausal.errors import InputError


@dataclass(frozen=True)
class EffectEstimate:
    """A treatment-effect estimate with its uncertainty and diagnostics.

    Attributes
    ----------
    estimate : float
        The point estimate of the effect.
    se : float or None
        Standard error, or None when the estimator has none (e.g. matching; use the bootstrap).
    ci_low, ci_high : float or None
        Confidence interval bounds, or None.
    estimand : str
        ``"ate"`` or ``"att"``.
    method : str
        Name of the estimator, e.g. ``"psm"``, ``"ipw-hajek"``, ``"aipw"``.
    n_treated, n_control : int
        Number of treated and control subjects given to the estimator.
    diagnostics : Mapping[str, Any]
        Estimator-specific extras (weights, match counts, ...). Stored as a read-only mapping.
    """

    estimate: float
    se: float | None
    ci_low: float | None
    ci_high: float | None
    estimand: str
    method: str
    n_treated: int
    n_control: int
    diagnostics: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "diagnostics", MappingProxyType(dict(self.diagnostics)))

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict: arrays become lists, numpy scalars Python numbers, NaN/inf None."""
        return {
            "estimate": _jsonable(self.estimate),
            "se": _jsonable(self.se),
            "ci_low": _jsonable(self.ci_low),
            "ci_high": _jsonable(self.ci_high),
            "estimand": self.estimand,
            "method": self.method,
            "n_treated": int(self.n_treated),
            "n_control": int(self.n_control),
            "diagnostics": _jsonable(self.diagnostics),
        }


def wald_interval(estimate: float, se: float, alpha: float = 0.05) -> tuple[float, float]:
    """The two-sided normal interval ``estimate -/+ z_{1-alpha/2} * se``."""
    if not 0.0 < alpha < 1.0:
        raise InputError(f"alpha must lie in (0, 1), got {alpha!r}", "pass e.g. alpha=0.05 for a 95% interval")
    half = float(ndtri(1.0 - alpha / 2.0)) * se
    return estimate - half, estimate + half


def _jsonable(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, np.ndarray):
        return [_jsonable(v) for v in value.tolist()]
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value
