"""The score program of vertical ``dp_effects``: what the coordinator sends for the scores release, and its checks.

After the statistics release the coordinator fits the nuisance model and its noise replicates
(:func:`~.analysis.fold_models`, :func:`~.analysis.noise_replicates`) and derives, from the released Gram
alone, each column group's clip limits (:func:`~.vertical.part_limits`): all post-processing. That is the
**program** (:class:`ScoreProgram`). A party receiving it trusts nothing else: it recomputes the
polynomial's domain and the ``mu`` unit (:func:`~.vertical.score_scales`), the weight polynomial
(:func:`~.vertical.weight_polynomial`) and every released sum's proved range
(:func:`~.vertical.vertical_components`), hence its sensitivity, from the model and limits it was sent
(:meth:`ScoreProgram.from_spec`). A hostile program costs accuracy, not privacy.

Both roles import this module (the analyst builds, the parties check), like the rest of
:mod:`collabcausal.estimators.dp.effects`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from collabcausal.errors import InputError
from collabcausal.estimators.dp.effects.analysis import effects_from_sums, fold_models, noise_replicates
from collabcausal.estimators.dp.effects.design import FeatureMap
from collabcausal.estimators.dp.effects.nuisances import NuisanceModel
from collabcausal.estimators.dp.effects.pooling import DPEffect
from collabcausal.estimators.dp.effects.release import unscaled_noise_sd
from collabcausal.estimators.dp.effects.scores import MAX_REPLICATES, Component, release_sensitivity
from collabcausal.estimators.dp.effects.statistics import ArmStatistics
from collabcausal.estimators.dp.effects.vertical import (
    CHANGE_SDS,
    ENCRYPTION_MARGIN,
    PART_SDS,
    ColumnGroups,
    PartLimits,
    WeightPolynomial,
    clipped_parts,
    group_statistics_sensitivity,
    model_change,
    part_limits,
    score_scales,
    share_variance,
    vertical_components,
    weight_polynomial,
)
from collabcausal.estimators.dp.mechanisms import draw_noise
from collabcausal.estimators.dp.zcdp import gaussian_zcdp_sigma
from collabcausal.estimators.validation import refuse_unknown_keys

SCORE_NOISE_PARTIES = 2
"""Parties that add a noise share to each score sum, whatever the number of column groups: the label holder (it
evaluates and totals) and the scores key owner (it opens). A further party's parts go in encrypted, per subject:
it never holds a sum to add noise to."""

PROGRAM_KEYS = frozenset({"model", "limits", "trim", "changes"})
"""The keys of :meth:`ScoreProgram.to_spec`: a program carrying any other (a stated ``sigma``, ``unit``, ``parts`` or
``poly``: each party recomputes them) is refused (:meth:`ScoreProgram.from_spec`)."""
CHANGE_KEYS = frozenset({"model", "limits"})
"""The keys of a replicate's change in :meth:`ScoreProgram.to_spec`; any other is refused likewise."""
LIMITS_KEYS = frozenset({"low", "high"})
"""The keys of clip limits in :meth:`ScoreProgram.to_spec`; any other is refused likewise."""

__all__ = ["SCORE_NOISE_PARTIES", "ScoreProgram", "noise_share", "program_from_statistics", "score_inputs",
           "scores_bound", "scores_sigma", "share_sd", "statistics_bound", "statistics_sigma", "vertical_effect"]


