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
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from collabcausal.errors import InputError
from collabcausal.estimators.dp.effects.design import FeatureMap


def statistics_length(dim: int) -> int:
    """Length of one fold's vector: two upper triangles and two ``b`` vectors."""
    return dim * (dim + 1) + 2 * dim


def statistics_sensitivity(feature_map: FeatureMap) -> float:
    """``Delta_2 = sqrt(B^4 + 2 B^2)`` with ``B^2 = 1 + m`` (module docstring)."""
    b2 = feature_map.squared_norm_bound
    return math.sqrt(b2 * b2 + 2.0 * b2)


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
