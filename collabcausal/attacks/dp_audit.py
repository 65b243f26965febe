"""Empirical DP audit of the ``dp_representation`` release on worst-case neighbouring tables.

The release is ``V(D) + N(0, sigma^2 I)`` with ``V`` the exact rows of
:func:`collabcausal.party.dp_representation.exact_release` in
:func:`~collabcausal.party.dp_representation.release_order`, and ``sigma`` the analytic Gaussian
calibration of the sensitivity ``Delta`` (Balle & Wang 2018, Theorem 8). The project's relation is
substitution of one record, n public, so the auditor takes two tables of the same n that differ in
one subject, put at opposite corners of the public box (every covariate at its low end, T = 0 and
Y at the low end of the outcome range, against every covariate high, T = 1, Y high): for m~ = m
or a binding norm bound their rows differ by exactly ``Delta`` (:func:`corner_neighbours`).

The test (Neyman-Pearson): project a release on ``u = V(D') - V(D)``, ``S = <X - V(D), u> / |u|``,
and say "D'" when ``S > |u| / 2`` (a threshold fixed before any draw). Over ``N`` releases of each
table, ``FP`` counts "D'" under ``D`` and ``FN`` counts "D" under ``D'``. A Gaussian mechanism with
sensitivity ``Delta`` is ``mu``-Gaussian-DP with ``mu = Delta / sigma`` (Dong, Roth & Su 2022,
Theorem 2.7), which is exactly what the analytic (eps, delta) calibration states (their
Corollary 2.13): every test obeys ``Phi^-1(1 - FPR) - Phi^-1(FNR) <= mu``. With one-sided
Clopper-Pearson upper bounds ``FPR+`` and ``FNR+`` (level ``(1 - confidence)/2`` each),

    mu_lower = Phi^-1(1 - FPR+) - Phi^-1(FNR+)

exceeds the claimed ``mu`` with probability at most ``1 - confidence`` if the release is as
claimed, and ``epsilon_lower``, the epsilon at the claimed delta of ``mu_lower``-GDP, then exceeds
the claimed epsilon with the same probability (it is increasing in ``mu``). The assumption-free
bound of (eps, delta)-DP itself, ``ln((1 - delta - FNR+) / FPR+)``, is reported beside it; it is
far from tight at this threshold (it needs the tails, i.e. many more releases).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from numpy.typing import NDArray
from scipy.optimize import brentq
from scipy.stats import norm

from collabcausal.attacks.privacy_audit import clopper_pearson
from collabcausal.estimators.dp.mechanisms import analytic_gaussian_sigma, gaussian, gaussian_delta
from collabcausal.party import PartyTable
from collabcausal.party.dp_representation import exact_release, public_map, release_order


@dataclass(frozen=True)
class ReleaseAudit:
    """The outcome of :func:`audit_gaussian_release`.

    Attributes
    ----------
    claimed_epsilon, delta : float
        The release's claim.
    claimed_mu : float
        ``sensitivity / sigma``, its Gaussian-DP parameter.
    distance : float
        ``|V(D') - V(D)|``: the neighbours' L2 distance (``Delta`` for worst-case neighbours).
    false_positive, false_negative, n_releases : int
        Counts of the test's errors over ``n_releases`` releases of each table.
    mu_lower, epsilon_lower : float
        Clopper-Pearson lower bounds (module docstring), 0 when the test has no power.
    epsilon_lower_event : float
        The assumption-free (eps, delta) lower bound of the same event.
    confidence : float
    """

    claimed_epsilon: float
    delta: float
    claimed_mu: float
    distance: float
    false_positive: int
    false_negative: int
    n_releases: int
    mu_lower: float
    epsilon_lower: float
    epsilon_lower_event: float
    confidence: float


def corner_neighbours(
    key: bytes,
    study: str,
    ranges: Mapping[str, Sequence[float]],
    n_components: int,
    clip_norm: float,
    outcome_range: tuple[float, float] | None,
    background: pd.DataFrame,
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Exact releases ``V(D), V(D')`` of two tables: ``background`` plus one subject at opposite corners.

    ``background`` holds the covariates of ``ranges`` (and ``t``, ``y`` with an outcome range);
    the rows are in the release order of the operation, as the analyst receives them.
    """
    columns = list(ranges)
    labels = outcome_range is not None
    mapping = public_map(key, study, columns, ranges, n_components)
    tables = []
    for end in (0, 1):
        corner = {c: float(ranges[c][end]) for c in columns}
        if labels:
            corner |= {"t": end, "y": float(outcome_range[end])}
        frame = pd.concat([background, pd.DataFrame([corner])], ignore_index=True)
        tables.append(PartyTable.from_frame(frame, columns, treatment="t" if labels else None,
                                            outcome="y" if labels else None, min_subjects=1))
    order = release_order(key, study, tables[0].n_subjects)
    first, second = (exact_release(t, mapping, clip_norm, outcome_range)[order] for t in tables)
    return first, second


def audit_gaussian_release(
    first: NDArray[np.float64],
    second: NDArray[np.float64],
    sensitivity: float,
    epsilon: float,
    delta: float,
    n_releases: int,
    *,
    rng: np.random.Generator | None,
    confidence: float = 1.0 - 1e-6,
    chunk: int = 50_000,
) -> ReleaseAudit:
    """Release ``first`` and ``second`` ``n_releases`` times each with the mechanism; test (module docstring).

    The noise comes from :func:`collabcausal.estimators.dp.mechanisms.gaussian` with the given
    ``sensitivity``: ``rng`` a seeded numpy Generator (reproducible audit) or ``None`` (OpenDP's
    sampler, what a party draws). Releases are drawn ``chunk`` at a time as one stacked call (the
    noise is i.i.d. per entry, so a stack of copies is that many independent releases).
    """
    u = (second - first).ravel()
    distance = float(np.linalg.norm(u))
    errors = []
    for values, says_second in ((first, True), (second, False)):
        count, left = 0, int(n_releases)
        while left:
            k = min(chunk, left)
            noisy = gaussian(np.broadcast_to(values, (k, *values.shape)), sensitivity, epsilon, delta, rng=rng)
            count += projection_errors(noisy, first, second, says_second)
            left -= k
        errors.append(count)
    return release_audit(errors[0], errors[1], int(n_releases), distance, sensitivity, epsilon, delta, confidence)


def projection_errors(
    releases: NDArray[np.float64], first: NDArray[np.float64], second: NDArray[np.float64], says_second: bool
) -> int:
    """How many of ``releases`` (stacked along axis 0) the test of the module docstring gets wrong.

    ``says_second`` is the wrong answer: True for releases of ``first`` (false positives), False
    for releases of ``second`` (false negatives).
    """
    u = (second - first).ravel()
    distance = float(np.linalg.norm(u))
    statistic = (releases.reshape(releases.shape[0], -1) - first.ravel()) @ (u / distance)
    return int(np.count_nonzero((statistic > distance / 2.0) == says_second))


def release_audit(
    false_positive: int,
    false_negative: int,
    n_releases: int,
    distance: float,
    sensitivity: float,
    epsilon: float,
    delta: float,
    confidence: float = 1.0 - 1e-6,
) -> ReleaseAudit:
    """The Clopper-Pearson bounds of the module docstring from the test's error counts."""
    alpha = (1.0 - confidence) / 2.0
    fpr, fnr = (clopper_pearson(k, int(n_releases), alpha)[1] for k in (false_positive, false_negative))
    mu_lower = max(0.0, float(norm.isf(fpr) - norm.ppf(fnr)))
    event = (1.0 - delta - fnr) / fpr
    return ReleaseAudit(
        claimed_epsilon=float(epsilon),
        delta=float(delta),
        claimed_mu=float(sensitivity / analytic_gaussian_sigma(sensitivity, epsilon, delta)),
        distance=distance,
        false_positive=false_positive,
        false_negative=false_negative,
        n_releases=int(n_releases),
        mu_lower=mu_lower,
        epsilon_lower=gdp_epsilon(mu_lower, delta),
        epsilon_lower_event=max(0.0, math.log(event)) if event > 0 else 0.0,
        confidence=confidence,
    )


def gdp_epsilon(mu: float, delta: float) -> float:
    """The smallest epsilon at which ``mu``-Gaussian-DP is (epsilon, delta)-DP (Dong, Roth & Su 2022, Cor. 2.13)."""
    if mu <= 0.0 or gaussian_delta(1.0, mu, 0.0) <= delta:
        return 0.0
    hi = 1.0
    while gaussian_delta(1.0, mu, hi) > delta:
        hi *= 2.0
    return float(brentq(lambda e: gaussian_delta(1.0, mu, e) - delta, 0.0, hi, xtol=1e-12))