@dataclass(frozen=True)
class ScoreProgram:
    """The model, its clip limits, the replicates' changes and limits, and what follows from them.

    ``poly``, ``parts`` (the released sums and their proved ranges) and ``unit`` (``mu``'s scale) are
    computed from the rest by :meth:`build`, at the analyst and again at every party.
    """

    model: NuisanceModel
    limits: PartLimits
    changes: tuple[tuple[NuisanceModel, PartLimits], ...]
    trim: float
    poly: WeightPolynomial
    parts: tuple[Component, ...]
    unit: float

    @classmethod
    def build(cls, model: NuisanceModel, limits: PartLimits, changes: Sequence[tuple[NuisanceModel, PartLimits]],
              trim: float, feature_map: FeatureMap, estimators: Sequence[str] = ("aipw",),
              estimands: Sequence[str] = ("ate",)) -> ScoreProgram:
        """Derive the polynomial, the released sums' ranges and the unit (every bound from public quantities)."""
        S, R = feature_map.n_sites, feature_map.outcome_width
        domain, unit = score_scales(model, limits, changes, S, R)
        poly = weight_polynomial(domain, trim)
        parts = vertical_components(estimators, estimands, model, limits, changes, poly, S, R)
        return cls(model, limits, tuple(changes), float(trim), poly, parts, float(unit))

    def to_spec(self) -> dict[str, Any]:
        """JSON-ready: the model, the limits and the changes (what follows from them is recomputed)."""
        return {"model": self.model.to_spec(), "limits": _limits_spec(self.limits), "trim": self.trim,
                "changes": [{"model": m.to_spec(), "limits": _limits_spec(lim)} for m, lim in self.changes]}

    @classmethod
    def from_spec(cls, spec: object, feature_map: FeatureMap, groups: ColumnGroups,
                  estimators: Sequence[str] = ("aipw",), estimands: Sequence[str] = ("ate",)) -> ScoreProgram:
        """Inverse of :meth:`to_spec`, checked; raises :class:`~collabcausal.errors.InputError` on malformed input."""
        if not isinstance(spec, dict) or not isinstance(spec.get("changes"), list):
            raise InputError("malformed vertical score program", "send ScoreProgram.to_spec() of the fitted models")
        refuse_unknown_keys(spec, PROGRAM_KEYS, "vertical score program")
        if len(spec["changes"]) > MAX_REPLICATES:
            raise InputError(f"the score program has more than {MAX_REPLICATES} replicates", "send fewer replicates")
        dim = feature_map.dim
        model = NuisanceModel.from_spec(spec.get("model"), dim)
        limits = _limits_from(spec.get("limits"), groups)
        changes = []
        for change in spec["changes"]:
            if not isinstance(change, dict):
                raise InputError("malformed replicate in the score program", "send {model, limits} per replicate")
            refuse_unknown_keys(change, CHANGE_KEYS, "vertical score program replicate")
            changes.append((NuisanceModel.from_spec(change.get("model"), dim), _limits_from(change.get("limits"),
                                                                                             groups)))
        trim = spec.get("trim")
        if isinstance(trim, bool) or not isinstance(trim, int | float):
            raise InputError("the score program has no numeric trim", "send trim = e.g. 0.1")
        return cls.build(model, limits, changes, float(trim), feature_map, estimators, estimands)


def _limits_spec(limits: PartLimits) -> dict[str, list[list[float]]]:
    return {"low": np.asarray(limits.low).tolist(), "high": np.asarray(limits.high).tolist()}


def _limits_from(spec: object, groups: ColumnGroups) -> PartLimits:
    shape = (3, groups.n_parties)
    if isinstance(spec, dict):  # anything else is refused below, as not numeric low/high arrays
        refuse_unknown_keys(spec, LIMITS_KEYS, "vertical score program clip limits")
    try:
        low = np.asarray(spec["low"], dtype=float)  # type: ignore[index]
        high = np.asarray(spec["high"], dtype=float)  # type: ignore[index]
    except (KeyError, TypeError, ValueError):
        raise InputError("the score program's clip limits are not numeric low/high arrays",
                         "send part_limits() of the released Gram") from None
    if low.shape != shape or high.shape != shape or not (np.isfinite(low).all() and np.isfinite(high).all()):
        raise InputError(f"clip limits of shape {low.shape}/{high.shape}, expected finite {shape}",
                         "send one (eta, mu0, mu1) limit per column group")
    if np.any(low > high):
        raise InputError("a clip limit's low is above its high", "send part_limits() of the released Gram")
    return PartLimits(low, high)


def program_from_statistics(
    statistics: NDArray[np.float64], noise_sd: NDArray[np.float64], feature_map: FeatureMap, groups: ColumnGroups,
    *, trim: float, ridge_scale: float, n_replicates: int, rng: np.random.Generator,
    estimators: Sequence[str] = ("aipw",), estimands: Sequence[str] = ("ate",),
) -> ScoreProgram:
    """The coordinator's post-processing of the released statistics (one vector, summed over row groups).

    ``noise_sd`` is each entry's released noise sd (it differs between entries computed by one and by two
    parties). The model is the ridge fit at the largest sd; the replicates refit on the statistics plus
    fresh noise of their law (:func:`~.analysis.noise_replicates`, seeded by ``rng``); the limits are
    :func:`~.vertical.part_limits` of the released Gram (summed over arms).
    """
    S, R, dim = feature_map.n_sites, feature_map.outcome_width, feature_map.dim
    rows = np.asarray(statistics, dtype=float)[None, :]
    model = fold_models(rows, dim, S, float(np.max(noise_sd)), ridge_scale=ridge_scale)[0]
    copies = [r.models[0] for r in noise_replicates(rows, dim, S, noise_sd, n_replicates, rng, ridge_scale=ridge_scale)]
    gram = ArmStatistics.unpack(rows[0], dim)
    moments = gram.gram[0] + gram.gram[1]
    limits = part_limits(model, moments, groups, S, R, PART_SDS)
    changes = [(d, part_limits(d, moments, groups, S, R, CHANGE_SDS)) for d in (model_change(model, c) for c in copies)]
    return ScoreProgram.build(model, limits, changes, trim, feature_map, estimators, estimands)


