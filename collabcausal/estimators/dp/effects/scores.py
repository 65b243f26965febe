"""Bounded score sums for AIPW and Hajek IPW, ATE and ATT (docs/dp-effects.md, step 4).

A subject's scores use nuisances fitted on the other folds (:mod:`.nuisances`), the propensity
trimmed to ``[t, 1 - t]``, outcomes and outcome predictions on the centred scale ``[-R/2, R/2]``
(:mod:`.design`). With ``y' = clip(y) - mid``:

* AIPW, ATE (Robins, Rotnitzky & Zhao 1994; paper 004, eq. (4)):
  ``phi = mu1 - mu0 + T (y' - mu1) / e - (1 - T)(y' - mu0) / (1 - e)``. ``phi`` does not change when
  ``y'``, ``mu0``, ``mu1`` shift together, and for ``T = 1`` it is
  ``y'/e - mu1 (1/e - 1) - mu0``, in ``[-R/e, R/e]``: ``|phi| <= R / t``. With the outcome unclipped and each
  residual ``y - mu_t`` clipped at ``rho`` instead (:func:`aipw_ate_score`; the projection's ``residual_clip``,
  docs/dp-cate-projection.md), ``|phi| <= |mu1 - mu0| + rho / t <= R + rho / t`` whatever ``y``.
* AIPW, ATT (Hahn 1998; Chernozhukov et al. 2018, section 5.1):
  ``psi = T (y' - mu0) - (1 - T) e/(1 - e) (y' - mu0)``, ATT ``= sum psi / sum T``;
  ``|psi| <= R (1 - t) / t``.
* Hajek IPW: ratios of the weighted sums below, one per arm; ATT weights controls by
  ``e / (1 - e)``.

Each released sum ``j`` adds one per-subject value in a public interval ``[lo_j, hi_j]``, so
substituting one subject moves it by at most ``r_j = hi_j - lo_j``. The party releases
``s_j w_j / r_j`` with Gaussian noise for the L2 sensitivity ``sqrt(sum_j w_j^2)``
(:func:`release_weights`): the weight ``w_j`` is sum ``j``'s share of the budget (a point sum gets
more than a sum of squares, which only feeds a standard error).

**Noise replicates** (:func:`replicate_components`). The nuisance models are fitted on noisy
statistics, and that noise moves the estimate too. To measure how much, the analyst refits the
models on ``B`` copies of the released statistics with fresh noise of the same law (a parametric
bootstrap of the statistics' noise: Ferrando, Wang & Sheldon 2022, "Parametric bootstrap for
differentially private confidence intervals", AISTATS) and each party adds, for every point sum
``j`` that depends on the models and every copy ``b``, the sum of
``clip(v_j(model_b) - v_j(model), -c_j, c_j)`` with ``c_j = r_j`` x :data:`REPLICATE_CLIP`: one more
bounded per-subject value, released in the same vector with the small weight
``sqrt(REPLICATE_SHARE / B)``, so the ``B`` copies of a sum together weigh :data:`REPLICATE_SHARE`
against the point sum's 1.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from collabcausal.errors import InputError

ESTIMATORS = ("aipw", "ipw")
"""Estimators a ``dp_effects`` release can serve."""

POINT_WEIGHT = 1.0
SPREAD_WEIGHT = 0.25
"""Budget weights of the sums an estimate needs (point) and those only its variance needs (spread): 0.25 rather
than 0.5 lowered the benchmark's RMSE by 1.7% at eps 1 (docs/dp-effects.md)."""

REPLICATE_SHARE = 0.1
"""Summed squared weight of the ``B`` noise replicates of one point sum (its own weight squared is 1)."""
REPLICATE_CLIP = 1.0 / 10.0
"""A replicate's per-subject difference is clipped to this fraction of its sum's range (2 of AIPW-ATE's 20 at R = 1,
t = 0.1). 1/40 (until 29 Nov 2026) cut the term's per-subject cancellation where the models are noisy: 95% intervals
covered 0.80-0.82 on the held-out design at n = 2,700-4,000. Wider clips add noise to the replicate sums (their budget
share is fixed); end to end, 1/10 with 8 replicates was the one of six (clip, copies) pairs that kept coverage within
0.93-0.97 on four (design, n) settings, chosen on seeds 3000-3199 and confirmed on 5000-5199 (docs/dp-effects.md,
"Coverage"). The projection's sums (issue 39) moved from 1/40 to it too, chosen against 1/20 on held-out data seeds
(docs/dp-cate-projection.md, "The replicate clip at 1/10")."""
DEFAULT_REPLICATES = 8
MAX_REPLICATES = 32
MAX_REPLICATE_STEP = 10.0
MODEL_FREE = frozenset({"n_treated", "att_y1", "att_yy1"})
"""Sums whose per-subject values do not depend on the nuisance models (no replicates)."""


