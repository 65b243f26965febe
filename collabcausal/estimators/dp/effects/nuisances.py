"""Nuisance models of ``dp_effects`` fitted from (noisy) sufficient statistics (docs/dp-effects.md, step 3).

Everything here is post-processing of a released :class:`~.statistics.ArmStatistics`: the models
are as private as the statistics, and a party applies a model it is sent to its own rows only
through bounded scores (:mod:`.scores`), so a wrong or hostile model costs accuracy, never privacy.

* Outcome, per arm ``t``: ridge regression of ``u = y'/R`` on the design row,
  ``beta_t = (G_t^+ + lambda I)^{-1} b_t`` (sufficient statistics perturbation, Wang 2018,
  "Revisiting differentially private linear regression", eq. (2) with a fixed ridge), where ``G^+``
  is the noisy Gram matrix with its negative eigenvalues set to 0.
* Propensity: linear discriminant analysis with site intercepts and common slopes (Hastie,
  Tibshirani & Friedman, ESL section 4.3): with site-arm means ``mu_st``, counts ``n_st`` and the
  pooled within-(site, arm) covariance ``W`` of the covariates,
  ``logit e(z, s) = log(n_s1 / n_s0) + beta^T (z - (mu_s1 + mu_s0) / 2)``,
  ``beta = W^{-1} sum_s w_s (mu_s1 - mu_s0) / sum_s w_s``, ``w_s = n_s1 n_s0 / n_s``. It needs only
  the Gram matrices' blocks (counts and sums per site and arm are their one-hot rows), so the
  propensity costs no budget beyond the outcome models'.
* ``lambda = max(ridge_scale * noise_sd * sqrt(d), 1)``: the order of the noise matrix's operator
  norm (about ``2 sqrt(d)`` noise sd for a symmetric Gaussian matrix), a public quantity, and at
  least one pseudo-observation (:data:`MIN_RIDGE`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from collabcausal.errors import InputError
from collabcausal.estimators.dp.effects.design import FeatureMap
from collabcausal.estimators.dp.effects.statistics import ArmStatistics
from collabcausal.estimators.validation import refuse_unknown_keys

RIDGE_SCALE = 1.0
"""Default ``ridge_scale``. Smaller ones lowered the benchmark design's RMSE (0.25: 2.8% less at eps 1, paired over
300 seeds) but doubled the spread of LaLonde's ATT at eps 16 (16 draws): 1.0 stays."""
MIN_RIDGE = 1.0
"""The smallest ridge: one pseudo-observation on the [-1, 1] design scale. Without it a near-singular arm
(LaLonde's 185 treated, whose earnings sit at one end of their range) turns noise of 1e-2 into swings of
the extrapolated outcome model that dominate the ATE."""
SPEC_KEYS = ("propensity", "outcome_0", "outcome_1")
"""The keys of :meth:`NuisanceModel.to_spec`, each required: a model carrying any other is refused
(:meth:`NuisanceModel.from_spec`)."""


@dataclass(frozen=True)
class NuisanceModel:
    """Coefficients on the design row: a propensity logit and one outcome model per arm.

    Attributes
    ----------
    propensity_coef : ndarray (d,)
        Site intercepts then slopes of ``logit e``.
    outcome_coef : tuple of two ndarrays (d,)
        ``u``-scale outcome regressions for arms 0 and 1 (``y' = R u``).
    """

    propensity_coef: NDArray[np.float64]
    outcome_coef: tuple[NDArray[np.float64], NDArray[np.float64]]

    def propensity(self, design: NDArray[np.float64], trim: float) -> NDArray[np.float64]:
        """``e(d)`` trimmed to ``[trim, 1 - trim]``."""
        logit = np.clip(design @ self.propensity_coef, -40.0, 40.0)
        return np.clip(1.0 / (1.0 + np.exp(-logit)), trim, 1.0 - trim)

    def outcome(self, design: NDArray[np.float64], arm: int, feature_map: FeatureMap) -> NDArray[np.float64]:
        """``mu_arm(d)`` on the centred outcome scale, clipped to ``[-R/2, R/2]``.

        Clipped before the scaling by ``R`` (the same numbers), so a hostile model's finite ``d @ coef`` never
        overflows in the party's arithmetic.
        """
        return feature_map.outcome_width * np.clip(design @ self.outcome_coef[arm], -0.5, 0.5)

    def to_spec(self) -> dict[str, list[float]]:
        """JSON-ready coefficients (the analyst sends them to the parties)."""
        return {"propensity": self.propensity_coef.tolist(), "outcome_0": self.outcome_coef[0].tolist(),
                "outcome_1": self.outcome_coef[1].tolist()}

    @classmethod
    def from_spec(cls, spec: object, dim: int) -> NuisanceModel:
        """Inverse of :meth:`to_spec`, checked: three finite vectors of length ``dim``, and no other key."""
        if not isinstance(spec, dict):
            raise InputError("malformed dp_effects nuisance model", "send propensity, outcome_0 and outcome_1")
        refuse_unknown_keys(spec, SPEC_KEYS, "dp_effects nuisance model")
        vectors = []
        for key in SPEC_KEYS:
            try:
                v = np.asarray(spec[key], dtype=float)
            except (KeyError, TypeError, ValueError, OverflowError):  # OverflowError: a 400-digit int
                raise InputError(
                    f"dp_effects nuisance model has no numeric {key}", "send three coefficient lists"
                ) from None
            if v.shape != (dim,) or not np.isfinite(v).all():
                raise InputError(
                    f"dp_effects nuisance {key} has shape {v.shape} or non-finite values, expected ({dim},) finite",
                    "send one finite coefficient per design column",
                )
            vectors.append(v)
        return cls(vectors[0], (vectors[1], vectors[2]))


