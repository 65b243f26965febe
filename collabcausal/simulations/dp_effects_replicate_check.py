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
* the share of per-subject differences the clip changed, and the replicates' mean move.

Noise of exactly the study's sds (:func:`~.dp_effects_decomposition.study_noise_sds`), drawn from numpy:
a measuring instrument, not a release path (pooled full-sample nuisances, the study's default).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from collabcausal.analyst.dp_effects import DPEffectsSpec
from collabcausal.estimators.dp.effects.nuisances import fit_nuisances
from collabcausal.estimators.dp.effects.scores import REPLICATE_CLIP, components, subject_scores
from collabcausal.estimators.dp.effects.statistics import ArmStatistics
from collabcausal.simulations.dp_effects_decomposition import pooled_study
from collabcausal.simulations.multisite import Site


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


def antithetic_term(moves: np.ndarray) -> float:
    """Mean squared half-difference ``((m_2k - m_2k+1) / 2)^2`` of moves refitted at ``+eta_k`` and ``-eta_k``.

    With the estimate ``f(eps) = g' eps + eps' H eps / 2`` in the statistics' noise ``eps ~ N(0, s^2 I)``, the
    target is ``Var f = s^2 |g|^2 + s^4 tr(H^2) / 2``; a pair's half-difference is ``(g + H eps)' eta_k`` with
    ``E = s^2 |g|^2 + s^4 tr(H^2)``, between ``Var f`` and ``2 Var f``, where an independent copy's square also
    carries ``eta' H eta / 2`` and its mean (docs/dp-effects.md, "Coverage").
    """
    return float(np.mean(((moves[0::2] - moves[1::2]) / 2.0) ** 2))


def replicate_check(sites: Sequence[Site], spec: DPEffectsSpec, rng: np.random.Generator, *,
                    draws: int = 40) -> ReplicateCheck:
    """The conditional variance against one study's replicate terms on ``sites`` (module docstring)."""
    pooled = pooled_study(sites, spec)
    feature_map, stats_sd = pooled.feature_map, pooled.statistics_sd
    designs, outcomes, total = pooled.designs, pooled.outcomes, pooled.statistics
    parts = components(("aipw",), ("ate",), feature_map.outcome_width, spec.trim)[:1]
    clip = REPLICATE_CLIP * parts[0].width

    def scores(statistics: np.ndarray) -> np.ndarray:
        model = fit_nuisances(ArmStatistics.unpack(statistics, feature_map.dim), feature_map.n_sites, stats_sd,
                              ridge_scale=spec.ridge_scale)
        return np.concatenate([
            subject_scores(parts, s.T, y, model.propensity(D, spec.trim), model.outcome(D, 0, feature_map),
                           model.outcome(D, 1, feature_map))[:, 0]
            for D, s, y in zip(designs, sites, outcomes, strict=True)])

    def noise() -> np.ndarray:
        return rng.normal(0.0, stats_sd, total.shape)

    conditional = np.var([scores(total + noise()).mean() for _ in range(draws)], ddof=1)
    study = total + noise()
    at_study = scores(study)
    differences = np.array([scores(study + noise()) - at_study for _ in range(spec.nuisance_replicates)])
    clipped = np.clip(differences, -clip, clip).mean(axis=1)
    etas = [noise() for _ in range(spec.nuisance_replicates // 2)]
    paired = np.array([scores(study + sign * eta) - at_study for eta in etas for sign in (1.0, -1.0)])
    return ReplicateCheck(float(conditional), float(np.mean(clipped**2)),
                          float(np.mean(differences.mean(axis=1) ** 2)),
                          antithetic_term(np.clip(paired, -clip, clip).mean(axis=1)),
                          antithetic_term(paired.mean(axis=1)),
                          float(np.mean(np.abs(differences) > clip)), float(clipped.mean()))
