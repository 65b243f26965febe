"""Noise mechanisms: Laplace, analytic Gaussian, discrete Laplace / Gaussian, quantiles, clipping.

The mechanisms take the sensitivity they are given; the project's one neighbouring relation is
substitution of one record with n public (docs/differential-privacy.md), and callers derive their
sensitivities for it. Each mechanism computes its noise scale in exactly one function and then draws:

* ``rng=None`` (default; the only mode a party uses): OpenDP 0.16's samplers. The true values go
  into an OpenDP measurement and the noisy values come out; OpenDP samples exactly on a fine
  lattice from OS entropy, which resists the floating-point attacks of Mironov (2012).
* ``rng=<numpy Generator>``: the same distributions from numpy. Reproducible for seeded paper
  reproductions, and therefore NOT private in a deployment.

See docs/differential-privacy.md for the table of functions and their exact semantics.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import lru_cache

import numpy as np
import opendp.prelude as dp
from numpy.typing import ArrayLike, NDArray
from scipy.optimize import brentq
from scipy.special import log_ndtr, ndtr

from collabcausal.errors import InputError
from collabcausal.estimators.validation import check_bounds, check_delta, check_epsilon

dp.enable_features("contrib")

SUBSTITUTION_DISTANCE = 2
"""Symmetric distance between datasets that differ by substituting one record (OpenDP's ``d_in``)."""

__all__ = [
    "analytic_gaussian_sigma",
    "check_quantiles",
    "clip",
    "discrete_gaussian",
    "discrete_gaussian_sigma",
    "discrete_laplace",
    "dp_quantiles",
    "draw_noise",
    "gaussian",
    "gaussian_delta",
    "laplace",
    "laplace_scale",
    "perturb",
    "quantile_candidates",
    "zcdp_gaussian_at_delta",
]


def clip(values: ArrayLike, lo: float, hi: float) -> tuple[NDArray[np.float64], int]:
    """Clamp ``values`` into ``[lo, hi]``; return the clipped array and how many entries moved.

    The count is computed from private data: a party keeps it locally (ledger annotation).
    """
    lo, hi = check_bounds((lo, hi))
    arr = _finite(values, "values")
    out = np.clip(arr, lo, hi)
    return out, int(np.count_nonzero(out != arr))


def laplace_scale(sensitivity: float, epsilon: float) -> float:
    """Scale b = sensitivity / epsilon of the epsilon-DP Laplace mechanism (Dwork et al. 2006)."""
    return _sensitivity(sensitivity) / check_epsilon(epsilon)


def laplace(
    values: ArrayLike, sensitivity: float, epsilon: float, *, rng: np.random.Generator | None = None
) -> NDArray[np.float64]:
    """``values + Lap(sensitivity / epsilon)`` per entry: epsilon-DP for an L1 ``sensitivity``.

    Parameters
    ----------
    values : array_like
        The exact answer (any shape).
    sensitivity : float
        L1 sensitivity of the whole array under the neighbouring relation (substitution).
    epsilon : float
    rng : numpy.random.Generator, optional
        Reproducible insecure draws for simulations; ``None`` uses OpenDP's sampler.
    """
    return perturb("laplace", values, laplace_scale(sensitivity, epsilon), rng=rng)


def analytic_gaussian_sigma(sensitivity: float, epsilon: float, delta: float) -> float:
    """Smallest sigma for which ``N(0, sigma^2)`` noise is (epsilon, delta)-DP.

    Balle & Wang (2018), "Improving the Gaussian mechanism for differential privacy", Theorem 8:
    the mechanism is (eps, delta)-DP iff
    ``Phi(D/(2s) - eps s/D) - e^eps Phi(-D/(2s) - eps s/D) <= delta``; the left side decreases in
    ``s``, and we solve for equality (their Algorithm 1 solves the same equation in another
    variable). Exact for every eps > 0, unlike the classic ``sqrt(2 ln(1.25/delta))/eps`` bound.
    """
    d = _sensitivity(sensitivity)
    eps = check_epsilon(epsilon)
    delta = _positive_delta(delta)
    target = math.log(delta)

    def gap(log_s: float) -> float:
        return math.log(max(gaussian_delta(math.exp(log_s), d, eps), 1e-320)) - target

    lo, hi = math.log(d) - 10.0, math.log(d) + 2.0
    try:
        while gap(lo) < 0:
            lo -= 10.0
        while gap(hi) > 0:
            hi += 2.0
        return math.exp(brentq(gap, lo, hi, xtol=1e-12, rtol=1e-12)) * (1.0 + 1e-9)
    except OverflowError:
        raise InputError(f"epsilon {eps:g} is beyond the Gaussian calibration", "ask for a smaller epsilon") from None


def gaussian_delta(sigma: float, sensitivity: float, epsilon: float) -> float:
    """The exact delta of the Gaussian mechanism at ``epsilon`` (Balle & Wang 2018, Theorem 8)."""
    a = sensitivity / (2.0 * sigma)
    b = epsilon * sigma / sensitivity
    return float(ndtr(a - b) - math.exp(epsilon + log_ndtr(-a - b)))


def gaussian(
    values: ArrayLike,
    sensitivity_l2: float,
    epsilon: float,
    delta: float,
    *,
    rng: np.random.Generator | None = None,
) -> NDArray[np.float64]:
    """``values + N(0, sigma^2)`` per entry with the analytic sigma: (epsilon, delta)-DP.

    ``sensitivity_l2`` is the L2 sensitivity of the whole array; sigma from
    :func:`analytic_gaussian_sigma`.
    """
    return perturb("gaussian", values, analytic_gaussian_sigma(sensitivity_l2, epsilon, delta), rng=rng)


def discrete_laplace(
    counts: ArrayLike, sensitivity: int, epsilon: float, *, rng: np.random.Generator | None = None
) -> NDArray[np.int64]:
    """Integer ``counts`` + discrete Laplace noise of scale ``sensitivity / epsilon``: epsilon-DP.

    The two-sided geometric mechanism (Ghosh, Roughgarden, Sundararajan 2009):
    ``P(k) = (1 - a)/(1 + a) a^|k|`` with ``a = exp(-epsilon / sensitivity)``.
    """
    scale = laplace_scale(_integer_sensitivity(sensitivity), epsilon)
    arr = _integers(counts)
    if rng is not None:
        return arr + _numpy_discrete_laplace(scale, arr.shape, rng)
    return _opendp_draw("laplace", "i64", scale, arr)


@lru_cache(maxsize=256)
def discrete_gaussian_sigma(sensitivity: int, epsilon: float, delta: float) -> float:
    """Sigma of the (epsilon, delta)-DP discrete Gaussian for an integer L2 ``sensitivity``.

    The discrete Gaussian is ``Δ²/(2σ²)``-zCDP (Canonne, Kamath, Steinke 2020, Theorem 4);
    OpenDP's zCDP -> approximate-DP conversion gives (eps, delta), and
    ``opendp.binary_search_param`` finds the smallest sigma meeting the target.
    """
    d = _integer_sensitivity(sensitivity)
    eps = check_epsilon(epsilon)
    delta = _positive_delta(delta)
    return float(dp.binary_search_param(lambda scale: zcdp_gaussian_at_delta(scale, delta), d_in=d,
                                        d_out=(eps, delta)))


def zcdp_gaussian_at_delta(scale: float, delta: float) -> dp.Measurement:
    """OpenDP's integer Gaussian of ``scale`` (a zCDP measurement), its privacy map stated at ``delta``.

    ``map(d_in)`` is its (epsilon, delta) for an L2 distance ``d_in``: OpenDP's
    ``make_zCDP_to_approxDP`` conversion of ``d_in^2 / (2 scale^2)``-zCDP.
    """
    space = dp.vector_domain(dp.atom_domain(T="i64")), dp.l2_distance(T="i64")
    return dp.c.make_fix_delta(dp.c.make_zCDP_to_approxDP(dp.m.make_gaussian(*space, scale=scale)), delta)


def discrete_gaussian(
    counts: ArrayLike,
    sensitivity_l2: int,
    epsilon: float,
    delta: float,
    *,
    rng: np.random.Generator | None = None,
) -> NDArray[np.int64]:
    """Integer ``counts`` + discrete Gaussian noise with :func:`discrete_gaussian_sigma`."""
    sigma = discrete_gaussian_sigma(_integer_sensitivity(sensitivity_l2), check_epsilon(epsilon), float(delta))
    arr = _integers(counts)
    if rng is not None:
        return arr + _numpy_discrete_gaussian(sigma, arr.shape, rng)
    return _opendp_draw("gaussian", "i64", sigma, arr)


def dp_quantiles(
    values: ArrayLike,
    quantiles: Sequence[float],
    bounds: tuple[float, float],
    epsilon: float,
    *,
    n_candidates: int = 1001,
) -> NDArray[np.float64]:
    """DP quantiles by the exponential mechanism over a candidate grid (OpenDP only).

    Smith (2011) via OpenDP's ``make_private_quantile``; candidates are ``n_candidates`` evenly
    spaced points of ``bounds``; ``epsilon`` is split evenly across ``quantiles`` (basic
    composition). Values are clipped to ``bounds`` first. Calibrated for substitution of one
    record: OpenDP's privacy map at symmetric distance ``d_in = 2`` (a substitution is one removal
    and one addition). Used for DP ranges (anchor ranges of DC-QE): e.g. ``quantiles=(0.01, 0.99)``.
    """
    eps = check_epsilon(epsilon)
    lo, hi = check_bounds(bounds)
    qs = check_quantiles(quantiles)
    if int(n_candidates) < 2:
        raise InputError(f"n_candidates must be >= 2, got {n_candidates}", "use e.g. 1001")
    data, _ = clip(values, lo, hi)
    return np.array(
        [_quantile_measurement(lo, hi, int(n_candidates), q, eps / len(qs))(data.ravel().tolist()) for q in qs],
        dtype=np.float64,
    )


def check_quantiles(quantiles: Sequence[float]) -> list[float]:
    """A non-empty list of probabilities in [0, 1], or an :class:`InputError`."""
    try:
        qs = [float(q) for q in quantiles]
    except (TypeError, ValueError):
        qs = []
    if not qs or any(not 0.0 <= q <= 1.0 for q in qs):
        raise InputError(f"quantiles must be a non-empty list in [0, 1], got {quantiles!r}", "e.g. (0.01, 0.99)")
    return qs


def quantile_candidates(bounds: tuple[float, float], name: str = "bounds", n_candidates: int = 1001) -> list[float]:
    """The ``n_candidates`` evenly spaced candidates of :func:`dp_quantiles`: finite and strictly increasing.

    Bounds whose width overflows (``[-1e308, 1e308]``) or that hold fewer distinct floats than
    candidates (``[0, 5e-324]``) are refused with an :class:`InputError`, before any charge.
    """
    lo, hi = check_bounds(bounds, name)
    with np.errstate(over="ignore", invalid="ignore"):
        candidates = np.linspace(lo, hi, int(n_candidates))
    if not (np.isfinite(candidates).all() and (np.diff(candidates) > 0).all()):
        raise InputError(
            f"{name} ({lo:g}, {hi:g}) give no {int(n_candidates)} finite, increasing quantile candidates",
            "declare a usable range",
        )
    return candidates.tolist()


@lru_cache(maxsize=256)
def _quantile_measurement(lo: float, hi: float, n_candidates: int, alpha: float, epsilon: float) -> dp.Measurement:
    space = dp.vector_domain(dp.atom_domain(T=float, nan=False)), dp.symmetric_distance()
    candidates = quantile_candidates((lo, hi), n_candidates=n_candidates)

    def make(scale: float) -> dp.Measurement:
        return dp.m.make_private_quantile(*space, dp.max_divergence(), candidates=candidates, alpha=alpha, scale=scale)

    return make(dp.binary_search_param(make, d_in=SUBSTITUTION_DISTANCE, d_out=epsilon))


@lru_cache(maxsize=512)
def _opendp_measurement(kind: str, atom: type | str, scale: float) -> dp.Measurement:
    domain = dp.vector_domain(dp.atom_domain(T=atom, nan=False) if atom is float else dp.atom_domain(T=atom))
    if kind == "laplace":
        return dp.m.make_laplace(domain, dp.l1_distance(T=atom), scale=scale)
    return dp.m.make_gaussian(domain, dp.l2_distance(T=atom), scale=scale)


def _opendp_draw(kind: str, atom: type | str, scale: float, arr: np.ndarray) -> np.ndarray:
    if arr.size == 0:
        return arr.copy()
    noisy = _opendp_measurement(kind, atom, float(scale))(arr.ravel().tolist())
    return np.asarray(noisy, dtype=arr.dtype).reshape(arr.shape)


def perturb(
    kind: str, values: ArrayLike, scale: float, *, rng: np.random.Generator | None = None
) -> NDArray[np.float64]:
    """``values`` + i.i.d. ``"laplace"`` (scale b) or ``"gaussian"`` (sd ``scale``) noise, per entry.

    For mechanisms whose calibration lives in their own module (objective perturbation, AdaSSP,
    DP-CATE's Gaussian process). With ``rng=None`` the values go into OpenDP's measurement, which
    samples the noise and rounds the noisy sum exactly (no float64 ``value + noise`` of ours, the
    Mironov 2012 attack surface); a numpy ``rng`` gives the same distribution, reproducibly and
    therefore NOT privately.
    """
    if kind not in ("laplace", "gaussian"):
        raise InputError(f"unknown noise kind {kind!r}", "use 'laplace' or 'gaussian'")
    b = _sensitivity(scale)
    arr = _finite(values, "values")
    if rng is not None:
        noise = rng.laplace(0.0, b, size=arr.shape) if kind == "laplace" else rng.normal(0.0, b, size=arr.shape)
        return arr + noise
    return _opendp_draw(kind, float, b, arr)


def draw_noise(
    kind: str, scale: float, shape: int | tuple[int, ...], *, rng: np.random.Generator | None = None
) -> NDArray[np.float64]:
    """Raw i.i.d. noise of ``shape``: :func:`perturb` of zeros."""
    return perturb(kind, np.zeros(shape, dtype=np.float64), scale, rng=rng)


def _numpy_discrete_laplace(scale: float, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    p = -math.expm1(-1.0 / scale)
    return rng.geometric(p, size=shape).astype(np.int64) - rng.geometric(p, size=shape).astype(np.int64)


def _numpy_discrete_gaussian(sigma: float, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """Exact rejection sampler from a discrete Laplace (Canonne, Kamath, Steinke 2020, Algorithm 3)."""
    t = math.floor(sigma) + 1.0
    out = np.empty(int(np.prod(shape)), dtype=np.int64)
    todo = np.arange(out.size)
    while todo.size:
        y = _numpy_discrete_laplace(t, (todo.size,), rng)
        accept = rng.random(todo.size) < np.exp(-((np.abs(y) - sigma**2 / t) ** 2) / (2.0 * sigma**2))
        out[todo[accept]] = y[accept]
        todo = todo[~accept]
    return out.reshape(shape)


def _finite(values: ArrayLike, name: str) -> NDArray[np.float64]:
    arr = np.asarray(values, dtype=np.float64)
    if not np.isfinite(arr).all():
        raise InputError(f"{name} contain NaN or infinite entries", "drop or impute them before a DP release")
    return arr


def _integers(counts: ArrayLike) -> NDArray[np.int64]:
    arr = np.asarray(counts)
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        as_float = _finite(arr, "counts")
        if not np.array_equal(as_float, np.round(as_float)):
            raise InputError("counts must be integers", "use laplace()/gaussian() for real-valued answers")
    return arr.astype(np.int64)


def _sensitivity(sensitivity: float) -> float:
    """A finite, normal (not subnormal) float > 0: the calibrations divide by it and by what it scales."""
    s = float(sensitivity)
    if not math.isfinite(s) or s < np.finfo(np.float64).tiny:
        raise InputError(
            f"sensitivity must be a finite number > 0 (not subnormal), got {sensitivity!r}", "derive it from the bounds"
        )
    return s


def _integer_sensitivity(sensitivity: int) -> int:
    s = _sensitivity(sensitivity)
    if s != int(s):
        raise InputError(f"a discrete mechanism needs an integer sensitivity, got {sensitivity!r}", "round it up")
    return int(s)


def _positive_delta(delta: float) -> float:
    d = check_delta(delta)
    if d == 0.0:
        raise InputError("the Gaussian mechanism needs delta > 0, got 0", "pass e.g. delta=1e-6, or use laplace()")
    return d
