"""Per-arm sufficient statistics of one fold and their L2 sensitivity (docs/dp-effects.md, step 2).

For design rows ``d_k`` (:mod:`.design`), treatments ``T_k`` and centred outcomes ``y'_k`` scaled
to ``u_k = y'_k / R`` in ``[-1/2, 1/2]``, the released vector of a fold is

    s = ( triu(G_0), triu(G_1), b_0, b_1 ),   G_t = sum_{T_k = t} d_k d_k^T,   b_t = sum_{T_k = t} d_k u_k

(the upper triangle of each Gram matrix, diagonal included). It is all the nuisance models of
:mod:`.nuisances` need: per-arm ridge regressions of the outcome (Wang 2018's sufficient
statistics perturbation) and a linear-discriminant propensity with site intercepts.

**Sensitivity under substitution** (one record ``(d, t, u)`` replaced by ``(d', t', u')``). Let
``B^2 = max ||d||^2 = 1 + m``. Since every ``|d_i| <= 1``,
``||triu(d d^T)||^2 = (||d||^4 + sum_i d_i^4) / 2 <= (B^4 + B^2) / 2 =: T``.

* arms differ: the record leaves one block and enters the other, so
  ``||s - s'||^2 = ||triu(dd^T)||^2 + u^2 ||d||^2 + ||triu(d'd'^T)||^2 + u'^2 ||d'||^2 <= 2T + B^2 / 2``;
* same arm: ``<triu(dd^T), triu(d'd'^T)> = ((d.d')^2 + sum_i d_i^2 d_i'^2) / 2 >= 0``, so the Gram
  part moves by at most ``2T`` in squared norm, and ``||d u - d' u'|| <= B (|u| + |u'|) <= B``.

Hence ``Delta_2 = sqrt(2T + B^2) = sqrt(B^4 + 2 B^2)`` (attained up to the one-hot: tests search
the corners).

**Weighted cross sums** (the horizontal release's ``cross_weight``, a study declaration, default 1). The Gram
triangles take ``2T = B^4 + B^2`` of ``Delta_2^2`` (132 of 143 with ten covariates), yet the outcome models' noise
comes mostly from ``b_t``'s (a coefficient moves by ``G^{-1}`` times ``b``'s noise, and by the Gram's noise times the
small ``u``-scale coefficients). A party asked for weight ``w`` releases ``w b_t`` in place of ``b_t``
(:func:`statistics_weights`): the cross part of the bound above scales by ``w^2``, so
``Delta_2 = sqrt(B^4 + B^2 + w^2 B^2)`` (:func:`statistics_sensitivity`), and the analyst divides by ``w`` after the
noise, so ``b``'s noise sd in its own units is ``sigma / w`` (:func:`entry_noise_sd`). At ``w = 2`` and ten covariates
``b``'s noise sd falls 1.80-fold and the Gram's rises 1.11-fold. Each entry moves by at most ``max(1, w / 2)`` per
subject (:func:`statistics_reach`). The vertical release is unweighted.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from collabcausal.errors import InputError
from collabcausal.estimators.dp.effects.design import FeatureMap
from collabcausal.estimators.validation import number_in_range


def statistics_length(dim: int) -> int:
    """Length of one fold's vector: two upper triangles and two ``b`` vectors."""
    return dim * (dim + 1) + 2 * dim


CROSS_WEIGHT_RANGE = (0.125, 8.0)
"""The weights a party accepts for the cross sums (:func:`check_cross_weight`)."""


def check_cross_weight(value: object, where: str) -> float:
    """A cross-sum weight: a finite number in :data:`CROSS_WEIGHT_RANGE`, or a one-line :class:`InputError`.

    Any such weight is private (the sensitivity follows it); the range keeps every entry's reach, and so secure
    aggregation's wrap-around bound, within ``4 n``.
    """
    low, high = CROSS_WEIGHT_RANGE
    if not number_in_range(value, low, high):
        raise InputError(f"{where} cross_weight {value!r} is not a number in [{low:g}, {high:g}]",
                         "declare e.g. cross_weight = 2 (docs/dp-effects.md, \"Weighting the outcome cross sums\"), "
                         "or leave it out (1)")
    return float(value)


