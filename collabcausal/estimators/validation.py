"""Input checks shared by every estimator: call these at the door, once.

Each check returns a clean float64 (or int8 for treatments) array or raises
:class:`collabcausal.errors.InputError` with a one-line message naming the problem and the fix.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import sparse
from sklearn.exceptions import DataConversionWarning
from sklearn.exceptions import NotFittedError as SklearnNotFittedError
from sklearn.utils.multiclass import type_of_target
from sklearn.utils.validation import validate_data

from collabcausal.errors import InputError

if TYPE_CHECKING:
    from sklearn.base import BaseEstimator

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


class NotFittedError(InputError, SklearnNotFittedError):
    """An estimator was used before ``fit``: an :class:`InputError` that is also scikit-learn's NotFittedError."""


def check_is_fitted(estimator: BaseEstimator, attribute: str, fit_call: str = "fit(...)") -> None:
    """Raise :class:`NotFittedError` unless ``estimator`` has the fitted ``attribute``."""
    if not hasattr(estimator, attribute):
        raise NotFittedError(f"this {type(estimator).__name__} is not fitted yet", f"call {fit_call} first")


def check_features(estimator: BaseEstimator, X: ArrayLike, *, reset: bool) -> NDArray[np.float64]:
    """The covariates of a scikit-learn-style estimator, checked at the door; a float64 matrix.

    Beyond :func:`check_matrix`, X must be dense, real and 2-D (subjects x covariates, at least one
    of each), and scikit-learn's bookkeeping applies: ``reset=True`` (in ``fit``) records
    ``n_features_in_`` and, for a DataFrame with string column names, ``feature_names_in_``;
    ``reset=False`` (in ``predict``/``effect``) refuses other numbers or names of columns. The
    messages keep scikit-learn's wording, which its estimator checks look for.
    """
    if sparse.issparse(X):
        raise InputError("X is a sparse matrix: sparse input is not supported", "pass a dense array (X.toarray())")
    raw = np.asarray(X)
    if np.iscomplexobj(raw):
        raise InputError("X has complex values: Complex data not supported", "pass real numbers")
    if raw.ndim != 2:
        raise InputError(
            f"X must be 2-D (subjects x covariates), got {raw.ndim} dimension(s)",
            "Reshape your data, e.g. X.reshape(-1, 1) for a single covariate",
        )
    if raw.shape[1] == 0:
        raise InputError(f"0 feature(s) (shape={raw.shape}) while a minimum of 1 is required.", "pass covariates")
    if raw.shape[0] == 0:
        raise InputError(f"0 sample(s) (shape={raw.shape}) while a minimum of 1 is required.", "pass subjects")
    arr = check_matrix(raw, "X")
    if not hasattr(X, "columns") and not hasattr(estimator, "feature_names_in_"):
        # no column names on either side: only the count is bookkept (scikit-learn's check, minus its cost)
        if reset:
            estimator.n_features_in_ = arr.shape[1]
            return arr
        if getattr(estimator, "n_features_in_", arr.shape[1]) == arr.shape[1]:
            return arr
    try:
        validate_data(estimator, X if hasattr(X, "columns") else arr, skip_check_array=True, reset=reset)
    except ValueError as exc:
        raise InputError(str(exc).strip(), "pass the same covariates, in the same order, as in fit") from exc
    return arr


def check_vector(y: ArrayLike, name: str = "y", *, n: int | None = None) -> NDArray[np.float64]:
    """A finite 1-D float array of length ``n`` (when given)."""
    arr = _one_per_subject(np.asarray(y, dtype=np.float64), name, n)
    if not np.isfinite(arr).all():
        raise InputError(f"{name} contains NaN or infinite values", "impute or drop them first")
    return arr


def check_weights(w: ArrayLike, name: str = "weights", *, n: int | None = None) -> NDArray[np.float64]:
    """Finite non-negative weights, one per subject (:func:`check_vector`)."""
    arr = check_vector(w, name, n=n)
    if (arr < 0.0).any():
        raise InputError(f"{name} contain negative values", "pass non-negative weights")
    return arr


def _one_per_subject(arr: NDArray, name: str, n: int | None) -> NDArray:
    """``arr`` as a 1-D array (an (n, 1) column is read as its ravel) with ``n`` entries when given."""
    if arr.ndim == 2 and arr.shape[1] == 1:
        arr = arr[:, 0]
    if arr.ndim != 1:
        raise InputError(f"{name} must be one-dimensional, got shape {arr.shape}", "pass a 1-D array")
    if n is not None and arr.shape[0] != n:
        raise InputError(
            f"{name} has {arr.shape[0]} entries but {n} were expected",
            "pass arrays with one entry per subject, in the same order",
        )
    return arr


