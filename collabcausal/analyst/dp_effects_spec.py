"""What a ``dp_effects`` study asks and what one of its rounds returned (shared by :mod:`.dp_effects` and
:mod:`.dp_projection`, which the study runner imports)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from collabcausal.estimators.dp.effects.nuisances import RIDGE_SCALE
from collabcausal.estimators.dp.effects.projection_budget import GRAM_WEIGHT, MODIFIER_CLIP
from collabcausal.estimators.dp.effects.scores import DEFAULT_REPLICATES
from collabcausal.estimators.dp.zcdp import zcdp_rho


@dataclass(frozen=True)
class DPEffectsSpec:
    """What a ``dp_effects`` study asks (``[dp_effects]`` of study.toml; docs/protocol.md)."""

    epsilon: float
    delta: float
    outcome_range: tuple[float, float]
    trim: float
    columns: tuple[str, ...]
    bounds: tuple[tuple[float, float], ...]
    estimators: tuple[str, ...] = ("aipw",)
    estimands: tuple[str, ...] = ("ate",)
    nuisance: str = "pooled"
    nuisance_share: float = 0.5
    n_folds: int = 1
    secure_aggregation: bool = True
    ridge_scale: float = RIDGE_SCALE
    alpha: float = 0.05
    nuisance_replicates: int = DEFAULT_REPLICATES
    replicate_step: float = 1.0
    seed: int = 0
    modifiers: tuple[str, ...] = ()
    subgroups: tuple[tuple[str, tuple[float, ...]], ...] = ()
    simultaneous: str = "none"
    projection_clip: float | None = None
    projection_allocation: str = "noise-trace"
    modifier_clip: float | None = MODIFIER_CLIP
    gram_weight: float | None = GRAM_WEIGHT
    projection_centre: float | None = None
    residual_clip: float | None = None
    clip_compensation: float | None = None
    cross_weight: float = 1.0
    norm_bounds: tuple[float, ...] | None = None

    @property
    def budgets(self) -> tuple[tuple[float, float], tuple[float, float]]:
        """(rho, delta) of the statistics release and of the scores release (module docstring)."""
        rho, share = zcdp_rho(self.epsilon, self.delta), self.nuisance_share
        return (share * rho, self.delta / 2), ((1.0 - share) * rho, self.delta / 2)


@dataclass
class Round:
    """One release over the study's parties: what each party was asked, and what came back (summed or not)."""

    parties: list[str]
    values: dict[str, NDArray[np.float64]] = field(default_factory=dict)
    total: NDArray[np.float64] | None = None
    total_noise_sd: float = 0.0
    party_noise_sd: float = 0.0
    attempts: int = 1
    unpinned: list[str] = field(default_factory=list)
    lost: dict[str, str] = field(default_factory=dict)
    """Party -> when (UTC) it was lost and dropped from this round (``on_missing_party = "continue"``)."""