def statistics_weights(dim: int, cross_weight: float) -> NDArray[np.float64]:
    """The weight of each entry of one fold's vector: 1 on the Gram triangles, ``cross_weight`` on ``b_0, b_1``."""
    triangles = dim * (dim + 1)  # both arms' upper triangles
    return np.concatenate([np.ones(triangles), np.full(2 * dim, float(cross_weight))])


def entry_noise_sd(noise_sd: float, dim: int, cross_weight: float) -> NDArray[np.float64]:
    """The noise sd of each entry of one fold's row once the analyst divides the weights out: ``noise_sd`` (a
    Gram entry's) on the triangles, ``noise_sd / w`` on the cross sums."""
    return float(noise_sd) / statistics_weights(dim, cross_weight)


def statistics_sensitivity(feature_map: FeatureMap, cross_weight: float = 1.0) -> float:
    """``Delta_2 = sqrt(B^4 + B^2 + w^2 B^2)`` with ``B^2 = 1 + m`` and cross weight ``w`` (module docstring)."""
    b2 = feature_map.squared_norm_bound
    return math.sqrt(b2 * b2 + b2 + float(cross_weight) ** 2 * b2)


def statistics_reach(cross_weight: float) -> float:
    """How far one subject moves any entry of the weighted vector: ``max(1, w / 2)`` (``|d_i d_j| <= 1``,
    ``|w d_i u| <= w / 2``)."""
    return max(1.0, float(cross_weight) / 2.0)


def fold_statistics(
    design: NDArray[np.float64], treatment: ArrayLike, centred_outcome: ArrayLike, outcome_width: float
) -> NDArray[np.float64]:
    """The exact vector ``s`` of one fold (before noise)."""
    t = np.asarray(treatment)
    if t.shape != (design.shape[0],) or not np.isin(t, (0, 1)).all():
        raise InputError("treatment must be 0/1, one per design row", "recode it to 0 (control) and 1 (treated)")
    u = np.clip(np.asarray(centred_outcome, dtype=float) / float(outcome_width), -0.5, 0.5)  # exact bound
    iu = np.triu_indices(design.shape[1])
    parts_g, parts_b = [], []
    for arm in (0, 1):
        rows = design[t == arm]
        parts_g.append((rows.T @ rows)[iu])
        parts_b.append(rows.T @ u[t == arm])
    return np.concatenate(parts_g + parts_b)


@dataclass(frozen=True)
class ArmStatistics:
    """``G_0, G_1`` (symmetric, d x d) and ``b_0, b_1`` (d,), unpacked from a released vector."""

    gram: tuple[NDArray[np.float64], NDArray[np.float64]]
    cross: tuple[NDArray[np.float64], NDArray[np.float64]]

    @classmethod
    def unpack(cls, vector: ArrayLike, dim: int) -> ArmStatistics:
        """Inverse of :func:`fold_statistics`' packing."""
        s = np.asarray(vector, dtype=float)
        if s.shape != (statistics_length(dim),):
            raise InputError(
                f"dp_effects statistics have shape {s.shape}, expected ({statistics_length(dim)},)",
                "send one vector per fold, as packed by fold_statistics",
            )
        tri = dim * (dim + 1) // 2
        iu = np.triu_indices(dim)
        grams = []
        for arm in (0, 1):
            G = np.zeros((dim, dim))
            G[iu] = s[arm * tri : (arm + 1) * tri]
            grams.append(G + np.triu(G, 1).T)
        b0 = s[2 * tri : 2 * tri + dim]
        b1 = s[2 * tri + dim :]
        return cls((grams[0], grams[1]), (b0, b1))

    def __add__(self, other: ArmStatistics) -> ArmStatistics:
        return ArmStatistics(
            (self.gram[0] + other.gram[0], self.gram[1] + other.gram[1]),
            (self.cross[0] + other.cross[0], self.cross[1] + other.cross[1]),
        )
