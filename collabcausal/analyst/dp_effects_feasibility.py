"""Is a ``dp_effects`` study large enough for its epsilon? A refusal before anything is charged (issue 38, item 4).

The nuisance models are ridge regressions and an LDA propensity fitted from noisy Gram blocks with
the ridge ``lambda = max(ridge_scale x noise_sd x sqrt(d), 1)`` (:mod:`~collabcausal.estimators.dp.effects.nuisances`),
and every site's intercepts rest on its own counts. When ``lambda`` is a large share of a site's
subjects, the models are mostly noise and shrinkage: the outcome models are pulled to the middle of
the outcome range and the propensity to 1/2, both wrong in the same direction, and the doubly robust
score is then biased (measured in docs/dp-effects-benchmark.md, "Small studies": on the cohort design
at eps 1, n = 600, i.e. ``lambda`` 0.83 of each party's 150 subjects, the DP estimate sat +0.06 to +0.08
(0.2-0.26 SE) above the non-private AIPW over 300 data sets, coverage 0.91-0.92, and +0.08 over 100 draws
on examples/cohort/cohort.csv; at a share of 0.5 the bias was 0.2 SE with coverage 0.94, at 0.25 at most
0.17 SE with coverage 0.95-0.97).

:func:`ridge_share` is ``lambda`` over the subjects of the smallest training set (the smallest party,
times ``(K - 1) / K`` under K-fold cross-fitting), computed from public quantities only: the parties'
n (``describe``), epsilon, delta, the nuisance share, the covariates' number (their ranges bound the
design rows), the folds, secure aggregation and the ridge scale, exactly as the coordinator's rounds will
draw the noise. :func:`check_study_size` refuses a study whose share exceeds :data:`MAX_RIDGE_SHARE`, naming
the epsilon and the n that would pass, before the first request that charges a ledger; above
:data:`CAVEAT_RIDGE_SHARE` the report warns that the interval may be short (:func:`interval_caveat`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Protocol

from collabcausal.errors import ConfigError
from collabcausal.estimators.dp.effects.design import FeatureMap
from collabcausal.estimators.dp.effects.nuisances import ridge_penalty
from collabcausal.estimators.dp.effects.statistics import (
    statistics_length,
    statistics_reach,
    statistics_sensitivity,
)
from collabcausal.estimators.dp.zcdp import gaussian_zcdp_sigma
from collabcausal.secagg import SCALE_BITS, share_calibration


class StudySpec(Protocol):
    """What the check reads of :class:`~collabcausal.analyst.dp_effects.DPEffectsSpec` (a frozen dataclass; the
    check replaces its ``epsilon``), named here so that the two modules do not import each other."""

    epsilon: float
    outcome_range: tuple[float, float]
    bounds: tuple[tuple[float, float], ...]
    nuisance: str
    n_folds: int
    secure_aggregation: bool
    ridge_scale: float

    @property
    def budgets(self) -> tuple[tuple[float, float], tuple[float, float]]:
        """(rho, delta) of the statistics release and of the scores release."""


MAX_RIDGE_SHARE = 0.5
"""The largest ridge, as a share of the smallest training set, that ``dp_effects`` accepts (module docstring)."""
CAVEAT_RIDGE_SHARE = 0.1
"""Above this share the report warns that the interval may be short (:func:`interval_caveat`): with the replicate clip
at 1/10 a held-out design covered 0.905-0.955 at 0.33 (0.80-0.84 at 0.33-0.49 with the earlier 1/40), and both
designs 0.95-0.975 at 0.05-0.13 (docs/dp-effects.md)."""
LARGEST_EPSILON = 1e6


def statistics_noise_sd(spec: StudySpec, n_subjects: Mapping[str, int]) -> float:
    """Noise sd of one entry of the statistics one nuisance model is fitted on, as the study will draw it.

    Pooled nuisances: the sum over the parties (each party's share under secure aggregation,
    :func:`~collabcausal.secagg.share_calibration`, or its full noise without); site nuisances: one
    party's own release. Under K-fold cross-fitting a model sums ``K - 1`` folds' releases.
    """
    pooled, parties = spec.nuisance == "pooled", len(n_subjects)
    feature_map = FeatureMap(spec.bounds, spec.outcome_range, parties if pooled else 1)
    sensitivity, rho = statistics_sensitivity(feature_map, spec.cross_weight), spec.budgets[0][0]
    if pooled and spec.secure_aggregation and parties > 1:
        share = share_calibration(sensitivity, rho, n_parties=parties,
                                  length=spec.n_folds * statistics_length(feature_map.dim),
                                  value_bound=float(max(n_subjects.values())) * statistics_reach(spec.cross_weight))
        sd = share * math.sqrt(parties) / 2.0**SCALE_BITS
    else:
        sd = gaussian_zcdp_sigma(sensitivity, rho) * (math.sqrt(parties) if pooled else 1.0)
    return sd * math.sqrt(max(spec.n_folds - 1, 1))


NoiseSd = Callable[[StudySpec, Mapping[str, int]], float]
"""``noise_sd(spec, n_subjects)``: the noise sd of the statistics a nuisance model is fitted on."""


def ridge_share(spec: StudySpec, n_subjects: Mapping[str, int], noise_sd: NoiseSd = statistics_noise_sd) -> float:
    """``lambda`` over the smallest party's training rows (module docstring); public quantities only.

    ``n_subjects`` has one entry per row group (a party, or a label holder with column groups); ``noise_sd`` is
    :func:`statistics_noise_sd`, or the column groups' own (:mod:`collabcausal.analyst.dp_effects_vertical`).
    """
    dim = (len(n_subjects) if spec.nuisance == "pooled" else 1) + len(spec.bounds)
    ridge = ridge_penalty(noise_sd(spec, n_subjects), dim, spec.ridge_scale)
    folds = spec.n_folds
    return ridge / (min(n_subjects.values()) * ((folds - 1) / folds if folds > 1 else 1.0))


def check_study_size(spec: StudySpec, n_subjects: Mapping[str, int], noise_sd: NoiseSd = statistics_noise_sd) -> None:
    """Refuse (:class:`ConfigError`) a study whose :func:`ridge_share` exceeds :data:`MAX_RIDGE_SHARE`.

    The message names the smallest epsilon that passes with these parties (bisection: the share falls
    as epsilon grows) and the smallest party size that passes at this epsilon.
    """
    share = ridge_share(spec, n_subjects, noise_sd)
    if share <= MAX_RIDGE_SHARE:
        return
    raise ConfigError(
        f"dp_effects at epsilon {spec.epsilon:g} is too small a study for its budget: the nuisance ridge is "
        f"{share:.2f} of the smallest party's {min(n_subjects.values())} subjects (at most {MAX_RIDGE_SHARE}; beyond "
        "it the noisy models bias the estimate, docs/dp-effects-benchmark.md, \"Small studies\")",
        _what_passes(spec, n_subjects, noise_sd, share, MAX_RIDGE_SHARE),
    )


def interval_caveat(spec: StudySpec, n_subjects: Mapping[str, int],
                    noise_sd: NoiseSd = statistics_noise_sd) -> str | None:
    """A report warning when :func:`ridge_share` exceeds :data:`CAVEAT_RIDGE_SHARE` (the interval may be short).

    The interval's nuisance-noise term comes from noise replicates whose per-subject differences are clipped
    (:mod:`~collabcausal.estimators.dp.effects.scores`); the more the statistics' noise moves the models, the
    more the clip cuts and the shorter the term can fall (docs/dp-effects.md, "Small studies"). ``None`` at or
    below the threshold.
    """
    share = ridge_share(spec, n_subjects, noise_sd)
    if share <= CAVEAT_RIDGE_SHARE:
        return None
    return (f"the interval may be short: the nuisance ridge is {share:.2f} of the smallest party's subjects, above "
            f"{CAVEAT_RIDGE_SHARE}, where the interval's term for the nuisance models' noise (from clipped noise "
            "replicates; none with nuisance_replicates = 0) can fall short "
            "(95% intervals covered 0.905-0.955 at a share of 0.33 on a held-out design, three sets of 200 studies, "
            "and 0.95-0.97 at the other shares measured from 0.13 to 0.49; docs/dp-effects.md, \"Small studies\"); "
            "to bring the share to "
            f"{CAVEAT_RIDGE_SHARE}: {_what_passes(spec, n_subjects, noise_sd, share, CAVEAT_RIDGE_SHARE)}")


def _what_passes(spec: StudySpec, n_subjects: Mapping[str, int], noise_sd: NoiseSd, share: float, limit: float) -> str:
    """The smallest epsilon and the smallest party size whose :func:`ridge_share` is at most ``limit`` (``share``:
    the study's own, above it)."""
    n_needed = math.ceil(min(n_subjects.values()) * share / limit)
    while ridge_share(spec, {p: max(n, n_needed) for p, n in n_subjects.items()}, noise_sd) > limit:
        n_needed += max(1, n_needed // 100)  # the noise grows a little with the parties' fixed-point range
    return (f"raise [dp_effects] epsilon to {_up3(_epsilon_needed(spec, n_subjects, noise_sd, limit)):g} or more, or "
            f"give every party {n_needed} or more subjects (n >= {n_needed * len(n_subjects)} over "
            f"{len(n_subjects)} parties)")


def _up3(x: float) -> float:
    """``x`` rounded up to 3 significant digits (a printed epsilon that passes)."""
    if not math.isfinite(x) or x <= 0:
        return x
    unit = 10.0 ** (math.floor(math.log10(x)) - 2)
    return round(math.ceil(x / unit - 1e-9) * unit, 12)


def _epsilon_needed(spec: StudySpec, n_subjects: Mapping[str, int], noise_sd: NoiseSd, limit: float) -> float:
    """The smallest epsilon (to 0.1%) whose :func:`ridge_share` is at most ``limit``."""
    low, high = spec.epsilon, spec.epsilon
    while ridge_share(replace(spec, epsilon=high), n_subjects, noise_sd) > limit:
        if high >= LARGEST_EPSILON:
            return math.inf
        low, high = high, high * 2.0
    while high - low > 1e-3 * high:
        mid = 0.5 * (low + high)
        too_small = ridge_share(replace(spec, epsilon=mid), n_subjects, noise_sd) > limit
        low, high = (mid, high) if too_small else (low, mid)
    return high
