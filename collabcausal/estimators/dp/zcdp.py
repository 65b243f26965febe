"""Zero-concentrated DP (zCDP): the unit in which Gaussian releases compose (Bun & Steinke 2016).

A Gaussian release of L2 sensitivity ``Delta`` with noise sd ``sigma`` is ``rho``-zCDP with
``rho = Delta^2 / (2 sigma^2)`` (Bun & Steinke 2016, Proposition 1.6; the discrete Gaussian too:
Canonne, Kamath & Steinke 2020, Theorem 4), and zCDP composes by adding ``rho`` (Bun & Steinke
2016, Lemma 2.3), adaptively. Two Gaussian releases that share a budget therefore cost much less
as ``rho_1 + rho_2`` converted once to (epsilon, delta) than as two (epsilon_k, delta_k) added:
at (1, 1e-6) in all, two halves get noise sd 1.30x smaller than two analytic Gaussians at
(0.5, 5e-7) each (docs/differential-privacy.md, "zCDP charges").

The conversions are OpenDP's (``make_zCDP_to_approxDP``, the tight bound of Canonne, Kamath &
Steinke 2020, Proposition 12), never ours.
"""

from __future__ import annotations

import math
from functools import lru_cache

import opendp.prelude as dp

from collabcausal.errors import InputError
from collabcausal.estimators.dp.mechanisms import (
    _positive_delta,
    _sensitivity,
    discrete_gaussian_sigma,
    zcdp_gaussian_at_delta,
)
from collabcausal.estimators.validation import check_epsilon

__all__ = ["check_rho", "gaussian_zcdp_sigma", "zcdp_epsilon", "zcdp_rho"]


def check_rho(rho: object, name: str = "rho") -> float:
    """``rho`` as a float, or a one-line :class:`InputError` unless it is finite and positive."""
    try:
        value = float(rho)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise InputError(f"{name} must be a number, got {rho!r}", "pass a positive zCDP rho such as 0.01") from None
    if isinstance(rho, bool) or not (math.isfinite(value) and value > 0.0):
        raise InputError(f"{name} must be finite and positive, got {rho!r}", "pass a positive zCDP rho such as 0.01")
    return value


@lru_cache(maxsize=4096)
def zcdp_epsilon(rho: float, delta: float) -> float:
    """The epsilon at ``delta`` of a ``rho``-zCDP release (OpenDP's conversion).

    ``rho``-zCDP is exactly the guarantee of OpenDP's Gaussian measurement at sensitivity 1 and
    scale ``1/sqrt(2 rho)``; OpenDP converts its privacy map with ``make_zCDP_to_approxDP``. Cached: one
    conversion takes milliseconds (OpenDP searches the optimal Renyi order), and a ledger converts the
    same running totals again on every fresh ledger of a study's design.
    """
    r, d = check_rho(rho), _positive_delta(delta)
    try:
        return float(zcdp_gaussian_at_delta(1.0 / math.sqrt(2.0 * r), d).map(1)[0])
    except dp.OpenDPException:  # overflows for rho near 1e155 or subnormal: public parameters, not the rows
        raise InputError(f"rho {r:g} at delta {d:g} is beyond the zCDP conversion (it overflows)",
                         "use 1e-300 < rho < 1e150") from None


def zcdp_rho(epsilon: float, delta: float) -> float:
    """The largest ``rho`` whose :func:`zcdp_epsilon` at ``delta`` is at most ``epsilon``.

    It is ``1 / (2 s^2)`` for the discrete Gaussian of sensitivity 1 that OpenDP's
    ``binary_search_param`` calibrates to (epsilon, delta) (:func:`discrete_gaussian_sigma`), less a
    relative 1e-9 against the float rounding of the conversion.
    """
    eps, d = check_epsilon(epsilon), _positive_delta(delta)
    try:
        return (1.0 - 1e-9) / (2.0 * discrete_gaussian_sigma(1, eps, d) ** 2)
    except dp.OpenDPException:  # OpenDP's search overflows near epsilon 1e5: no noise worth the name anyway
        raise InputError(f"epsilon {eps:g} is beyond the zCDP calibration (it overflows)",
                         "use epsilon <= 1e4 per release") from None


def gaussian_zcdp_sigma(sensitivity: float, rho: float) -> float:
    """``sigma = Delta / sqrt(2 rho)``: the Gaussian noise sd that makes a release ``rho``-zCDP."""
    return _sensitivity(sensitivity) / math.sqrt(2.0 * check_rho(rho))
