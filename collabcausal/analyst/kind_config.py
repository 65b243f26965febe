"""The sections of ``study.toml`` for the study kinds other than DC-QE: ``[adum]``, ``[cate]``, ``[discovery]``.

``[study] kind`` chooses the analysis (the kind's module runs it: :mod:`collabcausal.analyst.kinds`); each kind but
``"dcqe"`` needs its own section, and a section of another kind is refused. Public ranges come from
``[anchor_ranges]`` (every covariate's declared range), so a partition cell, a discovery pair's
bounds and the DC-QE anchor use the same declared numbers::

    [study]
    kind = "adum"                     # eps-ADUM (paper 001), parties hold different subjects
    [adum]
    epsilon = 1.0                     # each party's budget for the study
    outcome_range = [0, 125]          # public; outcomes clipped to it
    columns = ["age"]                 # the partition's covariates (ranges from [anchor_ranges])
    cells = [10]                      # a regular grid: cells per column ...
    # kmeans_clusters = 8             # ... or a DP k-means partition (eps/2 clustering, eps/2 model)

    [study]
    kind = "cate"                     # DC-QE, then DP-CATE (paper 004) on the analyst's (X^, T, Y)
    [cate]
    epsilon = 1.0                     # the release's (eps, delta), charged to the analyst's study ledger
    delta = 1e-5
    outcome_range = [0, 125]
    feature_bound = 0.2               # X^ columns clipped to [-0.2, 0.2]
    learner = "r"                     # or "dr"
    ledger = "study-ledger.sqlite"    # the analyst's ledger, relative to study.toml

    [study]
    kind = "dp_effects"               # DP-AIPW from two DP releases per party (docs/dp-effects.md)
    [dp_effects]
    epsilon = 1.0                     # each party's total (nuisances and scores)
    delta = 1e-6
    outcome_range = [0, 1]            # public; outcomes clipped to it
    trim = 0.1                        # propensities trimmed to [trim, 1 - trim]
    # estimators = ["aipw", "ipw"]; estimands = ["ate", "att"]; columns = [...] (default: all of
    # [anchor_ranges]); nuisance = "pooled" | "site"; nuisance_share = 0.5; n_folds = 1;
    # secure_aggregation = true; ridge_scale = 1.0

    [study]
    kind = "discovery"                # private ANM (paper 002) at every party holding a pair
    [discovery]
    epsilon = 1.0                     # each party's epsilon per pair (HSIC scores, every row protected)
    pairs = [["age", "re74"]]
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from collabcausal.analyst.kinds import KINDS
from collabcausal.config_schema import Section
from collabcausal.estimators.dp.effects.nuisances import RIDGE_SCALE
from collabcausal.estimators.dp.effects.projection_budget import GRAM_WEIGHT, MODIFIER_CLIP
from collabcausal.estimators.dp.effects.scores import DEFAULT_REPLICATES, MAX_REPLICATE_STEP, MAX_REPLICATES
from collabcausal.estimators.dp.effects.statistics import CROSS_WEIGHT_RANGE

__all__ = ["KINDS", "AdumSection", "CateSection", "DPEffectsSection", "DiscoverySection", "KindSection"]


def check_range(value: list[float], name: str) -> list[float]:
    """A validator's check of a declared ``[low, high]`` range (one message for every section)."""
    if not value[0] < value[1]:
        raise ValueError(f"{name} must be [low, high] with low < high, got {value}")
    return value


class AdumSection(Section):
    """``[adum]``: eps-ADUM summed over horizontally split parties (paper 001, Algorithm 1)."""

    epsilon: float = Field(gt=0, description="each party's epsilon for the study, a number > 0, e.g. 1.0")
    outcome_range: list[float] = Field(
        min_length=2, max_length=2, description="the public outcome range [low, high], e.g. [0, 125]"
    )
    columns: list[str] = Field(min_length=1, description='the partition\'s covariates, e.g. ["age"]')
    cells: list[Annotated[int, Field(ge=1)]] | None = Field(
        None, description="cells of a regular grid per column, e.g. [10] (or kmeans_clusters instead)"
    )
    kmeans_clusters: int | None = Field(None, ge=2, description="clusters of a DP k-means partition, e.g. 8")
    kmeans_iterations: int = Field(5, ge=1, description="Lloyd steps of DP k-means, an integer >= 1, e.g. 5")
    min_count: float = Field(1.0, ge=0, description="noisy counts below this use the pooled arm mean, e.g. 1.0")

    @field_validator("outcome_range")
    @classmethod
    def _outcome_range(cls, value: list[float]) -> list[float]:
        return check_range(value, "outcome_range")

    @model_validator(mode="after")
    def _one_partition(self) -> AdumSection:
        if (self.cells is None) == (self.kmeans_clusters is None):
            raise ValueError(
                "[adum] needs exactly one partition; fix: set cells = [..] (one count per column) "
                "or kmeans_clusters = K"
            )
        if self.cells is not None and len(self.cells) != len(self.columns):
            raise ValueError(
                f"[adum] has {len(self.columns)} columns but {len(self.cells)} cell counts; "
                "fix: give one cell count per column"
            )
        return self


