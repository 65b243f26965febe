"""Fixed-point encoding: floats to integers modulo 2^64 and back, with the overflow check.

Secure aggregation adds masks modulo 2^64, so the values must be integers of that ring. A float
``x`` becomes ``round(x * 2^f)`` (round half to even, deterministic), stored as the uint64 two's
complement of that int64 (:func:`encode`); the masked sum, once the masks cancel, is read back as
an int64 and divided by ``2^f`` (:func:`decode`). The sum modulo 2^64 equals the true integer sum
as long as ``|sum| < 2^63``; :func:`check_headroom` demands ``< 2^62`` (one bit to spare) from the
public bounds before anything is computed.

Sensitivity in integer units (for the noise of noise.py): rounding to nearest moves each entry by
at most 1/2, so an encoded d-vector is within L2 distance ``sqrt(d)/2`` of ``x * 2^f``. Under
substitution of one record the exact vectors differ by at most ``Delta`` (L2, float units), and
both neighbours are rounded, so the encoded vectors differ by at most
``Delta * 2^f + 2 * sqrt(d)/2``: :func:`integer_sensitivity` returns
``ceil(Delta * 2^f + sqrt(d))``, an integer L2 sensitivity for the discrete Gaussian.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray

from collabcausal.errors import InputError

HEADROOM_BITS = 62
"""Every possible |sum| must stay below 2^62 (the ring is 2^64; int64 holds below 2^63)."""
MAX_SCALE_BITS = 52

__all__ = ["HEADROOM_BITS", "check_headroom", "decode", "encode", "integer_sensitivity"]


def encode(values: ArrayLike, scale_bits: int) -> NDArray[np.uint64]:
    """``round(values * 2^scale_bits)`` as uint64 (two's complement of the int64).

    Raises
    ------
    InputError
        Non-finite values, or an entry whose encoding reaches 2^62 (lower ``scale_bits``).
    """
    f = _scale_bits(scale_bits)
    arr = np.asarray(values, dtype=np.float64)
    if not np.isfinite(arr).all():
        raise InputError("values to encode contain NaN or infinite entries", "clip them to their declared bounds")
    scaled = np.rint(np.ldexp(arr, f))
    if arr.size and float(np.max(np.abs(scaled))) >= 2.0**HEADROOM_BITS:
        raise InputError(
            f"a value of magnitude {float(np.max(np.abs(arr))):g} does not fit 2^{HEADROOM_BITS} at scale_bits={f}",
            "lower scale_bits or clip the values to tighter bounds",
        )
    return scaled.astype(np.int64).view(np.uint64)


def decode(total: ArrayLike, scale_bits: int) -> NDArray[np.float64]:
    """The float value of an (unmasked) uint64 sum: read as int64, divided by ``2^scale_bits``."""
    f = _scale_bits(scale_bits)
    arr = np.asarray(total)
    if arr.dtype != np.uint64:
        raise InputError(f"decode takes the uint64 sum, got dtype {arr.dtype}", "pass aggregate()'s result")
    return np.ldexp(arr.view(np.int64).astype(np.float64), -f)


def check_headroom(bound_per_party: float, n_parties: int, noise_bound: float, scale_bits: int) -> None:
    """Refuse settings under which the sum could wrap around modulo 2^64.

    Parameters
    ----------
    bound_per_party : float
        Public bound on |entry| of one party's values, in float units (from clipping).
    n_parties : int
        Parties whose values are summed.
    noise_bound : float
        Bound on |total noise| per entry in integer units, e.g. ``20 * sqrt(n_parties) * sigma_share``
        (a discrete Gaussian share exceeds t sigma with probability below ``2 exp(-t^2/2)``).
    scale_bits : int

    Raises
    ------
    InputError
        ``n_parties * (bound_per_party * 2^f + 1/2) + noise_bound`` reaches 2^62.
    """
    f = _scale_bits(scale_bits)
    bound = float(bound_per_party)
    if not (math.isfinite(bound) and bound >= 0 and math.isfinite(float(noise_bound)) and noise_bound >= 0):
        raise InputError("bounds must be finite and non-negative", "declare the clipping bounds of the values")
    if int(n_parties) < 1:
        raise InputError(f"n_parties must be >= 1, got {n_parties}", "count the parties of the round")
    largest = int(n_parties) * (bound * 2.0**f + 0.5) + float(noise_bound)
    if largest >= 2.0**HEADROOM_BITS:
        raise InputError(
            f"a sum over {int(n_parties)} parties of values up to {bound:g} at scale_bits={f} "
            f"could reach {largest:.3g} >= 2^{HEADROOM_BITS}",
            "lower scale_bits or tighter bounds",
        )


def integer_sensitivity(delta_float: float, d: int, scale_bits: int) -> int:
    """``ceil(Delta * 2^f + sqrt(d))``: the L2 sensitivity of the encoded d-vector (module docstring)."""
    f = _scale_bits(scale_bits)
    delta = float(delta_float)
    if not (math.isfinite(delta) and delta > 0) or int(d) < 1:
        raise InputError(
            f"need a finite sensitivity > 0 and d >= 1, got {delta_float!r}, {d!r}", "derive them from the bounds"
        )
    return math.ceil(delta * 2.0**f + math.sqrt(int(d)))


def _scale_bits(scale_bits: int) -> int:
    f = int(scale_bits)
    if f != scale_bits or not 0 <= f <= MAX_SCALE_BITS:
        raise InputError(f"scale_bits must be an integer in [0, {MAX_SCALE_BITS}], got {scale_bits!r}", "e.g. 16")
    return f
