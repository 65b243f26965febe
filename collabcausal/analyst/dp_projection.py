"""The coordinator's side of effect modification in ``dp_effects`` (docs/dp-cate-projection.md).

:func:`plan_projection` turns ``[dp_effects] modifiers`` and ``subgroups`` into the request's
projection and its added sums, and refuses a bad declaration before anything is charged, saying
how much each modifier and partition adds to the noise; :func:`projection_report` computes the
best linear projection and the subgroup effects from the released sums (post-processing).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from numpy.typing import NDArray

from collabcausal.analyst.dp_effects_spec import DPEffectsSpec, Round
from collabcausal.errors import InputError
from collabcausal.estimators.dp.effects.analysis import NoiseReplicate, released_sums
from collabcausal.estimators.dp.effects.design import FeatureMap
from collabcausal.estimators.dp.effects.nuisances import NuisanceModel
from collabcausal.estimators.dp.effects.projection import (
    Partition,
    Projection,
    ProjectionLayout,
    check_projection,
    projection_layout,
    scores_sensitivity,
)
from collabcausal.estimators.dp.effects.projection_analysis import (
    SIMULTANEOUS,
    best_linear_projection,
    bin_labels,
    effect_projection,
    modifier_gram,
    pooled_gram,
    subgroup_effects,
)
from collabcausal.estimators.dp.effects.projection_budget import modifier_clips, noise_trace_weights
from collabcausal.estimators.dp.effects.release import unscaled_noise_sd
from collabcausal.estimators.dp.effects.scores import Component, release_sensitivity

ALLOCATIONS = ("noise-trace", "equal")
"""How the projection's point sums share their budget: the split minimizing the coefficients' summed DP-noise
variance (:mod:`~collabcausal.estimators.dp.effects.projection_budget`), or weight 1 each."""
MAX_NOISE_GROWTH = 3.0
"""Largest factor by which the modifiers and subgroups may raise the noise sd of every score sum (the ATE's too)."""


@dataclass(frozen=True)
class ProjectionPlan:
    """The projection a study asks, its added sums and the score release's sensitivity with and without them."""

    projection: Projection
    layout: ProjectionLayout
    sensitivity: float
    base_sensitivity: float


def plan_projection(spec: DPEffectsSpec, feature_map: FeatureMap,
                    parts: tuple[Component, ...]) -> ProjectionPlan | None:
    """The study's projection, or ``None`` without modifiers and subgroups; refusals name the problem and the fix."""
    if not spec.modifiers and not spec.subgroups:
        return None
    columns = list(spec.columns)

    def index(name: str, what: str) -> int:
        if name not in columns:
            raise InputError(f"dp_effects {what} {name!r} is not a covariate of the study ({', '.join(columns)})",
                             f"declare {name!r} in [anchor_ranges] (and columns), or drop it from {what}s")
        return columns.index(name)

    if spec.projection_allocation not in ALLOCATIONS:
        raise InputError(f"projection_allocation = {spec.projection_allocation!r} is not one of {ALLOCATIONS}",
                         'use "noise-trace" (the default) or "equal"')
    clip = spec.modifier_clip
    if clip is not None and (isinstance(clip, bool) or not isinstance(clip, (int, float)) or not math.isfinite(clip)
                             or clip <= 0):
        raise InputError(f"modifier_clip = {clip!r} is not a positive number",
                         "declare it in root-mean-squares of the modifier, e.g. 2, or leave it out")
    if spec.simultaneous not in SIMULTANEOUS:
        raise InputError(f"simultaneous = {spec.simultaneous!r} is not one of {SIMULTANEOUS}",
                         'use "bonferroni" or "none"')
    if spec.projection_centre is not None and spec.nuisance != "pooled":
        raise InputError("projection_centre needs the pooled nuisance models (the centre is computed from the pooled "
                         "statistics)", 'use nuisance = "pooled", or leave projection_centre out')
    if "aipw_ate" not in {c.name for c in parts}:
        raise InputError("dp_effects modifiers and subgroups project the AIPW ATE's score",
                         'include "aipw" in estimators and "ate" in estimands')
    line = (0.0,) * (len(spec.modifiers) + 1)  # with a centre, the pilots' placeholders until the statistics are in
    centred = spec.projection_centre is not None
    projection = Projection(tuple(index(m, "modifier") for m in spec.modifiers),
                            tuple(Partition(index(name, "subgroup"), tuple(edges)) for name, edges in spec.subgroups),
                            spec.projection_clip, gram_weight=spec.gram_weight, centre=spec.projection_centre,
                            pilot=line if centred else None, residual_clip=spec.residual_clip,
                            replicate_pilots=(line,) * spec.nuisance_replicates if centred else None,
                            clip_compensation=spec.clip_compensation)
    check_projection(projection, feature_map, columns)
    layout = projection_layout(projection, feature_map.outcome_width, spec.trim, spec.nuisance_replicates)
    base = release_sensitivity(parts)
    total = scores_sensitivity(parts, layout)
    if total > MAX_NOISE_GROWTH * base:
        raise InputError(
            f"{len(projection.modifiers)} modifiers and {len(projection.partitions)} subgroup partitions raise the "
            f"noise sd of every score sum (the ATE's too) {total / base:.2f}-fold, above {MAX_NOISE_GROWTH:g} "
            f"({_costs(projection, feature_map, spec, parts)}); nothing was charged",
            "declare fewer modifiers or subgroups, or a larger epsilon")
    return ProjectionPlan(projection, layout, total, base)


def _costs(projection: Projection, feature_map: FeatureMap, spec: DPEffectsSpec, parts: tuple[Component, ...]) -> str:
    """What one modifier and each partition alone would do to the noise sd (for the refusal)."""
    base = release_sensitivity(parts)

    def growth(p: Projection) -> float:
        layout = projection_layout(p, feature_map.outcome_width, spec.trim, spec.nuisance_replicates)
        return scores_sensitivity(parts, layout) / base

    rho = projection.residual_clip
    one = growth(Projection(projection.modifiers[:1], (), projection.clip, residual_clip=rho)) if projection.modifiers \
        else 1.0
    cells = ", ".join(f"{spec.columns[g.column]}'s {g.n_bins} bins "
                      f"{growth(Projection((), (g,), projection.clip, residual_clip=rho)):.2f}x"
                      for g in projection.partitions)
    return f"one modifier alone {one:.2f}x" + (f", {cells}" if cells else "")


def allocate_projection(spec: DPEffectsSpec, plan: ProjectionPlan, parts: Sequence[Component], stats: Round,
                        feature_map: FeatureMap, n: int, models: Sequence[NuisanceModel] = (),
                        site_counts: Sequence[int] = (), replicates: Sequence[NoiseReplicate] = ()) -> ProjectionPlan:
    """The plan with its modifier clips (``modifier_clip``), point sums' weights (``projection_allocation``) and
    centre (``projection_centre``: the pilot from the fold ``models`` and the sites' subject counts, and each noise
    replicate's pilot from its statistics and models, computed the same way).

    Post-processing of the statistics release, before the score request
    (:mod:`~collabcausal.estimators.dp.effects.projection_budget`,
    :func:`~collabcausal.estimators.dp.effects.projection_analysis.effect_projection`): none raises the
    planned sensitivity, so nothing planned or refused changes. Unchanged with ``"equal"``, no
    ``modifier_clip`` and no centre, without modifiers, or when the Gram matrix gives no allocation.
    """
    projection = plan.projection
    if not projection.modifiers or stats.total is None or (
            spec.projection_allocation == "equal" and spec.modifier_clip is None and projection.centre is None):
        return plan
    rows = stats.total.reshape(spec.n_folds, -1)
    gram, _ = modifier_gram(rows, feature_map, projection, n, stats.total_noise_sd)
    if projection.centre is not None:
        def pilot(statistics: NDArray[np.float64], fold_models: Sequence[NuisanceModel],
                  own_gram: NDArray[np.float64] | None = None) -> tuple[float, ...]:
            if own_gram is None:
                own_gram, _ = modifier_gram(statistics, feature_map, projection, n, stats.total_noise_sd)
            return tuple(float(v) for v in effect_projection(statistics, feature_map, projection, fold_models,
                                                             site_counts, own_gram))

        projection = replace(projection, pilot=pilot(rows, models, gram),
                             replicate_pilots=tuple(pilot(r.statistics, r.models) for r in replicates))

    def layout_of(p: Projection) -> ProjectionLayout:
        return projection_layout(p, feature_map.outcome_width, spec.trim, spec.nuisance_replicates)

    if spec.modifier_clip is not None:
        projection = replace(projection, modifier_clips=modifier_clips(gram, n, spec.modifier_clip))
    if spec.projection_allocation == "noise-trace":
        sums = [c for c in layout_of(projection).parts if c.point and c.name.startswith("blp_")]
        weights = noise_trace_weights(gram, [c.width for c in sums], len(projection.modifiers) + 1 - len(sums))
        projection = projection if weights is None else replace(projection, weights=weights)
    layout = layout_of(projection)
    return ProjectionPlan(projection, layout, scores_sensitivity(parts, layout), plan.base_sensitivity)


def projection_report(spec: DPEffectsSpec, plan: ProjectionPlan, parts: Sequence[Component], scores: Round,
                      stats: Round, feature_map: FeatureMap, n: int) -> dict[str, Any]:
    """report.json's ``effect_modification``: coefficients and subgroup effects with intervals (strict JSON)."""
    assert scores.total is not None and stats.total is not None
    widths = np.array([c.width for c in parts])
    weights = np.array([c.weight for c in parts])
    sums, noise, replicates, replicate_sd = released_sums(
        scores.total * widths / weights, unscaled_noise_sd(scores.total_noise_sd, parts), parts,
        step=spec.replicate_step)
    projection = plan.projection
    names = [spec.columns[j] for j in projection.modifiers]
    out: dict[str, Any] = {
        "modifiers": names, "simultaneous": spec.simultaneous,
        "noise_growth": plan.sensitivity / plan.base_sensitivity,
        "allocation": {"rule": spec.projection_allocation, "modifier_clip": spec.modifier_clip,
                       "gram_weight": spec.gram_weight, "centre": projection.centre,
                       "residual_clip": projection.residual_clip, "clip_compensation": projection.clip_compensation,
                       "pilot": None if projection.pilot is None else list(projection.pilot),
                       "replicate_pilots": None if projection.replicate_pilots is None else [
                           list(g) for g in projection.replicate_pilots],
                       "sums": {c.name: {"weight": c.weight, "bound": c.high} for c in plan.layout.parts
                                if c.point and c.name.startswith("blp_")}},
        "note": ("coefficients of the best linear projection of the CATE on (1, z) with z the modifiers scaled to "
                 "[-1, 1] by their public ranges; 'intercept' is the projected effect at the ranges' midpoints, "
                 "'per_unit' a slope per unit of the modifier"),
    }
    if projection.modifiers:
        rows = stats.total.reshape(spec.n_folds, -1)
        gram, gram_sd = pooled_gram(*modifier_gram(rows, feature_map, projection, n, stats.total_noise_sd), sums,
                                    noise)
        scales = [(feature_map.bounds[j][1] - feature_map.bounds[j][0]) / 2 for j in projection.modifiers]
        coefficients = best_linear_projection(sums, noise, gram, gram_sd, names, scales, replicates=replicates,
                                              replicate_sd=replicate_sd, alpha=spec.alpha, pilot=projection.pilot,
                                              replicate_pilots=_pilots_per_step(projection, spec.replicate_step))
        out["coefficients"] = [c.to_dict() for c in coefficients]
    if projection.partitions:
        labels = bin_labels(projection, list(spec.columns))
        effects = subgroup_effects(sums, noise, projection, labels, replicates=replicates, replicate_sd=replicate_sd,
                                   alpha=spec.alpha, simultaneous=spec.simultaneous)
        out["subgroups"] = [e.to_dict() | {"subgroup": e.estimand, "n_noisy": sums[f"cell_{g}_{c}_n"]}
                            for e, (g, c) in zip(effects, _bins(projection), strict=True)]
    return _finite(out)


def _bins(projection: Projection) -> list[tuple[int, int]]:
    return [(g, c) for g, part in enumerate(projection.partitions) for c in range(part.n_bins)]


def _finite(value: Any) -> Any:
    """Strict JSON: non-finite floats become ``None``."""
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _pilots_per_step(projection: Projection, step: float) -> list[NDArray[np.float64]] | None:
    """Each copy's pilot as it would be one noise sd away: ``gamma + (gamma_b - gamma) / step``
    (:func:`~collabcausal.estimators.dp.effects.analysis.noise_replicates`), like its sums."""
    if projection.replicate_pilots is None or projection.pilot is None:
        return None
    gamma = np.asarray(projection.pilot, dtype=float)
    return [gamma + (np.asarray(g, dtype=float) - gamma) / step for g in projection.replicate_pilots]
