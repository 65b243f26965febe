"""What a party and the analyst must compute identically for a DP release: public scales, sensitivities, sigmas.

A party calibrates its noise with these functions of the request and public parameters; the
analyst recomputes the same numbers to check a reply's stated sigma or to correct for the noise.
Both import them from here, so the analyst never imports a party's internals and the two sides
cannot drift apart:

* :func:`public_scale`: the centre and half-width of a public range (the clipping box of
  ``dp_representation``, ``dp_weighted_moments`` and ``dp_discover``);
* :func:`representation_sensitivity`, :func:`representation_sigma`: ``dp_representation``
  (:mod:`collabcausal.party.dp_representation`, step 4; the analyst's SIMEX correction in
  :mod:`collabcausal.analyst.dp_release`);
* :func:`moments_sensitivity`, :func:`max_subject_weight`: ``dp_weighted_moments``
  (:mod:`collabcausal.party.dp_balance`, steps 2-3; the analyst's check in
  :mod:`collabcausal.analyst.balance`).

The noise itself is the analytic Gaussian calibration (Balle & Wang 2018, Theorem 8:
:func:`collabcausal.estimators.dp.mechanisms.analytic_gaussian_sigma`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike

from collabcausal.errors import InputError
from collabcausal.estimators.dp.mechanisms import analytic_gaussian_sigma
from collabcausal.estimators.validation import check_bounds


def public_scale(bounds: Sequence[float], name: str) -> tuple[float, float]:
    """``(mid, half)`` of a public range, both finite and ``half`` a normal positive float.

    A range whose width overflows, or whose half-width underflows to zero, would make the scaled
    values non-finite only after the charge; it is refused here, before it.
    """
    lo, hi = check_bounds(tuple(bounds), name)
    mid, half = lo / 2.0 + hi / 2.0, hi / 2.0 - lo / 2.0
    if not (math.isfinite(hi - lo) and half >= np.finfo(np.float64).tiny):
        raise InputError(f"{name} ({lo:g}, {hi:g}) is too wide or too narrow to scale", "declare a usable range")
    return mid, half


def representation_sensitivity(clip_norm: float, labels: bool) -> float:
    """L2 sensitivity of one party's DP representation under substitution: ``2 sqrt(C^2 + 2 [labels])``.

    Substituting one subject changes one row: its covariate part lies in a ball of radius ``C``
    and each label coordinate (``t_s``, ``y_s`` in ``[-1, 1]``) moves by at most 2.
    """
    return 2.0 * math.hypot(clip_norm, math.sqrt(2.0) if labels else 0.0)


def representation_sigma(clip_norm: float, labels: bool, epsilon: float, delta: float) -> float:
    """The Gaussian noise standard deviation of a DP representation (analytic calibration)."""
    return analytic_gaussian_sigma(representation_sensitivity(clip_norm, labels), epsilon, delta)


def moments_sensitivity(n_covariates: int, max_weight: float) -> float:
    """L2 sensitivity ``Delta = 2 sqrt(m) max_k W_k`` of the standardised DP balance moments.

    Parameters
    ----------
    n_covariates : int
        ``m``, the released covariates.
    max_weight : float
        The largest total weight of one subject, ``max_k W_k`` (:func:`max_subject_weight`).

    The derivation is step 3 of :mod:`collabcausal.party.dp_balance`.
    """
    return 2.0 * math.sqrt(n_covariates) * float(max_weight)


def max_subject_weight(subjects: ArrayLike, weights: ArrayLike) -> float:
    """``max_k W_k``: the largest total weight a request puts on one subject, summed over its rows.

    A function of the request alone: the party calibrates its noise with it, and the analyst
    recomputes it to check the sigma of a reply (:func:`collabcausal.analyst.balance.expected_sigma`).
    """
    return float(np.bincount(np.asarray(subjects, dtype=np.int64), weights=weights).max(initial=0.0))
