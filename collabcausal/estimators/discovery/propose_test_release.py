"""Propose-test-release: answers released only when the data are stable enough, else no answer.

Two forms are used by paper 002:

* Dwork & Lei (2009)'s private IQR, in the slightly modified form of paper 002, section 4.3 (its
  appendix is lost in our copy; reconstruction documented in docs/causal-discovery.md): bins of
  width 1 on the log-IQR scale, two shifted partitions, a noisy distance-to-leave-the-bin test for
  each, and ``Lap(1/eps)`` noise on ``log IQR`` when a test passes. ``(3 eps, delta)``-DP.
* Dwork & Roth (2014)'s distance-to-instability release (their Algorithm 13 in paper 002's
  numbering; paper 002, Theorem 6): release the exact value when a noisy lower bound on the
  distance to instability clears ``ln(1/delta)/eps``. ``(eps, delta)``-DP.

``rng=None`` draws noise with OpenDP (the release path); a numpy Generator gives reproducible,
non-private draws for simulations (see :func:`collabcausal.estimators.dp.mechanisms.laplace`).
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

from collabcausal.estimators.discovery.scores import iqr, quartile_indices
from collabcausal.estimators.dp.mechanisms import laplace

BIN_OFFSETS: tuple[float, ...] = (0.0, 0.5)


def iqr_threshold(epsilon: float, delta: float) -> float:
    """Dwork & Lei's test threshold ``1 + ln(1/delta)/eps`` on the noisy distance."""
    return 1.0 + math.log(1.0 / delta) / epsilon


def stability_threshold(epsilon: float, delta: float) -> float:
    """Dwork & Roth's threshold ``ln(1/delta)/eps`` on the noisy distance to instability."""
    return math.log(1.0 / delta) / epsilon


def iqr_bin(log_iqr: float, offset: float) -> tuple[float, float]:
    """The bin ``[k + offset, k + 1 + offset)`` of one partition that holds ``log_iqr``."""
    low = math.floor(log_iqr - offset) + offset
    return low, low + 1.0


def iqr_distance(values: NDArray[np.float64], low: float, high: float) -> int:
    """How many points must change before ``log IQR`` can leave ``[low, high)`` (Dwork & Lei's ``A``).

    With ``k`` points replaced, the largest reachable IQR is ``max_a x_(q3 + k - a) - x_(q1 - a)``
    and the smallest ``max(0, min_a x_(q3 - k + a) - x_(q1 + a))``, ``a = 0..k``, order statistics
    beyond the sample being infinite. Returns the least ``k`` for which either leaves the bin
    (``m`` if none does).
    """
    ordered = np.sort(values)
    m = ordered.size
    padded = np.concatenate(([-np.inf] * m, ordered, [np.inf] * m))
    q1, q3 = (q + m for q in quartile_indices(m))
    upper, lower = math.exp(high), math.exp(low)
    for k in range(m + 1):
        shift = np.arange(k + 1)
        widest = np.max(padded[q3 + k - shift] - padded[q1 - shift])
        narrowest = np.min(padded[q3 - k + shift] - padded[q1 + shift])
        if widest >= upper or narrowest < lower:
            return k
    return m


def iqr_distances(values: NDArray[np.float64]) -> tuple[float, tuple[int, ...]]:
    """``log IQR`` and its distance to leave the bin of each partition (``-inf`` and zeros if IQR = 0)."""
    spread = iqr(values)
    if spread <= 0.0:
        return -math.inf, tuple(0 for _ in BIN_OFFSETS)
    log_iqr = math.log(spread)
    return log_iqr, tuple(iqr_distance(values, *iqr_bin(log_iqr, off)) for off in BIN_OFFSETS)


def private_log_iqr(
    values: NDArray[np.float64], epsilon: float, delta: float, *, rng: np.random.Generator | None = None
) -> float | None:
    """Dwork & Lei's private ``log IQR``: ``(3 eps, delta)``-DP, ``None`` when both tests fail.

    For each partition in turn: ``R = A + Lap(1/eps)``; if ``R > 1 + ln(1/delta)/eps`` release
    ``log IQR + Lap(1/eps)`` (a value stable within one bin of width 1 moves by at most 1).
    """
    log_iqr, distances = iqr_distances(values)
    threshold = iqr_threshold(epsilon, delta)
    for distance in distances:
        if laplace([float(distance)], 1.0, epsilon, rng=rng)[0] > threshold:
            return float(laplace([log_iqr], 1.0, epsilon, rng=rng)[0])
    return None


def stability_release(
    value: float, distance: int, epsilon: float, delta: float, *, rng: np.random.Generator | None = None
) -> float | None:
    """Release ``value`` exactly if ``distance + Lap(1/eps) > ln(1/delta)/eps``, else ``None``.

    ``distance`` must be a lower bound on the distance to instability that moves by at most 1
    between neighbouring datasets (Dwork & Roth 2014, propose-test-release; paper 002, Theorem 6).
    """
    noisy = laplace([float(distance)], 1.0, epsilon, rng=rng)[0]
    return value if noisy > stability_threshold(epsilon, delta) else None
