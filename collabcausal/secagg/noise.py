"""Distributed discrete Gaussian noise: each party adds a share, the sum carries the guarantee.

Kairouz, Liu & Steinke (2021), "The Distributed Discrete Gaussian Mechanism for Federated Learning
with Secure Aggregation", ICML (arXiv 2102.06387). Every party adds i.i.d. discrete Gaussian noise
``N_Z(0, sigma^2)`` to each entry of its integer vector (:func:`noise_share`). The sum of ``n`` such
shares is *not* a discrete Gaussian, but it is close to one: their Proposition 14 (the multi-
dimensional sum, which Theorem 1 instantiates) bounds, for sigma >= 1/2, any integer shift Delta
with ``||Delta||_2 <= Delta_2`` and every order alpha >= 1,

    D_alpha(Z_n || Z_n + Delta) <= min( alpha/2 * Delta_2^2/(n sigma^2) + tau d,
                                        alpha/2 * (Delta_2/(sqrt(n) sigma) + tau sqrt(d))^2 ),
    tau = 10 * sum_{k=1}^{n-1} exp(-2 pi^2 sigma^2 k/(k+1)),

(their middle term with ``||Delta||_1 <= sqrt(d) Delta_2`` equals the last one). Since alpha >= 1,
``tau d <= alpha/2 * 2 tau d``, so the sum is ``rho``-zCDP with ``rho = eps_c^2 / 2``,

    eps_c = min( sqrt(Delta_2^2/(n sigma^2) + 2 tau d), Delta_2/(sqrt(n) sigma) + tau sqrt(d) )

(:func:`sum_rho`; the conversion of the additive ``tau d`` at alpha = 1 is the conservative one;
``tau`` is below 1e-40 for sigma >= 3, so it only matters for tiny shares). :func:`share_sigma` is
the smallest sigma meeting a target rho (the unit a party's ledger charges the release in), and
OpenDP's zCDP -> (eps, delta) conversion gives the achieved epsilon (:func:`sum_epsilon`).

Trust: calibrate to ``n_honest`` shares, the number of parties that are certain to add theirs
(e.g. parties - 1, so one party colluding with the coordinator, which knows its own share, or one
party that withholds its share, still leaves the guarantee). docs/secure-aggregation.md.
"""

from __future__ import annotations

import math

import numpy as np
import opendp.prelude as dp
from numpy.typing import NDArray

from collabcausal.errors import InputError
from collabcausal.estimators.dp.mechanisms import _numpy_discrete_gaussian, _opendp_draw
from collabcausal.estimators.dp.zcdp import check_rho, zcdp_epsilon

MIN_SIGMA = 0.5
"""Proposition 14 of Kairouz, Liu & Steinke (2021) holds for sigma >= 1/2."""
MAX_SIGMA = 2.0**60

__all__ = ["MIN_SIGMA", "noise_share", "share_sigma", "sum_epsilon", "sum_rho", "tau"]


def tau(sigma_share: float, n_shares: int) -> float:
    """``10 * sum_{k=1}^{n-1} exp(-2 pi^2 sigma^2 k/(k+1))`` (Kairouz, Liu & Steinke 2021, Thm 1 / Prop 14)."""
    s = _sigma(sigma_share)
    return 10.0 * sum(math.exp(-2.0 * math.pi**2 * s**2 * k / (k + 1)) for k in range(1, _count(n_shares)))


def sum_rho(sensitivity_int: int, sigma_share: float, n_shares: int, d: int) -> float:
    """zCDP ``rho = eps_c^2/2`` of the sum of ``n_shares`` shares for an integer L2 sensitivity (module docstring)."""
    delta2 = _sensitivity(sensitivity_int)
    s, n, dim = _sigma(sigma_share), _count(n_shares), _count(d, "d")
    t = tau(s, n)
    eps_c = min(math.sqrt(delta2**2 / (n * s**2) + 2.0 * t * dim), delta2 / (math.sqrt(n) * s) + t * math.sqrt(dim))
    return eps_c**2 / 2.0