class CateSection(Section):
    """``[cate]``: DP-CATE (paper 004, Theorem 3) on the collaborative representation after DC-QE."""

    epsilon: float = Field(gt=0, description="the release's epsilon, a number > 0, e.g. 1.0")
    delta: float = Field(1e-5, gt=0, lt=1, description="the release's delta, in (0, 1), e.g. 1e-5")
    outcome_range: list[float] = Field(
        min_length=2, max_length=2, description="the public outcome range [low, high], e.g. [0, 125]"
    )
    feature_bound: float = Field(gt=0, description="X^ columns are clipped to [-b, b]; b > 0, e.g. 0.2")
    learner: Literal["r", "dr"] = Field("r", description='"r" or "dr" (paper 004)')
    ledger: str = Field(
        "study-ledger.sqlite", min_length=1, description='the analyst\'s study ledger, e.g. "study-ledger.sqlite"'
    )
    ledger_epsilon: float | None = Field(None, gt=0, description="the study ledger's epsilon budget (default epsilon)")
    ledger_delta: float | None = Field(None, gt=0, lt=1, description="the study ledger's delta budget (default delta)")

    @field_validator("outcome_range")
    @classmethod
    def _outcome_range(cls, value: list[float]) -> list[float]:
        return check_range(value, "outcome_range")


class DiscoverySection(Section):
    """``[discovery]``: each party's private ANM direction of covariate pairs (paper 002), combined."""

    epsilon: float = Field(gt=0, description="each party's epsilon per pair, a number > 0, e.g. 1.0")
    pairs: list[Annotated[list[str], Field(min_length=2, max_length=2)]] = Field(
        min_length=1, description='covariate pairs [x, y], e.g. [["age", "re74"]]'
    )
    test_size: float = Field(0.5, gt=0, lt=1, description="the share of rows scored, in (0, 1), e.g. 0.5")
    release: Literal["margin", "scores", "vote"] = Field(
        "margin", description='"margin" (the margin of the ANM\'s DP scores alone, public bounds; the default: less '
        'noise than "scores", both scores, at the same budget) or "vote" (subsample-and-aggregate: every row '
        'protected, no bounds; docs/causal-discovery.md)')
    group_size: Annotated[int, Field(ge=20)] | Literal["auto"] = Field(
        "auto", description='with release = "vote": rows per voting group (e.g. 100) or "auto" (a public function '
        'of each party\'s n and epsilon)')
    rule: Literal["gp", "krr"] = Field("gp", description='with release = "vote": each group\'s ANM, "gp" or "krr"')

    @field_validator("pairs")
    @classmethod
    def _pairs(cls, value: list[list[str]]) -> list[list[str]]:
        for x, y in value:
            if x == y:
                raise ValueError(f"a pair needs two different covariates, got [{x!r}, {y!r}]")
        return value


