"""Does the interval's nuisance-noise term measure what it should? The noise replicates in process (issue 38).

A ``dp_effects`` interval adds the variance that the statistics' noise gives the estimate through the
nuisance models, estimated from ``B`` noise replicates (a parametric bootstrap of the statistics' noise,
Ferrando, Wang & Sheldon 2022; :mod:`collabcausal.estimators.dp.effects.scores`): refits on the noisy
statistics plus fresh noise, each subject's AIPW-ATE score difference clipped to ``REPLICATE_CLIP`` of
the score's range. :func:`replicate_check` holds one data set fixed and sets beside each other

* the **conditional variance** the term should estimate: the variance of the AIPW-ATE estimate (score sum
  without its own noise, over n) over ``draws`` fresh draws of the statistics' noise;
* one study's **replicate mean square** ``mean_b d_b^2`` (what the interval adds, before the replicate sums'
  own noise is removed), with the study's clip and without it;
* the same ``B`` refits drawn instead in **antithetic pairs** (``+eta_k``, ``-eta_k``), with the pairs' mean
  squared half-difference in place of the mean square (:func:`antithetic_term`), clipped and unclipped: a
  design that drops the even-order part of the moves, measured here and not adopted (docs/dp-effects.md,
  "Coverage");
* the share of per-subject differences the clip changed, and the replicates' mean move;
* two redesigns (docs/dp-effects.md, "Two redesigns of the term measured in process"): the study's term with
  the replicate sums' own DP noise drawn and removed, at the clips :data:`CLIP_FRACTIONS` of the score's range
  (the sums' noise sd grows with the clip; their budget share stays :data:`~.scores.REPLICATE_SHARE`);
  and the **first-order term** ``mean_b (g' Delta theta_b)^2``, ``g`` the exact gradient of the estimate in
  the nuisance coefficients at the study's model (central differences), without and with the DP noise that
  released gradient sums would carry at the replicates' share (:func:`gradient_range`).

Noise of exactly the study's sds (:func:`~.dp_effects_decomposition.study_noise_sds`), drawn from numpy:
a measuring instrument, not a release path (pooled full-sample nuisances, the study's default).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from collabcausal.analyst.dp_effects import DPEffectsSpec
from collabcausal.estimators.dp.effects.design import FeatureMap
from collabcausal.estimators.dp.effects.nuisances import NuisanceModel, fit_nuisances
from collabcausal.estimators.dp.effects.scores import REPLICATE_CLIP, REPLICATE_SHARE, components, subject_scores
from collabcausal.estimators.dp.effects.statistics import ArmStatistics, entry_noise_sd
from collabcausal.simulations.dp_effects_decomposition import pooled_study
from collabcausal.simulations.multisite import Site

CLIP_FRACTIONS = (1.0 / 40.0, 1.0 / 20.0, 1.0 / 10.0, 1.0 / 5.0)
"""Clips at which the term is measured with the replicate sums' own noise, as fractions of the score's range (1/40:
the release's until 29 Nov 2026; 1/10: since)."""


@dataclass(frozen=True)
class ReplicateCheck:
    """One data set's figures (module docstring)."""

    conditional_var: float
    replicate_ms: float
    replicate_ms_unclipped: float
    antithetic: float
    antithetic_unclipped: float
    clip_share: float
    mean_move: float
    noisy_terms: tuple[float, ...]
    first_order: float
    first_order_noisy: float


def antithetic_term(moves: np.ndarray) -> float:
    """Mean squared half-difference ``((m_2k - m_2k+1) / 2)^2`` of moves refitted at ``+eta_k`` and ``-eta_k``.

    With the estimate ``f(eps) = g' eps + eps' H eps / 2`` in the statistics' noise ``eps ~ N(0, s^2 I)``, the
    target is ``Var f = s^2 |g|^2 + s^4 tr(H^2) / 2``; a pair's half-difference is ``(g + H eps)' eta_k`` with
    ``E = s^2 |g|^2 + s^4 tr(H^2)``, between ``Var f`` and ``2 Var f``, where an independent copy's square also
    carries ``eta' H eta / 2`` and its mean (docs/dp-effects.md, "Coverage").
    """
    return float(np.mean(((moves[0::2] - moves[1::2]) / 2.0) ** 2))


def noisy_term(sums: np.ndarray, sd: np.ndarray, n: int, rng: np.random.Generator) -> float:
    """The study's term from replicate sums ``sums`` released with noise of sd ``sd``: ``mean_b d_b^2`` minus the
    noise's share, floored at 0 (:mod:`collabcausal.estimators.dp.effects.pooling`)."""
    released = (sums + rng.normal(0.0, 1.0, sums.shape) * sd) / n
    return max(float(np.mean(released**2) - np.mean(sd**2) / n**2), 0.0)


def gradient_range(feature_map: FeatureMap, trim: float) -> float:
    """L2 range of one subject's gradient of the AIPW-ATE score in the three models' coefficients.

    ``d phi / d beta_t`` is ``R d (1 - T/e)`` or ``-R d (1 - (1 - T)/(1 - e))`` (at most ``R |d| (1 - t)/t``) and
    ``d phi / d gamma`` is ``-d [T (y' - mu1)(1 - e)/e + (1 - T)(y' - mu0) e/(1 - e)]`` (at most the same), with
    ``|d| <= sqrt(1 + m)`` on the design scale (a site indicator and ``m`` covariates in [-1, 1]).
    """
    m = feature_map.dim - feature_map.n_sites
    return math.sqrt(3.0) * feature_map.outcome_width * (1.0 - trim) / trim * math.sqrt(1.0 + m)


def _gradient(mean_score: Callable[[np.ndarray], float], theta: np.ndarray, step: float = 1e-5) -> np.ndarray:
    """Central differences of ``mean_score`` at ``theta``."""
    basis = np.eye(len(theta)) * step
    return np.array([(mean_score(theta + e) - mean_score(theta - e)) / (2.0 * step) for e in basis])


def replicate_check(sites: Sequence[Site], spec: DPEffectsSpec, rng: np.random.Generator, *,
                    draws: int = 40) -> ReplicateCheck:
    """The conditional variance against one study's replicate terms on ``sites`` (module docstring)."""
    pooled = pooled_study(sites, spec)
    feature_map, stats_sd = pooled.feature_map, pooled.statistics_sd
    designs, outcomes, total = pooled.designs, pooled.outcomes, pooled.statistics
    parts = components(("aipw",), ("ate",), feature_map.outcome_width, spec.trim)[:1]
    clip = REPLICATE_CLIP * parts[0].width

    dim = feature_map.dim

    def fit(statistics: np.ndarray) -> NuisanceModel:
        return fit_nuisances(ArmStatistics.unpack(statistics, dim), feature_map.n_sites, stats_sd,
                             ridge_scale=spec.ridge_scale)

    def coefficients(model: NuisanceModel) -> np.ndarray:
        return np.concatenate([model.propensity_coef, *model.outcome_coef])

    def scores(model: NuisanceModel) -> np.ndarray:
        return np.concatenate([
            subject_scores(parts, s.T, y, model.propensity(D, spec.trim), model.outcome(D, 0, feature_map),
                           model.outcome(D, 1, feature_map))[:, 0]
            for D, s, y in zip(designs, sites, outcomes, strict=True)])

    def noise() -> np.ndarray:
        return rng.normal(0.0, entry_noise_sd(stats_sd, feature_map.dim, spec.cross_weight), total.shape)

    conditional = np.var([scores(fit(total + noise())).mean() for _ in range(draws)], ddof=1)
    study = total + noise()
    study_model = fit(study)
    at_study = scores(study_model)
    copies = [fit(study + noise()) for _ in range(spec.nuisance_replicates)]
    differences = np.array([scores(copy) - at_study for copy in copies])
    clipped = np.clip(differences, -clip, clip).mean(axis=1)
    n, weight = differences.shape[1], math.sqrt(REPLICATE_SHARE / len(copies))
    noisy = tuple(noisy_term(np.clip(differences, -f * parts[0].width, f * parts[0].width).sum(axis=1),
                             np.full(len(copies), pooled.score_sd * 2.0 * f / weight), n, rng) for f in CLIP_FRACTIONS)
    theta = coefficients(study_model)
    moves = np.array([coefficients(copy) - theta for copy in copies])
    gradient = _gradient(lambda t: float(scores(NuisanceModel(t[:dim], (t[dim:2 * dim], t[2 * dim:]))).mean()), theta)
    gradient_sd = pooled.score_sd * gradient_range(feature_map, spec.trim) / parts[0].width / math.sqrt(REPLICATE_SHARE)
    released = gradient + rng.normal(0.0, gradient_sd / n, gradient.shape)
    first_noisy = float(np.mean((moves @ released) ** 2) - (gradient_sd / n) ** 2 * np.mean(np.sum(moves**2, axis=1)))
    etas = [noise() for _ in range(spec.nuisance_replicates // 2)]
    paired = np.array([scores(fit(study + sign * eta)) - at_study for eta in etas for sign in (1.0, -1.0)])
    return ReplicateCheck(float(conditional), float(np.mean(clipped**2)),
                          float(np.mean(differences.mean(axis=1) ** 2)),
                          antithetic_term(np.clip(paired, -clip, clip).mean(axis=1)),
                          antithetic_term(paired.mean(axis=1)),
                          float(np.mean(np.abs(differences) > clip)), float(clipped.mean()), noisy,
                          float(np.mean((moves @ gradient) ** 2)), max(first_noisy, 0.0))
