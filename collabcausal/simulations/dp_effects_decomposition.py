"""Where a small ``dp_effects`` study's bias comes from: the pipeline with one noise source at a time (issue 38).

:func:`decomposed_estimate` runs the ``dp_effects`` computation in process from its pure functions
(:mod:`collabcausal.estimators.dp.effects`), with Gaussian noise of exactly the sds the study would
use (secure aggregation's summed shares, :func:`study_noise_sds`) but drawn from numpy, so that each
source can be switched off: the statistics' noise (the nuisance models then see exact Gram blocks),
the score sums' noise, the fitted propensity (replaced by the true one), the ridge. No ledger, no
party, no privacy: a measuring instrument for docs/dp-effects-benchmark.md, not a release path
(:func:`~collabcausal.simulations.dp_effects_benchmark.run_private` is the study itself).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from collabcausal.analyst.dp_effects import DPEffectsSpec
from collabcausal.analyst.dp_effects_feasibility import statistics_noise_sd
from collabcausal.estimators.dp.effects.design import FeatureMap
from collabcausal.estimators.dp.effects.nuisances import fit_nuisances
from collabcausal.estimators.dp.effects.release import unscaled_noise_sd
from collabcausal.estimators.dp.effects.scores import (
    components,
    release_sensitivity,
    replicate_components,
    subject_scores,
)
from collabcausal.estimators.dp.effects.statistics import ArmStatistics, entry_noise_sd, fold_statistics
from collabcausal.estimators.dp.zcdp import gaussian_zcdp_sigma
from collabcausal.secagg import SCALE_BITS, share_calibration
from collabcausal.simulations.multisite import Site


@dataclass(frozen=True)
class NoiseSources:
    """Which parts of a study carry their DP noise, and which nuisances it uses.

    ``statistics`` / ``scores``: noise on the Gram blocks / on the score sums; ``propensity``:
    ``"lda"`` (the study's) or ``"true"``; ``ridge_scale``: the ridge is
    ``max(ridge_scale x noise_sd x sqrt(d), 1)`` with the study's noise sd whether or not the
    statistics carry it (1: the study's; 0: the floor of one pseudo-observation).
    """

    statistics: bool = True
    scores: bool = True
    propensity: str = "lda"
    ridge_scale: float = 1.0


def study_noise_sds(spec: DPEffectsSpec, n_parties: int, n_subjects: int) -> tuple[float, float]:
    """Noise sd of one entry of the summed statistics and of the summed AIPW-ATE score sum, as the study draws them.

    The statistics': :func:`~collabcausal.analyst.dp_effects_feasibility.statistics_noise_sd` (pooled
    nuisances). The score sum's: with secure aggregation each of the ``n_parties`` adds a share calibrated so
    that ``n_parties - 1`` shares meet the target (:func:`~collabcausal.secagg.share_calibration`); without it
    each adds the full noise. ``n_subjects`` is the largest party's (the fixed-point range the shares are
    sized for).
    """
    feature_map = FeatureMap(spec.bounds, spec.outcome_range, n_parties)
    parts = components(spec.estimators, spec.estimands, feature_map.outcome_width, spec.trim)
    parts += replicate_components(parts, spec.nuisance_replicates)
    sensitivity, rho = release_sensitivity(parts), spec.budgets[1][0]
    if spec.secure_aggregation and n_parties > 1:
        share = share_calibration(sensitivity, rho, n_parties=n_parties, length=len(parts),
                                  value_bound=float(n_subjects))
        sd = share * math.sqrt(n_parties) / 2.0**SCALE_BITS
    else:
        sd = gaussian_zcdp_sigma(sensitivity, rho) * math.sqrt(n_parties)
    aipw = [c.name for c in parts].index("aipw_ate")
    statistics_sd = statistics_noise_sd(spec, {str(i): n_subjects for i in range(n_parties)})
    return statistics_sd, float(unscaled_noise_sd(sd, parts)[aipw])


@dataclass(frozen=True)
class PooledStudy:
    """A pooled-nuisance, full-sample ``dp_effects`` study on simulated sites, before any noise: its feature map,
    the study's noise sds (:func:`study_noise_sds`), each site's design and centred outcome, and the exact
    statistics summed over sites."""

    feature_map: FeatureMap
    statistics_sd: float
    score_sd: float
    designs: list[np.ndarray]
    outcomes: list[np.ndarray]
    statistics: np.ndarray


def pooled_study(sites: Sequence[Site], spec: DPEffectsSpec) -> PooledStudy:
    """The noiseless parts of ``spec``'s study on ``sites`` (:class:`PooledStudy`)."""
    feature_map = FeatureMap(spec.bounds, spec.outcome_range, len(sites))
    stats_sd, score_sd = study_noise_sds(spec, len(sites), max(len(s.T) for s in sites))
    designs = [feature_map.design(s.X, i) for i, s in enumerate(sites)]
    outcomes = [feature_map.centred_outcome(s.Y) for s in sites]
    total = sum(fold_statistics(D, s.T, y, feature_map.outcome_width)
                for D, s, y in zip(designs, sites, outcomes, strict=True))
    return PooledStudy(feature_map, stats_sd, score_sd, designs, outcomes, total)


def decomposed_estimate(sites: Sequence[Site], spec: DPEffectsSpec, sources: NoiseSources,
                        rng: np.random.Generator) -> float:
    """The AIPW ATE of a pooled-nuisance, full-sample ``dp_effects`` study with the chosen ``sources`` of noise."""
    study = pooled_study(sites, spec)
    feature_map, stats_sd, score_sd = study.feature_map, study.statistics_sd, study.score_sd
    designs, outcomes, total = study.designs, study.outcomes, study.statistics
    if sources.statistics:
        total = total + rng.normal(0.0, entry_noise_sd(stats_sd, feature_map.dim, spec.cross_weight), total.shape)
    model = fit_nuisances(ArmStatistics.unpack(total, feature_map.dim), feature_map.n_sites, stats_sd,
                          ridge_scale=sources.ridge_scale)
    parts = components(("aipw",), ("ate",), feature_map.outcome_width, spec.trim)[:1]
    phi_sum = 0.0
    for D, s, y in zip(designs, sites, outcomes, strict=True):
        e = (np.clip(s.propensity, spec.trim, 1 - spec.trim) if sources.propensity == "true"
             else model.propensity(D, spec.trim))
        phi_sum += float(subject_scores(parts, s.T, y, e, model.outcome(D, 0, feature_map),
                                        model.outcome(D, 1, feature_map)).sum())
    if sources.scores:
        phi_sum += rng.normal(0.0, score_sd)
    return phi_sum / sum(len(s.T) for s in sites)