@dataclass(frozen=True)
class Component:
    """One released sum: its name, whether the estimate or only its variance needs it, its range and weight.

    A noise replicate (:func:`replicate_components`) names the point sum it replicates in ``of`` and its
    copy in ``copy``.
    """

    name: str
    point: bool
    low: float
    high: float
    weight: float
    of: str | None = None
    copy: int = -1

    @property
    def width(self) -> float:
        """``r_j``, the most one substituted subject moves the sum."""
        return self.high - self.low


NEEDS: dict[tuple[str, str], tuple[str, ...]] = {
    ("aipw", "ate"): ("aipw_ate", "aipw_ate_sq"),
    ("aipw", "att"): ("n_treated", "aipw_att", "aipw_att_sq", "aipw_att_treated"),
    ("ipw", "ate"): tuple(f"ipw_{k}{arm}" for arm in "10" for k in "wavpq"),
    ("ipw", "att"): ("n_treated", "att_y1", "att_yy1", "att_w0", "att_a0", "att_v0", "att_p0", "att_q0"),
}
"""The sums each (estimator, estimand) needs; a release carries the union for the study's choice."""

_POINT = {"n_treated", "aipw_ate", "aipw_att", "ipw_w1", "ipw_a1", "ipw_w0", "ipw_a0", "att_y1", "att_w0", "att_a0"}


def components(
    estimators: Sequence[str], estimands: Sequence[str], outcome_width: float, trim: float
) -> tuple[Component, ...]:
    """The sums the ``estimators`` x ``estimands`` need, with ranges for outcome width ``R`` and trim ``t``."""
    unknown = [e for e in estimators if e not in ESTIMATORS] + [e for e in estimands if e not in ("ate", "att")]
    if unknown or not estimators or not estimands:
        raise InputError(
            f"unknown or missing dp_effects estimators/estimands {unknown or [*estimators, *estimands]}",
            f"use some of {ESTIMATORS} and of ('ate', 'att')",
        )
    if not 0.0 < trim < 0.5:
        raise InputError(f"propensity trimming {trim!r} is not in (0, 0.5)", "declare e.g. trim = 0.1")
    R, t = float(outcome_width), float(trim)
    h, odds = R / 2, (1 - t) / t
    ranges = {
        "n_treated": (0.0, 1.0),
        "aipw_ate": (-R / t, R / t), "aipw_ate_sq": (0.0, (R / t) ** 2),
        "aipw_att": (-R * odds, R * odds), "aipw_att_sq": (0.0, (R * odds) ** 2), "aipw_att_treated": (-R, R),
        "att_y1": (-h, h), "att_yy1": (0.0, h * h),
        "att_w0": (0.0, odds), "att_a0": (-h * odds, h * odds), "att_v0": (0.0, odds**2),
        "att_p0": (-h * odds**2, h * odds**2), "att_q0": (0.0, (h * odds) ** 2),
    }
    for arm in "10":
        ranges |= {f"ipw_w{arm}": (0.0, 1 / t), f"ipw_a{arm}": (-h / t, h / t), f"ipw_v{arm}": (0.0, 1 / t**2),
                   f"ipw_p{arm}": (-h / t**2, h / t**2), f"ipw_q{arm}": (0.0, (h / t) ** 2)}
    if 1.0 - t == 1.0:  # (finite ranges, else OverflowError above) 1 - e is 0 where e rounds to 1: 0 / 0 in a score
        raise InputError(f"propensity trimming {trim!r}: 1 - trim rounds to 1", "declare e.g. trim = 0.1")
    names = dict.fromkeys(n for est in estimators for estimand in estimands for n in NEEDS[est, estimand])
    return tuple(Component(n, n in _POINT, *ranges[n], POINT_WEIGHT if n in _POINT else SPREAD_WEIGHT) for n in names)


def replicate_components(parts: Sequence[Component], n_replicates: int) -> tuple[Component, ...]:
    """``n_replicates`` noise replicates of every model-dependent point sum of ``parts`` (module docstring).

    Replicate ``b`` of sum ``j`` is named ``"j@b"``, ranges over ``[-c_j, c_j]`` with ``c_j`` :data:`REPLICATE_CLIP`
    ``r_j`` and weighs ``sqrt(REPLICATE_SHARE / n_replicates)``; copy 0's sums come first, then copy 1's, and so on.
    """
    if isinstance(n_replicates, bool) or not isinstance(n_replicates, int) or not 0 <= n_replicates <= MAX_REPLICATES:
        raise InputError(f"{n_replicates!r} noise replicates is not in 0..{MAX_REPLICATES}",
                         "use e.g. 8 (0: no nuisance-noise term in the interval)")
    if n_replicates == 0:
        return ()
    weight = math.sqrt(REPLICATE_SHARE / n_replicates)
    return tuple(
        Component(f"{c.name}@{b}", False, -REPLICATE_CLIP * c.width, REPLICATE_CLIP * c.width, weight, c.name, b)
        for b in range(n_replicates) for c in parts if c.point and c.name not in MODEL_FREE
    )


def release_weights(parts: Sequence[Component]) -> NDArray[np.float64]:
    """Budget weight ``w_j`` of each sum (:data:`POINT_WEIGHT`, :data:`SPREAD_WEIGHT` or a replicate's)."""
    return np.array([c.weight for c in parts])


