"""Study kind ``dp_effects``: DP average effects from per-site statistics (:mod:`collabcausal.analyst.dp_effects`).

Registered in :data:`collabcausal.analyst.kinds.KIND_MODULES`; :func:`run` is its entry point: it
builds the :class:`~collabcausal.analyst.dp_effects.DPEffectsSpec` of the study's ``[dp_effects]``
section and runs :func:`~collabcausal.analyst.dp_effects.dp_effects_results` (row groups of one party),
or :func:`~collabcausal.analyst.dp_effects_vertical.vertical_effects_results` (row groups of two parties
holding different covariates of the same subjects: docs/dp-effects-vertical.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from collabcausal.errors import InputError

UNALIGNED = ("dp_effects on column groups: align = false, so each row group's parties were taken to hold the same "
             "subjects in the same row order; set align = true (a shared [alignment] key_file at the parties) unless "
             "their tables were aligned beforehand")

if TYPE_CHECKING:
    from collabcausal.analyst.config import StudyConfig
    from collabcausal.analyst.dcqe import DCQEPlan
    from collabcausal.analyst.dp_effects import DPEffectsSpec
    from collabcausal.analyst.grid import Grid
    from collabcausal.analyst.kind_config import DPEffectsSection


def run(grid: Grid, config: StudyConfig, plan: DCQEPlan, *, progress: bool = False) -> dict[str, Any]:
    """The ``dp_effects`` study over the joined parties of ``plan``: row groups of one party each, or of a
    label holder and a party holding other covariates of the same subjects (column groups)."""
    if any(len(group) > 1 for group in plan.row_groups):
        from collabcausal.analyst.dp_effects_vertical import vertical_effects_results

        report = vertical_effects_results(grid, dp_effects_spec(config), config.study, plan.row_groups,
                                          plan.label_holders, timeout=config.task_timeout)
        if not config.align:
            report["warnings"].append(UNALIGNED)
        return report
    from collabcausal.analyst.dp_effects import dp_effects_results

    if config.analysis.norm_bounds is not None:  # type: ignore[union-attr]
        raise InputError("[dp_effects] norm_bounds applies to column groups (two or more parties per row group)",
                         "drop norm_bounds, or list the parties of each row group that hold its columns")
    return dp_effects_results(grid, dp_effects_spec(config), config.study, plan.parties(), timeout=config.task_timeout,
                              on_missing=config.on_missing_party)


def dp_effects_spec(config: StudyConfig) -> DPEffectsSpec:
    """The :class:`~collabcausal.analyst.dp_effects.DPEffectsSpec` of a study's ``[dp_effects]`` and ranges."""
    from collabcausal.analyst.dp_effects import DPEffectsSpec

    section: DPEffectsSection = config.analysis  # type: ignore[assignment]
    columns = tuple(section.columns or config.anchor_ranges)
    return DPEffectsSpec(
        epsilon=section.epsilon, delta=section.delta, outcome_range=tuple(section.outcome_range),
        trim=section.trim, columns=columns, bounds=tuple(tuple(config.anchor_ranges[c]) for c in columns),
        estimators=tuple(section.estimators), estimands=tuple(section.estimands), nuisance=section.nuisance,
        nuisance_share=section.nuisance_share, n_folds=section.n_folds,
        secure_aggregation=section.secure_aggregation, ridge_scale=section.ridge_scale,
        nuisance_replicates=section.nuisance_replicates, replicate_step=section.replicate_step,
        seed=config.settings.get("seed", 0),
        modifiers=tuple(section.modifiers), subgroups=tuple((c, tuple(e)) for c, e in section.subgroups.items()),
        simultaneous=section.simultaneous, projection_clip=section.projection_clip,
        projection_allocation=section.projection_allocation,
        modifier_clip=None if section.modifier_clip == "none" else section.modifier_clip,
        gram_weight=None if section.gram_weight == "none" else section.gram_weight,
        projection_centre=section.projection_centre, residual_clip=section.residual_clip,
        clip_compensation=section.clip_compensation,
        cross_weight=section.cross_weight,
        norm_bounds=None if section.norm_bounds is None else tuple(section.norm_bounds),
    )
