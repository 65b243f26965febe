"""Input checks shared by every estimator: call these at the door, once.

Each check returns a clean float64 (or int8 for treatments) array or raises
:class:`collabcausal.errors.InputError` with a one-line message naming the problem and the fix.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from collabcausal.errors import InputError

Estimand = Literal["ate", "att"]
ESTIMANDS: tuple[str, ...] = ("ate", "att")


def check_matrix(X: ArrayLike, name: str = "X", *, n_rows: int | None = None) -> NDArray[np.float64]:
    """A finite 2-D float array (a 1-D input becomes one column)."""
    arr = np.asarray(X, dtype=np.float64)
    if arr.ndim == 1:
        arr = arr[:, None]
    if arr.ndim != 2:
        raise InputError(f"{name} has {arr.ndim} dimensions", "pass a 2-D array (subjects x covariates)")
    if n_rows is not None and arr.shape[0] != n_rows:
        raise InputError(
            f"{name} has {arr.shape[0]} rows but {n_rows} were expected",
            "pass arrays with one row per subject, in the same order",
        )
    if not np.isfinite(arr).all():
        raise InputError(f"{name} contains NaN or infinite values", "impute or drop them first")
    return arr


def check_vector(y: ArrayLike, name: str = "y", *, n: int | None = None) -> NDArray[np.float64]:
    """A finite 1-D float array of length ``n`` (when given)."""
    arr = np.asarray(y, dtype=np.float64)
    if arr.ndim == 2 and arr.shape[1] == 1:
        arr = arr[:, 0]
    if arr.ndim != 1:
        raise InputError(f"{name} must be one-dimensional, got shape {arr.shape}", "pass a 1-D array")
    if n is not None and arr.shape[0] != n:
        raise InputError(
            f"{name} has {arr.shape[0]} entries but {n} were expected",
            "pass arrays with one entry per subject, in the same order",
        )
    if not np.isfinite(arr).all():
        raise InputError(f"{name} contains NaN or infinite values", "impute or drop them first")
    return arr


def check_treatment(t: ArrayLike, name: str = "treatment", *, n: int | None = None) -> NDArray[np.int8]:
    """A binary treatment vector coded 0/1 with both arms present."""
    arr = check_vector(t, name, n=n)
    bad = (arr != 0.0) & (arr != 1.0)
    if bad.any():
        seen = np.unique(arr[bad])[:5]
        raise InputError(
            f"{name} must be coded 0/1, found {', '.join(f'{v:g}' for v in seen)}",
            "recode the treatment column to 0 (control) and 1 (treated)",
        )
    out = arr.astype(np.int8)
    if out.min() == out.max():
        raise InputError(
            f"{name} has only one arm ({int(out[0])}) among {out.size} subjects",
            "both treated and control subjects are needed to estimate an effect",
        )
    return out


def check_propensity(e: ArrayLike, name: str = "propensity", *, n: int | None = None) -> NDArray[np.float64]:
    """Propensity scores strictly inside (0, 1)."""
    arr = check_vector(e, name, n=n)
    if ((arr <= 0.0) | (arr >= 1.0)).any():
        raise InputError(
            f"{name} has values outside the open interval (0, 1)",
            "clip the propensity scores (e.g. clip=(0.01, 0.99)) or check the model",
        )
    return arr


def check_estimand(estimand: str) -> Estimand:
    """'ate' or 'att' (case-insensitive)."""
    key = str(estimand).lower()
    if key not in ESTIMANDS:
        raise InputError(f"unknown estimand {estimand!r}", "use 'ate' or 'att'")
    return key  # type: ignore[return-value]


def check_epsilon(epsilon: float, name: str = "epsilon") -> float:
    """A privacy parameter epsilon: finite and > 0."""
    eps = float(epsilon)
    if not np.isfinite(eps) or eps <= 0.0:
        raise InputError(f"{name} must be a finite number > 0, got {epsilon!r}", "pass a positive epsilon")
    return eps


def check_delta(delta: float, name: str = "delta") -> float:
    """A privacy parameter delta in [0, 1)."""
    d = float(delta)
    if not np.isfinite(d) or d < 0.0 or d >= 1.0:
        raise InputError(f"{name} must lie in [0, 1), got {delta!r}", "pass e.g. delta=1e-5, or 0 for pure DP")
    return d


def check_bounds(bounds: tuple[float, float], name: str = "bounds") -> tuple[float, float]:
    """A finite interval (lo, hi) with lo < hi."""
    try:
        lo, hi = (float(b) for b in bounds)
    except (TypeError, ValueError) as exc:
        raise InputError(f"{name} must be a pair (low, high), got {bounds!r}", "pass two numbers") from exc
    if not (np.isfinite(lo) and np.isfinite(hi)) or lo >= hi:
        raise InputError(f"{name} must satisfy low < high (finite), got ({lo}, {hi})", "fix the declared bounds")
    return lo, hi