def check_treatment(
    t: ArrayLike, name: str = "treatment", *, n: int | None = None, both_arms: bool = True
) -> NDArray[np.int8]:
    """A binary treatment vector coded 0/1 with both arms present (``both_arms=False``: a block of
    a table's rows, which may hold one arm). Integer and boolean input is checked as it is (no
    float copy: a treatment is checked by every estimator it reaches)."""
    raw = np.asarray(t)
    if raw.dtype.kind in "biu":  # integers: their least and largest values decide the coding and the arms
        arr = _one_per_subject(raw, name, n)
        coded = arr.size == 0 or (arr.min() >= 0 and arr.max() <= 1)
    else:
        arr = check_vector(raw, name, n=n)
        coded = bool(((arr == 0.0) | (arr == 1.0)).all())
    if not coded:
        seen = np.unique(arr[(arr != 0) & (arr != 1)])[:5]
        raise InputError(
            f"{name} must be coded 0/1, found {', '.join(f'{v:g}' for v in seen)}",
            "recode the treatment column to 0 (control) and 1 (treated)",
        )
    out = arr.astype(np.int8)
    if both_arms and out.size == 0:
        raise InputError(f"{name} has no subjects", "pass at least one treated and one control subject")
    if both_arms and out.min() == out.max():
        raise InputError(
            f"{name} has only one arm ({int(out[0])}) among {out.size} subjects",
            "both treated and control subjects are needed to estimate an effect",
        )
    return out


def check_binary_labels(y: ArrayLike, name: str = "y", *, n: int | None = None) -> tuple[NDArray, NDArray[np.float64]]:
    """A classifier's two-label target: ``(classes, indicator)``, ``indicator`` 1.0 where ``y == classes[1]``.

    Any two labels are accepted, as scikit-learn classifiers accept them (sorted, the larger is the
    "positive" class); one label, more than two, or a continuous target are refused.
    """
    if y is None:
        raise InputError(f"{name} is missing: fit requires y to be passed, but the target y is None", "pass it")
    raw = np.asarray(y)
    if raw.ndim == 2 and raw.shape[1] == 1:
        warnings.warn(
            f"A column-vector {name} was passed when a 1d array was expected; it is read as {name}.ravel()",
            DataConversionWarning,
            stacklevel=3,
        )
    raw = _one_per_subject(raw, name, n)
    if raw.dtype.kind in "fc" and not np.isfinite(raw).all():
        raise InputError(f"{name} contains NaN or infinite values", "impute or drop them first")
    classes = np.unique(raw) if raw.dtype.kind in "biuf" else None
    two_integers = classes is not None and classes.size == 2 and np.array_equal(classes, np.floor(classes))
    if not two_integers:  # two integer-valued numbers are what scikit-learn's type_of_target calls binary
        kind = type_of_target(raw)
        if kind not in ("binary", "multiclass"):
            raise InputError(f"Unknown label type: {name} is {kind}, not two arms", "code the treatment 0/1")
        classes = np.unique(raw)
    if classes.size != 2:
        raise InputError(
            f"{name} has {classes.size} class(es) ({', '.join(map(str, classes[:5]))}): Only binary classification "
            "is supported",
            "code the treatment 0 (control) / 1 (treated), with both arms present",
        )
    return classes, (raw == classes[1]).astype(np.float64)


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


def is_finite_number(value: object) -> bool:
    """A number, not a bool, whose float is finite (a JSON integer of 400 digits has none: refused, not raised).

    For parameters a request carries, checked before anything is charged.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def number_in_range(value: object, low: float, high: float) -> bool:
    """A number, not a bool, in ``[low, high]`` (a 400-digit integer is refused, not raised:
    :func:`is_finite_number`)."""
    return is_finite_number(value) and low <= value <= high  # type: ignore[operator]


def refuse_unknown_keys(spec: Mapping[str, object], accepted: Collection[str], what: str) -> None:
    """Refuse a specification carrying a key its parser does not apply.

    A nested specification of a request (a design, a nuisance model, a partition, a ``secagg`` round, ...)
    is read by its own parser, which applies the keys it knows: an option from a newer protocol, a
    misspelling or a claimed bound would otherwise be silently left aside and the request run as
    something other than what was meant (docs/protocol.md, "Parameters a party does not apply"). Call
    it on the specification as received, before anything is charged or any row is read.

    Parameters
    ----------
    spec : mapping
        The specification as received (its keys are checked, its values are not read).
    accepted : collection of str
        The keys the parser applies: those its ``to_spec`` emits.
    what : str
        The specification, as the message names it (e.g. ``"dp_effects projection"``).

    Raises
    ------
    InputError
        One line naming the unexpected keys (sorted, quoted: a key holding a line break stays on one
        line) and the accepted ones.
    """
    unknown = sorted((key for key in spec if key not in accepted), key=str)
    if unknown:
        one = len(unknown) == 1
        raise InputError(
            f"{what} option{'' if one else 's'} {', '.join(repr(k) for k in unknown)} "
            f"{'is not one' if one else 'are not ones'} this party applies ({', '.join(sorted(accepted))})",
            f"drop {'it' if one else 'them'}, or run the analyst's collabcausal version",
        )


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
