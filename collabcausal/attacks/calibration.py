"""What an attacker knows besides the release, and how it turns scale-free sources into columns.

ICA and moment matching return directions of a representation that follow the private columns up
to scale, sign, offset and order. The attacker fixes those from public information only
(:class:`PublicInfo`): every column's public range and, when published, its marginal distribution
(quantiles, e.g. a summary table or a DP histogram). Without a marginal the attacker assumes the
column uniform on its range, so one code path serves both.

Steps (:func:`place_sources`): standardise each source; for every source ``s``, column ``c`` and
sign, place the source on the column's scale and measure the 1-Wasserstein distance of its
distribution to the column's public marginal (relative to the range width); assign sources to
columns by the Hungarian algorithm on the sign-minimised distances; output each assigned source
mapped monotonically onto the column's public quantiles (the best guess consistent with the
marginal; binary columns come out at the range ends, at the public rate). Columns no source reaches get the
public mean. The truth is never used.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy.optimize import linear_sum_assignment

from collabcausal.errors import InputError

N_LEVELS = 101


@dataclass(frozen=True, eq=False)
class PublicInfo:
    """Public facts about the party's columns, in the party's column order.

    Attributes
    ----------
    ranges : ndarray of shape (m, 2)
        Public (low, high) per column (the study's anchor ranges).
    quantiles : ndarray of shape (m, N_LEVELS) or None
        Public marginal quantiles at ``levels()``; None: only the ranges are public.
    """

    ranges: NDArray[np.float64]
    quantiles: NDArray[np.float64] | None = None

    def __post_init__(self) -> None:
        bounds = np.asarray(self.ranges, dtype=np.float64)
        if bounds.ndim != 2 or bounds.shape[1] != 2 or not np.all(bounds[:, 1] > bounds[:, 0]):
            raise InputError("ranges must be one (low, high) pair per column with low < high", "fix the ranges")
        object.__setattr__(self, "ranges", bounds)
        if self.quantiles is not None:
            q = np.asarray(self.quantiles, dtype=np.float64)
            if q.shape != (bounds.shape[0], N_LEVELS):
                raise InputError(f"quantiles must have shape ({bounds.shape[0]}, {N_LEVELS})", "use from_sample")
            object.__setattr__(self, "quantiles", q)

    @classmethod
    def from_ranges(cls, ranges: Sequence[Sequence[float]] | Mapping) -> PublicInfo:
        """Only the ranges are public (a Mapping's values are taken in order)."""
        return cls(np.asarray(list(ranges.values()) if isinstance(ranges, Mapping) else ranges, dtype=np.float64))

    @classmethod
    def from_sample(cls, sample: NDArray[np.float64], ranges: Sequence[Sequence[float]] | Mapping) -> PublicInfo:
        """Ranges plus each column's marginal quantiles taken from a public ``sample`` (n x m)."""
        info = cls.from_ranges(ranges)
        return cls(info.ranges, np.quantile(np.asarray(sample, dtype=np.float64), levels(), axis=0).T)

    @property
    def width(self) -> NDArray[np.float64]:
        """Range width per column."""
        return self.ranges[:, 1] - self.ranges[:, 0]

    def marginals(self) -> NDArray[np.float64]:
        """Public quantiles per column (m x N_LEVELS): uniform on the range when none are published."""
        if self.quantiles is not None:
            return self.quantiles
        return self.ranges[:, :1] + self.width[:, None] * levels()[None, :]

    def binary(self) -> NDArray[np.bool_]:
        """Columns whose public marginal takes only the two ends of the range (all False without marginals)."""
        if self.quantiles is None:
            return np.zeros(self.ranges.shape[0], dtype=bool)
        return np.all((self.quantiles == self.ranges[:, :1]) | (self.quantiles == self.ranges[:, 1:]), axis=1)

    def means(self) -> NDArray[np.float64]:
        """Public mean per column (of the marginal)."""
        return _trapezoid_mean(self.marginals())

    def stds(self) -> NDArray[np.float64]:
        """Public standard deviation per column (of the marginal)."""
        q = self.marginals()
        return np.sqrt(np.maximum(_trapezoid_mean(q**2) - _trapezoid_mean(q) ** 2, 0.0))


def levels() -> NDArray[np.float64]:
    """The probability levels of :attr:`PublicInfo.quantiles`."""
    return np.linspace(0.0, 1.0, N_LEVELS)


def place_sources(
    sources: NDArray[np.float64],
    public: PublicInfo,
    offsets: NDArray[np.float64] | None = None,
    scales: NDArray[np.float64] | None = None,
) -> NDArray[np.float64]:
    """Turn scale-free sources (n x k) into a reconstruction of the m columns (module docstring).

    Parameters
    ----------
    sources : ndarray of shape (n, k)
        Directions found by an attack (any sign and order; any scale unless ``offsets`` is given).
    public : PublicInfo
    offsets, scales : ndarray of shape (m,), optional
        Where a source of column c sits: ``offsets[c] + sign * scales[c] * source``, for an attack
        that knows its sources' law (the uniform anchor: ``sources`` are then standardised on the
        anchor and used as given). Default: the sources are standardised and placed at the public
        marginal's mean and standard deviation.

    Returns
    -------
    ndarray of shape (n, m), columns in the public order: each assigned source mapped onto the
    column's public quantiles when they are published, else its placed image clipped to the range.
    """
    z = np.asarray(sources, dtype=np.float64)
    if offsets is None or scales is None:
        z, offsets, scales = _standardise(z), public.means(), public.stds()
    marginals, width = public.marginals(), public.width
    zq = np.quantile(z, levels(), axis=0).T  # (k, L): quantiles of each source
    k, m = z.shape[1], marginals.shape[0]
    cost = np.empty((k, m))
    signs = np.empty((k, m))
    for c in range(m):
        up = np.mean(np.abs(offsets[c] + scales[c] * zq - marginals[c]), axis=1)
        down = np.mean(np.abs(offsets[c] - scales[c] * zq[:, ::-1] - marginals[c]), axis=1)
        cost[:, c] = np.minimum(up, down) / width[c]
        signs[:, c] = np.where(up <= down, 1.0, -1.0)
    out = np.tile(public.means(), (z.shape[0], 1))
    binary, mid = public.binary(), public.ranges.mean(axis=1)
    for s, c in zip(*linear_sum_assignment(cost), strict=True):
        placed = offsets[c] + signs[s, c] * scales[c] * z[:, s]
        if public.quantiles is None:
            out[:, c] = np.clip(placed, *public.ranges[c])
        elif binary[c]:
            out[:, c] = np.where(quantile_map(placed, marginals[c]) > mid[c], *public.ranges[c, ::-1])
        else:
            out[:, c] = quantile_map(placed, marginals[c])
    return out


def quantile_map(values: NDArray[np.float64], marginal: NDArray[np.float64]) -> NDArray[np.float64]:
    """Map ``values`` monotonically onto the quantiles ``marginal`` (at :func:`levels`) by rank."""
    ranks = np.empty(values.size)
    ranks[np.argsort(values, kind="stable")] = (np.arange(values.size) + 0.5) / values.size
    return np.interp(ranks, levels(), marginal)


def _standardise(z: NDArray[np.float64]) -> NDArray[np.float64]:
    sd = z.std(axis=0)
    return (z - z.mean(axis=0)) / np.where(sd > 0, sd, 1.0)


def _trapezoid_mean(q: NDArray[np.float64]) -> NDArray[np.float64]:
    """Mean of a distribution given by its quantiles at :func:`levels` (trapezoid rule over levels)."""
    return (q[..., :-1] + q[..., 1:]).sum(axis=-1) / (2.0 * (N_LEVELS - 1))