def score_inputs(program: ScoreProgram, design: NDArray[np.float64], group: int, groups: ColumnGroups,
                 feature_map: FeatureMap) -> list[NDArray[np.float64]]:
    """Group ``group``'s clipped parts ``(eta / E, mu0 / U, mu1 / U)`` of the model, then of each replicate's
    change: each in [-1, 1] (:func:`~.vertical.predictor_bound`), what the key owner encrypts and the
    evaluator adds in the clear."""
    S, R = feature_map.n_sites, feature_map.outcome_width
    scales = np.array([program.poly.domain, program.unit, program.unit])[:, None]
    pieces = [(program.model, program.limits), *program.changes]
    return [v for m, lim in pieces for v in np.asarray(clipped_parts(m, design, group, groups, lim, S, R)) / scales]


def vertical_effect(released: NDArray[np.float64], noise_sd: float, parts: Sequence[Component], n: int, *,
                    alpha: float = 0.05) -> tuple[DPEffect, NDArray[np.float64]]:
    """The AIPW ATE, its interval and each sum's unscaled noise sd from the released (scaled) score sums.

    ``noise_sd`` is the released scaled sums' noise sd (every sum the same); the sums are unscaled by
    ``width / weight`` as in the horizontal release (:func:`~.release.scaled_sums`).
    """
    sums = np.asarray(released, dtype=float) * np.array([c.width for c in parts]) / np.array([c.weight for c in parts])
    sds = unscaled_noise_sd(noise_sd, parts)
    return effects_from_sums(sums, sds, parts, n, ("aipw",), ("ate",), alpha=alpha)[0], sds


def statistics_bound(feature_map: FeatureMap, groups: ColumnGroups) -> float:
    """L2 sensitivity of the statistics release: the horizontal one of the whole design (a substituted subject is
    substituted in every column group) with the design row's norm bound the column groups declare
    (:func:`~.vertical.group_statistics_sensitivity`), widened by the encryption margin."""
    return group_statistics_sensitivity(feature_map, groups) * (1.0 + ENCRYPTION_MARGIN)


def statistics_sigma(feature_map: FeatureMap, rho: float, groups: ColumnGroups) -> float:
    """``sigma`` of the statistics release at ``rho``-zCDP (:func:`statistics_bound`)."""
    return gaussian_zcdp_sigma(statistics_bound(feature_map, groups), rho)


def scores_bound(program: ScoreProgram) -> float:
    """L2 sensitivity of the scores release, from the program's proved ranges (which include the margin)."""
    return release_sensitivity(program.parts)


def scores_sigma(program: ScoreProgram, rho: float) -> float:
    """``sigma`` of the scores release at ``rho``-zCDP (:func:`scores_bound`)."""
    return gaussian_zcdp_sigma(scores_bound(program), rho)


def share_sd(sigma: float, parties: int = 2) -> float:
    """sd of one computing party's DP noise share on an entry computed by ``parties`` parties (sd ``sigma`` times
    :func:`~.vertical.share_variance`'s root); an evaluator of the two-party rounds also floods with it."""
    return float(sigma) * float(np.sqrt(share_variance(int(parties))))


def noise_share(k: NDArray[np.int64], sigma: float, rng: np.random.Generator | None = None) -> NDArray[np.float64]:
    """One computing party's DP noise share on each entry (entry ``j`` computed by ``k[j]`` parties): Gaussian
    of sd ``sigma`` times :func:`~.vertical.share_variance`'s root, from OpenDP's sampler (``rng=None``, as
    parties draw) or, for reproducible simulations only, ``rng``."""
    k = np.asarray(k, dtype=np.int64)
    shares = np.zeros(k.size)
    for parties in np.unique(k):
        at = k == parties
        shares[at] = draw_noise("gaussian", share_sd(sigma, int(parties)), int(at.sum()), rng=rng)
    return shares