def sum_epsilon(sensitivity_int: int, sigma_share: float, n_shares: int, d: int, delta: float) -> float:
    """The epsilon at ``delta`` of the sum of ``n_shares`` honest shares of ``sigma_share``.

    Use it to report what a release achieved when fewer shares than planned were honest (e.g. a
    party colluding with the coordinator: ``n_shares = parties - 1``).
    """
    return zcdp_epsilon(sum_rho(sensitivity_int, sigma_share, n_shares, d), delta)


def share_sigma(sensitivity_int: int, rho: float, n_honest: int, d: int) -> float:
    """The smallest per-party sigma for which the sum of ``n_honest`` shares is ``rho``-zCDP.

    Parameters
    ----------
    sensitivity_int : int
        L2 sensitivity of the summed integer vector (fixed_point.integer_sensitivity).
    rho : float
        The target for the sum, as charged to each party's ledger (an (epsilon, delta) target is
        :func:`~collabcausal.estimators.dp.zcdp.zcdp_rho` of it).
    n_honest : int
        Shares certain to be in the sum (module docstring); parties that add more only add noise.
    d : int
        Dimension of the vector (tau enters with d).

    Returns
    -------
    float
        sigma >= 1/2: OpenDP's ``binary_search`` finds the smallest sigma with :func:`sum_rho` <= rho
        (it decreases in sigma); a relative 1e-9 is added against float rounding.
    """
    rho_max = check_rho(rho)
    sens, n, dim = _sensitivity(sensitivity_int), _count(n_honest), _count(d, "d")

    def meets(sigma: float) -> bool:
        return sum_rho(sens, sigma, n, dim) <= rho_max

    if meets(MIN_SIGMA):
        return MIN_SIGMA
    if not meets(MAX_SIGMA):
        raise InputError(f"rho {rho:g} cannot be met with a share sigma below 2^60", "ask for a larger budget")
    return float(dp.binary_search(meets, bounds=(MIN_SIGMA, MAX_SIGMA), T=float)) * (1.0 + 1e-9)


def noise_share(
    shape: int | tuple[int, ...], sigma_share: float, rng: np.random.Generator | None = None
) -> NDArray[np.int64]:
    """One party's share: i.i.d. ``N_Z(0, sigma_share^2)`` integers of ``shape``.

    ``rng=None`` (what a party uses) samples with OpenDP's exact discrete Gaussian from OS entropy
    (estimators/dp/mechanisms.py); a numpy ``rng`` draws the same law reproducibly with the exact
    rejection sampler of Canonne, Kamath & Steinke (2020), and is therefore NOT private: for seeded
    simulations only. Add the share to the encoded values modulo 2^64 (``view(np.uint64)``).
    """
    s = _sigma(sigma_share)
    zeros = np.zeros(shape, dtype=np.int64)
    if rng is not None:
        return _numpy_discrete_gaussian(s, zeros.shape, rng)
    return _opendp_draw("gaussian", "i64", s, zeros)


def _sigma(sigma_share: float) -> float:
    s = float(sigma_share)
    if not (math.isfinite(s) and MIN_SIGMA <= s <= MAX_SIGMA):
        raise InputError(
            f"a share sigma must be in [{MIN_SIGMA}, 2^60], got {sigma_share!r}", "calibrate it with share_sigma()"
        )
    return s


def _count(n: int, name: str = "the number of shares") -> int:
    if int(n) != n or int(n) < 1:
        raise InputError(
            f"{name} must be a positive integer, got {n!r}", "count the parties (or entries) of the release"
        )
    return int(n)


def _sensitivity(sensitivity_int: int) -> int:
    if int(sensitivity_int) != sensitivity_int or int(sensitivity_int) < 1:
        raise InputError(
            f"an integer L2 sensitivity >= 1 is needed, got {sensitivity_int!r}", "use integer_sensitivity()"
        )
    return int(sensitivity_int)
