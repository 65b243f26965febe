"""One masked release as every party and the coordinator compute it: names, scale and noise share.

A party calibrates its noise share from the verified roster (:mod:`collabcausal.party.secagg`);
the coordinator recomputes the same share to check each party's stated one and to know the noise
on the sum (:mod:`collabcausal.analyst.secure_sum`). Both import the operation name, the
fixed-point scale and :func:`share_calibration` from here, so the two ends cannot drift apart.
"""

from __future__ import annotations

import math

from collabcausal.secagg.fixed_point import check_headroom, integer_sensitivity
from collabcausal.secagg.noise import share_sigma

KEYS_OPERATION = "secagg_keys"
"""The party operation of stage 1: a fresh signed round key (docs/secure-aggregation.md)."""
SCALE_BITS = 24
"""Fixed-point bits of every masked release: 2^-24 is far below any DP noise here, and 10^7
subjects per party over 64 parties stay 2^8 below the wrap-around (``check_headroom``)."""
NOISE_TAIL = 20.0
"""``|share| <= 20 sigma`` bounds the noise in the headroom check (probability < 3e-87 per entry)."""

__all__ = ["KEYS_OPERATION", "NOISE_TAIL", "SCALE_BITS", "share_calibration"]


def share_calibration(
    sensitivity: float, rho: float, *, n_parties: int, length: int, value_bound: float
) -> float:
    """The sd of each party's noise share (integer units) for a release over ``n_parties``.

    The sum of ``n_parties - 1`` shares is ``rho``-zCDP (one party colluding with the
    coordinator, or withholding its share, still leaves the guarantee), for the fixed-point
    encoding of a vector of ``length`` entries with L2 sensitivity ``sensitivity`` (float units).

    Parameters
    ----------
    sensitivity : float
        L2 sensitivity of one party's float vector under the ledger's relation.
    rho : float
        The zCDP target for the sum (what each party's ledger is charged).
    n_parties : int
        Parties of the round's roster (two or more).
    length : int
        Length of the released vector.
    value_bound : float
        Public bound on |entry| of one party's vector.

    Returns
    -------
    float
        The share's sigma, in units of ``2^-SCALE_BITS``.

    Raises
    ------
    InputError
        The sum of ``n_parties`` vectors and their noise could wrap around the ring.
    """
    sigma = share_sigma(integer_sensitivity(sensitivity, length, SCALE_BITS), rho, n_parties - 1, length)
    check_headroom(value_bound, n_parties, NOISE_TAIL * math.sqrt(n_parties) * sigma, SCALE_BITS)
    return sigma