def release_reach(parts: Sequence[Component]) -> float:
    """``max_j w_j``: the most one subject moves an entry of the released vector ``(s_j w_j / r_j)_j``.

    A value lies in ``[lo_j, hi_j]``, which holds 0, so it is at most ``r_j`` in size; an entry over ``n`` subjects
    is at most ``n max_j w_j`` (the bound secure aggregation's wrap-around check needs). The projection's weights
    can exceed 1 (their squares sum to at most their number).
    """
    return float(np.max(release_weights(parts)))


def release_sensitivity(parts: Sequence[Component]) -> float:
    """L2 sensitivity ``sqrt(sum_j w_j^2)`` of the released vector ``(s_j w_j / r_j)_j``."""
    return float(math.sqrt(np.sum(release_weights(parts) ** 2)))


def aipw_ate_score(
    treatment: NDArray[np.float64], outcome: NDArray[np.float64], propensity: NDArray[np.float64],
    mu0: NDArray[np.float64], mu1: NDArray[np.float64], residual_bound: float = math.inf,
) -> NDArray[np.float64]:
    """The AIPW ATE score with each residual clipped at ``rho = residual_bound`` (module docstring; paper 004, eq. 4).

    ``phi = mu1 - mu0 + T r1 / e - (1 - T) r0 / (1 - e)`` with ``r_t = clip(y - mu_t, -rho, rho)``; ``rho = inf``
    (the default) is the plain score. With ``mu0``, ``mu1`` in ``[-R/2, R/2]`` and ``e`` in ``[t, 1 - t]``,
    ``|phi| <= R + rho / t`` whatever ``y`` (:func:`residual_score_bound`).
    """
    r1 = np.clip(outcome - mu1, -residual_bound, residual_bound)
    r0 = np.clip(outcome - mu0, -residual_bound, residual_bound)
    return mu1 - mu0 + treatment * r1 / propensity - (1.0 - treatment) * r0 / (1.0 - propensity)


def residual_score_bound(outcome_width: float, trim: float, residual_bound: float) -> float:
    """``R + rho / t``: the bound on :func:`aipw_ate_score` with residuals clipped at ``rho`` (its docstring)."""
    return float(outcome_width) + float(residual_bound) / float(trim)


def subject_scores(
    parts: Sequence[Component],
    treatment: NDArray[np.int8],
    outcome: NDArray[np.float64],
    propensity: NDArray[np.float64],
    mu0: NDArray[np.float64],
    mu1: NDArray[np.float64],
) -> NDArray[np.float64]:
    """Per-subject values (n x J) of the sums in ``parts``; every column within its declared range.

    ``outcome``, ``mu0`` and ``mu1`` are on the centred scale; ``propensity`` is already trimmed.
    """
    T = treatment.astype(float)
    C = 1.0 - T
    y, e = outcome, propensity
    odds = e / (1.0 - e)
    phi = aipw_ate_score(T, y, e, mu0, mu1)
    psi = T * (y - mu0) - C * odds * (y - mu0)
    w1, w0 = T / e, C / (1.0 - e)
    values = {
        "n_treated": T,
        "aipw_ate": phi,
        "aipw_ate_sq": phi * phi,
        "aipw_att": psi,
        "aipw_att_sq": psi * psi,
        "aipw_att_treated": T * psi,
        "ipw_w1": w1, "ipw_a1": w1 * y, "ipw_v1": w1 * w1, "ipw_p1": w1 * w1 * y, "ipw_q1": (w1 * y) ** 2,
        "ipw_w0": w0, "ipw_a0": w0 * y, "ipw_v0": w0 * w0, "ipw_p0": w0 * w0 * y, "ipw_q0": (w0 * y) ** 2,
        "att_y1": T * y, "att_yy1": T * y * y,
        "att_w0": C * odds, "att_a0": C * odds * y, "att_v0": (C * odds) ** 2,
        "att_p0": (C * odds) ** 2 * y, "att_q0": (C * odds * y) ** 2,
    }
    out = np.column_stack([values[c.name] for c in parts])
    low = np.array([c.low for c in parts])
    high = np.array([c.high for c in parts])
    return np.clip(out, low, high)  # exact bounds also under floating-point rounding


def replicate_differences(
    base: Sequence[Component], copies: Sequence[Component], at_model: NDArray[np.float64],
    at_copy: NDArray[np.float64],
) -> NDArray[np.float64]:
    """Per-subject values (n x len(copies)) of noise replicates: clipped differences of two scorings.

    ``at_model`` and ``at_copy`` are :func:`subject_scores` of the ``base`` sums under the model and under
    one replicate's model; ``copies`` are replicate components of that replicate.
    """
    index = {c.name: j for j, c in enumerate(base)}
    columns = [index[c.of] for c in copies]  # type: ignore[index]
    low = np.array([c.low for c in copies])
    high = np.array([c.high for c in copies])
    return np.clip(at_copy[:, columns] - at_model[:, columns], low, high)