def ridge_penalty(noise_sd: float, dim: int, ridge_scale: float = RIDGE_SCALE) -> float:
    """``lambda = max(ridge_scale * noise_sd * sqrt(d), 1)`` (module docstring): public, from the noise law alone."""
    return max(ridge_scale * float(noise_sd) * math.sqrt(dim), MIN_RIDGE)


def fit_nuisances(
    stats: ArmStatistics, n_sites: int, noise_sd: float, *, ridge_scale: float = RIDGE_SCALE
) -> NuisanceModel:
    """Fit the outcome ridge regressions and the LDA propensity (module docstring) from ``stats``.

    Parameters
    ----------
    stats : ArmStatistics
        Summed (possibly noisy) statistics of the training folds.
    n_sites : int
        Width of the site one-hot at the start of each design row.
    noise_sd : float
        Standard deviation of the noise on each entry of the released statistics (0 when exact).
    ridge_scale : float
        ``lambda = ridge_scale * noise_sd * sqrt(d)``.
    """
    dim = stats.gram[0].shape[0]
    if not 1 <= n_sites < dim:
        raise InputError(f"n_sites {n_sites} does not fit design rows of length {dim}", "pass the study's sites")
    grams = [_psd(G) for G in stats.gram]
    ridge = ridge_penalty(noise_sd, dim, ridge_scale)
    outcome = tuple(np.linalg.solve(G + ridge * np.eye(dim), b) for G, b in zip(grams, stats.cross, strict=True))
    return NuisanceModel(_lda_propensity(grams, n_sites, ridge), outcome)  # type: ignore[arg-type]


def _lda_propensity(grams: list[NDArray[np.float64]], n_sites: int, ridge: float) -> NDArray[np.float64]:
    S = n_sites
    counts = np.column_stack([np.maximum(np.diag(G)[:S], 1.0) for G in grams])  # (S, 2)
    means = [G[:S, S:] / counts[:, [t]] for t, G in enumerate(grams)]  # (S, m) per arm
    total = counts.sum()
    within = grams[0][S:, S:] + grams[1][S:, S:]
    for t in (0, 1):
        within -= (means[t] * counts[:, [t]]).T @ means[t]
    within = _psd(within / total) + (ridge / total) * np.eye(within.shape[0])
    weights = counts[:, 0] * counts[:, 1] / counts.sum(axis=1)
    gap = (weights[:, None] * (means[1] - means[0])).sum(axis=0) / weights.sum()
    slope = np.linalg.solve(within, gap)
    intercepts = np.log(counts[:, 1] / counts[:, 0]) - 0.5 * (means[1] + means[0]) @ slope
    return np.concatenate([intercepts, slope])


def _psd(G: ArrayLike) -> NDArray[np.float64]:
    """The symmetric part of ``G`` with its negative eigenvalues set to 0."""
    sym = 0.5 * (np.asarray(G, dtype=float) + np.asarray(G, dtype=float).T)
    values, vectors = np.linalg.eigh(sym)
    return (vectors * np.clip(values, 0.0, None)) @ vectors.T