class DPEffectsSection(Section):
    """``[dp_effects]``: DP-AIPW and Hajek IPW from two DP releases per party (docs/dp-effects.md)."""

    epsilon: float = Field(gt=0, description="each party's total epsilon for the study, a number > 0, e.g. 1.0")
    delta: float = Field(1e-6, gt=0, lt=1, description="each party's total delta, in (0, 1/n), e.g. 1e-6")
    outcome_range: list[float] = Field(
        min_length=2, max_length=2, description="the public outcome range [low, high], e.g. [0, 1]"
    )
    trim: float = Field(gt=0, lt=0.5, description="propensities trimmed to [trim, 1 - trim], in (0, 0.5), e.g. 0.1")
    # each listed estimator and estimand adds sums to the one release: the noise on every sum grows with them
    estimators: list[Literal["aipw", "ipw"]] = Field(["aipw"], min_length=1,
                                                     description='any of ["aipw", "ipw"] (default ["aipw"])')
    estimands: list[Literal["ate", "att"]] = Field(["ate"], min_length=1,
                                                   description='any of ["ate", "att"] (default ["ate"])')
    columns: list[str] | None = Field(None, min_length=1, description="covariates (default: all of [anchor_ranges])")
    nuisance: Literal["pooled", "site"] = Field(
        "pooled", description='"pooled" (one model, site intercepts) or "site" (each party its own)'
    )
    nuisance_share: float = Field(0.5, gt=0, lt=1, description="share of epsilon for the nuisances, in (0, 1)")
    n_folds: int = Field(1, ge=1, le=20, description="1: full-sample nuisances; 2..20: cross-fitting folds")
    secure_aggregation: bool = Field(True, description="true: the analyst sees only sums over parties")
    ridge_scale: float = Field(RIDGE_SCALE, ge=0,
                               description=f"ridge = ridge_scale x noise sd x sqrt(d), >= 0 (default {RIDGE_SCALE})")
    nuisance_replicates: int = Field(
        DEFAULT_REPLICATES, ge=0, le=MAX_REPLICATES,
        description=f"refits on re-noised statistics whose effect the interval counts, 0..{MAX_REPLICATES} (0: none)",
    )
    replicate_step: float = Field(
        1.0, ge=1.0, le=MAX_REPLICATE_STEP, description="each noise replicate re-noises the statistics with this many "
        f"times their noise sd and its move is divided by it, 1..{MAX_REPLICATE_STEP:g} (default 1): the copies' own "
        "release noise then weighs 1/step^2 as much in the interval; raise it only while each subject's replicate "
        "differences stay within their clip, e.g. 3 for a binary outcome with projection_clip "
        "(docs/dp-cate-projection.md, \"A larger replicate step\"); row groups only")
    modifiers: list[str] = Field([], description='covariates the CATE is projected on, e.g. ["age", "hba1c"] '
                                 "(docs/dp-cate-projection.md)")
    subgroups: dict[str, list[float]] = Field({}, description="bin edges per covariate, e.g. { age = [18, 50, 95] }")
    simultaneous: Literal["none", "bonferroni"] = Field(
        "none", description='"bonferroni": subgroup intervals simultaneous over all bins (default "none")')
    projection_clip: float | None = Field(
        None, gt=0, description="bound on each subject's modifier-weighted and subgroup scores, in outcome-range "
        "widths, e.g. 2 (default: the score's own bound; docs/dp-cate-projection.md)")
    projection_allocation: Literal["noise-trace", "equal"] = Field(
        "noise-trace", description='how the modifier-weighted sums share their budget: "noise-trace" (the split '
        'minimizing the coefficients\' summed noise variance) or "equal" (docs/dp-cate-projection.md)')
    modifier_clip: Annotated[float, Field(gt=0)] | Literal["none"] = Field(
        MODIFIER_CLIP, description="each modifier's weighted scores clipped at this many root mean squares "
        f'of the modifier (from the released Gram matrix), at most the bound (default {MODIFIER_CLIP:g}; "none": '
        "unclipped)")
    gram_weight: Annotated[float, Field(ge=1e-3, le=1.0)] | Literal["none"] = Field(
        GRAM_WEIGHT, description="the modifiers' Gram entries released again with the scores, at this budget "
        f'weight (default {GRAM_WEIGHT:g}; "none": from the statistics release alone)')
    projection_centre: float | None = Field(
        None, gt=0, description="the modifier-weighted scores centred on the outcome models' effect projected on "
        "the modifiers (from the statistics release) and bounded at this many outcome-range widths, e.g. 1 "
        "(default: not centred; docs/dp-cate-projection.md)")
    residual_clip: float | None = Field(
        None, gt=0, le=1, description="the projection's and subgroups' scores take the outcome unclipped with each "
        "residual y - mu_t clipped at this many outcome-range widths, e.g. 0.33 (default: the outcome clipped to its "
        "range; docs/dp-cate-projection.md, \"Clipping the residual\")")
    clip_compensation: float | None = Field(
        None, gt=0, le=1, description="for a binary outcome, with projection_clip: each clipped modifier-weighted "
        "and subgroup score gets back the loss its clip is expected to cost under the nuisance models, at most this "
        "many outcome-range widths, e.g. 0.1 (default: not; docs/dp-cate-projection.md, \"The clip's expected loss "
        "added back\")")
    cross_weight: float = Field(
        1.0, ge=CROSS_WEIGHT_RANGE[0], le=CROSS_WEIGHT_RANGE[1], description="the statistics release's outcome "
        "cross sums weighted by this against its Gram matrices (1: unweighted); 2 halved the outcome models' "
        "noise term on a continuous outcome and cost accuracy on a binary one (docs/dp-effects.md, \"Weighting the "
        "outcome cross sums\"); row groups only")
    norm_bounds: list[Annotated[float, Field(gt=0)]] | None = Field(
        None, min_length=2, max_length=2, description="column groups only: each party's bound on the squared norm "
        "of its covariates scaled to [-1, 1], label holder first, e.g. [2.7, 6.1] (docs/dp-effects-vertical.md)")

    @field_validator("outcome_range")
    @classmethod
    def _outcome_range(cls, value: list[float]) -> list[float]:
        return check_range(value, "outcome_range")

    @field_validator("estimators", "estimands")
    @classmethod
    def _distinct(cls, value: list[str]) -> list[str]:
        if len(set(value)) != len(value):
            raise ValueError(f"list each entry once, got {value}")
        return value


KindSection = AdumSection | CateSection | DiscoverySection | DPEffectsSection
