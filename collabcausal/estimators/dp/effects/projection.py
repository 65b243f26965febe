"""Effect modification in ``dp_effects``: the score sums of the CATE's projection and of subgroups (release side).

docs/dp-cate-projection.md derives everything here. With the AIPW score ``phi`` of :mod:`.scores`
(``|phi| <= A = R / t``) and the modifier vector ``m = (1, z_1, ..., z_p)`` of the declared
modifiers' design columns (``|z_q| <= 1``, :mod:`.design`), the release adds to the score vector:

* ``blp_q = sum z_q phi`` (q = 1..p; ``sum phi`` is already ``aipw_ate``), in ``[-A, A]`` per subject:
  the right-hand side of the best linear projection ``beta = (sum m m^T)^{-1} sum m phi``
  (Semenova & Chernozhukov 2021, eq. 2.5; the DR-learner's final stage, Kennedy 2023);
* ``blp_meat_a_b = sum v_a v_b`` (a <= b, not both 0: ``sum phi^2`` is ``aipw_ate_sq``) with ``v_q`` the value
  a subject adds to row ``q``'s point sum (``blp_q``; ``phi`` for the intercept row without its own), in
  ``[0, h_a^2]`` on the diagonal and ``[-h_a h_b, h_a h_b]`` off it (``h_q`` the bound of ``v_q``): the
  sandwich's meat, of exactly the values the point sums add (centred and clipped as they are);
* with a ``gram_weight`` (:class:`Projection`), ``gram_0_q = sum z_q`` in ``[-1, 1]`` and
  ``gram_q_q = sum z_q^2`` in ``[0, 1]`` (q = 1..p): the modifiers' Gram entries that move the slopes
  most once more, for the analyst to average with the statistics release's (whose intercept row sums
  ``2 K S`` noisy entries; docs/dp-cate-projection.md, "Budget");
* with a ``clip`` below ``A`` (:class:`Projection`), every added point value lies in ``[-a, a]``,
  ``a = clip R``, the cells' squares in ``[0, a^2]``, and with modifiers the intercept row gets its own
  clipped sums ``blp_0`` and ``blp_meat_0_0`` (the ATE's sums keep ``A``);
* with a ``residual_clip`` (:class:`Projection`), ``phi`` is the score of the unclipped outcome with each
  residual clipped at ``rho = residual_clip R`` (:func:`~.scores.aipw_ate_score`), so ``A = R + rho / t``
  (:func:`score_bound`), and with modifiers the intercept row has its own ``blp_0`` and ``blp_meat_0_0``;
* with a ``centre`` (:class:`Projection`), the ``blp_q`` (q = 0..p, the intercept row always its own)
  add ``m_q (phi - m^T gamma)`` instead of ``m_q phi``, in ``[-kappa_q b, kappa_q b]`` with
  ``b = centre R``: ``gamma`` (``pilot``) is a public vector fixed before the release (the analyst's
  projection of the outcome models' effect, :func:`~.projection_analysis.effect_projection`), so the clip
  cuts ``phi`` around a line near the CATE's projection instead of around 0, and the analyst adds
  ``sum m m^T gamma = M gamma`` back (:mod:`.projection_analysis`); the intercept row has its own sums,
  the meat is of the centred values, the cells keep ``phi`` and ``a``; replicate ``b`` of a centred sum
  scores its copy's models around its copy's pilot ``gamma_b`` (``replicate_pilots``, one per replicate:
  the same projection of the copy's statistics and models), so the replicates carry the pilot's noise;
* with a ``clip_compensation`` ``beta`` (:class:`Projection`; for a binary outcome), each clipped point value
  (``blp_q``, the cells' ``1[c] phi``) gets back the loss its clip is expected to cost under the nuisance models:
  the subject's ``sum_s p_s (u_s - clip(u_s))`` over the four outcomes ``s = (t, y)``, ``y`` either end of the
  range, ``p_s`` their model probabilities (``e`` and ``(mu_t + R/2) / R``) and ``u_s`` the value the subject
  would add had it had them (:func:`model_clip_losses`), itself clipped to ``[-beta R, beta R]``; the sums'
  ranges widen by ``beta R`` (docs/dp-cate-projection.md, "The clip's expected loss added back");
* per declared partition ``g`` (bins of one covariate) and bin ``c``: ``cell_g_c_n = sum 1[c]``,
  ``cell_g_c = sum 1[c] phi``, ``cell_g_c_sq = sum 1[c] phi^2`` (the subgroup AIPW effect is the
  ratio of the first two);
* the noise replicates (:func:`~.scores.replicate_components`) of every model-dependent point sum.

The analyst may shape the ``blp_q`` from the statistics release (:mod:`.projection_budget`): their
weights ``w_q`` (with ``sum w_q^2`` at most their number, so the sensitivity below never exceeds the
unweighted one), a narrower range ``kappa_q a`` per modifier, and ``gram_weight`` (the Gram sums above).

**Sensitivity under substitution.** Every added sum ``j`` has one per-subject value in a public
interval of width ``r_j`` that contains 0, released as ``s_j w_j / r_j``. A sum on its own moves by
at most ``w_j``. The bins of one partition are disjoint, so of the sums of one kind (counts, sums,
squares, or one replicate copy's sums) of one partition a subject has a nonzero value in at most one:
substituting it changes at most two of them, by at most ``w_j`` when it stays in its bin and by at
most ``w_c a_c / r_c`` and ``w_c' a_c' / r_c'`` (``a_j = max(|lo_j|, |hi_j|)``, the most one value is
away from 0) when it moves from bin ``c`` to ``c'``. Such a group adds
``max(max_j w_j^2, the two largest (w_j a_j / r_j)^2 summed)`` to the squared L2 sensitivity, any
other sum ``w_j^2`` (:func:`projection_sensitivity_squared`): counts and squares (``a_j = r_j``) pay
``2 w^2`` per partition, symmetric sums (``a_j = r_j / 2``) only ``w^2`` however many bins.
"""

from __future__ import annotations

import itertools
import math
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from collabcausal.errors import InputError
from collabcausal.estimators.dp.effects.design import FeatureMap
from collabcausal.estimators.dp.effects.nuisances import NuisanceModel
from collabcausal.estimators.dp.effects.scores import (
    POINT_WEIGHT,
    SPREAD_WEIGHT,
    Component,
    aipw_ate_score,
    components,
    release_sensitivity,
    replicate_components,
    replicate_differences,
    residual_score_bound,
    subject_scores,
)
from collabcausal.estimators.validation import (
    check_treatment,
    check_vector,
    is_finite_number,
    number_in_range,
    refuse_unknown_keys,
)

MAX_MODIFIERS = 6
MAX_BINS = 12
"""Bins of one partition; partitions are at most :data:`MAX_MODIFIERS` too."""
MIN_WEIGHT = 1e-3
"""Smallest budget weight of a projection point sum (:class:`Projection`): below it a sum is noise."""
MIN_CLIP = 1e-3
"""Smallest projection clip (outcome-range widths): below it the squares' ranges could underflow to width 0."""
MAX_MEAT_BOUND = math.sqrt(sys.float_info.max) / 2.0
"""Largest bound ``h`` of a point value whose meat range ``[-h^2, h^2]`` has a finite width ``2 h^2``."""
COUNT_WEIGHT = SPREAD_WEIGHT
"""A bin's count is the ratio's denominator: its noise moves the effect by ``effect x sd / count``, against the
sum's ``sd / count`` with a width ``2 R / t`` the count's 1 cannot match, so it weighs as a sum of squares."""


@dataclass(frozen=True)
class Partition:
    """Bins ``[e_0, e_1), ..., [e_{k-1}, e_k]`` of covariate ``column`` (raw units; values clipped to its range)."""

    column: int
    edges: tuple[float, ...]

    @property
    def n_bins(self) -> int:
        """``k``."""
        return len(self.edges) - 1

    def bin_of(self, x: ArrayLike) -> NDArray[np.int64]:
        """Each value's bin, ``-1`` outside ``[e_0, e_k]`` (the last bin is closed)."""
        v = np.asarray(x, dtype=float)
        edges = np.asarray(self.edges)
        index = np.searchsorted(edges, v, side="right") - 1
        index = np.where(v == edges[-1], self.n_bins - 1, index)
        return np.where((v < edges[0]) | (v > edges[-1]) | (index >= self.n_bins), -1, index).astype(np.int64)


SPEC_KEYS = frozenset({"modifiers", "subgroups", "clip", "weights", "modifier_clips", "gram_weight", "centre", "pilot",
                       "residual_clip", "replicate_pilots", "clip_compensation"})
"""The keys of :meth:`Projection.to_spec`: a projection carrying any other is refused (:meth:`Projection.from_spec`)."""
SUBGROUP_KEYS = frozenset({"column", "edges"})
"""The keys of a subgroup partition in :meth:`Projection.to_spec`; any other is refused likewise."""


@dataclass(frozen=True)
class Projection:
    """The declared modifiers (design columns) and subgroup partitions of a study.

    ``clip``: the bound on every added per-subject point value (``z_q phi``, ``1[c] phi``; squares at
    its square) in outcome-range widths ``R``, when below the score's own bound ``A = R / t``
    (:func:`projection_layout`); ``None``: ``A``.

    ``weights``: the budget weights of the projection's own point sums, in :func:`projection_layout`'s
    order (``blp_0`` when a clip or a centre gives the intercept row its own sums, then ``blp_1 .. blp_p``), with
    ``sum w^2`` at most their number (:func:`check_projection`): they share out the budget that
    :data:`~.scores.POINT_WEIGHT` each would take, so the release's sensitivity never exceeds the
    unweighted one (:mod:`.projection_budget` computes them); ``None``: :data:`~.scores.POINT_WEIGHT` each.

    ``modifier_clips``: per modifier ``q``, ``kappa_q`` in ``[MIN_CLIP, 1]``: ``z_q phi`` is clipped to
    ``[-kappa_q a, kappa_q a]`` instead of ``[-a, a]`` (:mod:`.projection_budget`); ``None``: 1 each.

    ``centre``, ``pilot`` and ``replicate_pilots``: with modifiers, the ``blp_q`` sums add ``m_q (phi - m^T gamma)``
    (module docstring), ``gamma = pilot`` (one number per entry of ``m``), clipped at ``centre``
    outcome-range widths (times ``kappa_q``), and noise replicate ``b``'s copies centre on
    ``replicate_pilots[b]`` (one per replicate, each like ``pilot``); ``None`` (all three): ``m_q phi`` at the
    ``clip``.

    ``gram_weight``: with modifiers, the release also carries the Gram entries ``gram_0_q = sum z_q``
    and ``gram_q_q = sum z_q^2``, each with this weight in ``[MIN_WEIGHT, 1]``; ``None``: not (the
    Gram matrix then comes from the statistics release alone).

    ``residual_clip``: the added sums score ``phi`` with each residual ``y - mu_t`` clipped at
    ``rho = residual_clip R`` (a number in ``[MIN_CLIP, 1]``) and the outcome ``y`` not clipped to its range
    (:func:`~.scores.aipw_ate_score`), so ``|phi| <= A = R + rho / t`` (:func:`score_bound`); with modifiers
    the intercept row then always has its own sums (``blp_0``, ``blp_meat_0_0``). ``None``: the ATE's
    score, ``y`` clipped, ``A = R / t``.

    ``clip_compensation``: with a ``clip``, ``beta`` in ``[MIN_CLIP, 1]`` outcome-range widths: each clipped point
    value gets back its clip's loss expected under the nuisance models for a binary outcome (module docstring),
    at most ``beta R`` in size, and its sum's range widens by that; ``None``: not.
    """

    modifiers: tuple[int, ...] = ()
    partitions: tuple[Partition, ...] = ()
    clip: float | None = None
    weights: tuple[float, ...] | None = None
    modifier_clips: tuple[float, ...] | None = None
    gram_weight: float | None = None
    centre: float | None = None
    pilot: tuple[float, ...] | None = None
    residual_clip: float | None = None
    replicate_pilots: tuple[tuple[float, ...], ...] | None = None
    clip_compensation: float | None = None

    def __bool__(self) -> bool:
        return bool(self.modifiers or self.partitions)

    def to_spec(self) -> dict[str, object]:
        """JSON-ready (sent in the scores request)."""
        return {"modifiers": list(self.modifiers),
                "subgroups": [{"column": g.column, "edges": list(g.edges)} for g in self.partitions],
                "clip": self.clip, "weights": None if self.weights is None else list(self.weights),
                "modifier_clips": None if self.modifier_clips is None else list(self.modifier_clips),
                "gram_weight": self.gram_weight, "centre": self.centre,
                "pilot": None if self.pilot is None else list(self.pilot), "residual_clip": self.residual_clip,
                "replicate_pilots": None if self.replicate_pilots is None else [list(g) for g in self.replicate_pilots],
                "clip_compensation": self.clip_compensation}

    @classmethod
    def from_spec(cls, spec: object, feature_map: FeatureMap) -> Projection:
        """Inverse of :meth:`to_spec`, checked against the public ranges (:func:`check_projection`)."""
        if not isinstance(spec, dict) or not isinstance(spec.get("modifiers", []), list) or not isinstance(
                spec.get("subgroups", []), list):
            raise InputError("malformed dp_effects projection", "send modifiers=[column index, ...], subgroups=[...]")
        refuse_unknown_keys(spec, SPEC_KEYS, "dp_effects projection")  # a newer analyst's option: never ignored
        partitions = []
        for g in spec.get("subgroups", []):
            if not isinstance(g, dict) or not isinstance(g.get("edges"), list):
                raise InputError("malformed dp_effects subgroup", "send {column: index, edges: [e0, e1, ...]}")
            refuse_unknown_keys(g, SUBGROUP_KEYS, "dp_effects subgroup")
            partitions.append(Partition(g.get("column"), tuple(g["edges"])))  # type: ignore[arg-type]
        weights, clips, pilot = spec.get("weights"), spec.get("modifier_clips"), spec.get("pilot")
        copies = spec.get("replicate_pilots")
        if not all(v is None or isinstance(v, list) for v in (weights, clips, pilot, copies)) or (
                copies is not None and not all(isinstance(g, list) for g in copies)):
            raise InputError("malformed dp_effects projection weights, modifier clips or pilots",
                             "send weights=[w, ...], modifier_clips=[kappa, ...], pilot=[g, ...] and "
                             "replicate_pilots=[[g, ...], ...], or leave them out")
        projection = cls(tuple(spec.get("modifiers", [])), tuple(partitions), spec.get("clip"),
                         None if weights is None else tuple(weights), None if clips is None else tuple(clips),
                         spec.get("gram_weight"), spec.get("centre"), None if pilot is None else tuple(pilot),
                         spec.get("residual_clip"), None if copies is None else tuple(tuple(g) for g in copies),
                         spec.get("clip_compensation"))
        check_projection(projection, feature_map)
        return projection


def _is_index(value: object, size: int) -> bool:
    return not isinstance(value, bool) and isinstance(value, int) and 0 <= value < size


def check_projection(projection: Projection, feature_map: FeatureMap, names: Sequence[str] | None = None) -> None:
    """Refuse bad modifiers and subgroups with a one-line :class:`InputError` (no data read, nothing charged).

    Modifiers: distinct covariate indices, at most :data:`MAX_MODIFIERS`. Partitions: a covariate
    each (at most one partition per covariate), 2..:data:`MAX_BINS` + 1 finite, strictly increasing
    edges (so bins are bounded and disjoint; values are clipped to the public range before binning).
    """
    m = feature_map.n_covariates
    label = (lambda j: repr(names[j])) if names is not None else (lambda j: f"column {j}")
    for key, clip in (("clip", projection.clip), ("centre", projection.centre)):
        if clip is not None and (not is_finite_number(clip) or clip < MIN_CLIP):
            raise InputError(f"dp_effects projection {key} {clip!r} is not a finite number >= {MIN_CLIP:g}",
                             "declare it in outcome-range widths, e.g. 2, or leave it out")
    rho = projection.residual_clip
    if rho is not None and not number_in_range(rho, MIN_CLIP, 1.0):
        raise InputError(f"dp_effects projection residual_clip {rho!r} is not a number in [{MIN_CLIP:g}, 1]",
                         "declare it in outcome-range widths, e.g. 0.33, or leave it out")
    compensation = projection.clip_compensation
    if compensation is not None and (projection.clip is None or not number_in_range(compensation, MIN_CLIP, 1.0)):
        raise InputError(f"dp_effects projection clip_compensation {compensation!r} is not a number in "
                         f"[{MIN_CLIP:g}, 1] beside a projection clip", "declare it with projection_clip, e.g. 0.1, "
                         "or leave it out")
    weights = projection.weights
    if weights is not None and not (
            all(is_finite_number(w) and w >= MIN_WEIGHT for w in weights)
            and sum(w * w for w in weights) <= len(weights) * (1.0 + 1e-9)):
        raise InputError(f"dp_effects projection weights {list(weights)} are not finite numbers >= {MIN_WEIGHT:g} "
                         "whose squares sum to at most their number", "send the analyst's allocation, or none")
    gram = projection.gram_weight
    if gram is not None and not number_in_range(gram, MIN_WEIGHT, 1.0):
        raise InputError(f"dp_effects projection gram_weight {gram!r} is not a number in [{MIN_WEIGHT:g}, 1]",
                         "send e.g. 0.25, or none")
    mods = projection.modifiers
    pilot, copies = projection.pilot, projection.replicate_pilots

    def line(gamma: Sequence[float]) -> bool:
        # |m^T gamma| <= sum |gamma_q| (|z_q| <= 1): with twice that finite no partial sum of it overflows, in whatever
        # order BLAS adds, nor phi minus it; else a subject with z_q = 0 scores inf * 0 = NaN, and the release fails
        # after its charge or not depending on the rows (docs/dp-cate-projection.md, "Clipping the residual")
        return len(gamma) == len(mods) + 1 and all(is_finite_number(v) for v in gamma) and (
            math.isfinite(2.0 * sum(abs(float(v)) for v in gamma)))

    centred = projection.centre is not None
    if (pilot is not None) != centred or (copies is not None) != centred or (
            centred and not (line(pilot) and all(line(g) for g in copies))):  # type: ignore[arg-type]
        raise InputError(f"dp_effects projection centre {projection.centre!r}, pilot {pilot!r} and replicate pilots "
                         f"{copies!r} are not all absent or a bound and lines of one finite number per modifier and "
                         "the intercept, each with a finite sum of absolute values below half the largest float",
                         "send the analyst's centre and pilots, or none")
    kappas = projection.modifier_clips
    if kappas is not None and (len(kappas) != len(mods) or not all(number_in_range(k, MIN_CLIP, 1.0) for k in kappas)):
        raise InputError(f"dp_effects modifier clips {list(kappas)} are not one number in [{MIN_CLIP:g}, 1] per "
                         "modifier", "send the analyst's clips, or none")
    if not all(_is_index(j, m) for j in mods) or len(set(mods)) != len(mods):
        raise InputError(f"dp_effects modifiers {list(mods)} are not distinct covariates",
                         "list each modifier once, among the study's covariates")
    if len(mods) > MAX_MODIFIERS or len(projection.partitions) > MAX_MODIFIERS:
        raise InputError(f"{len(mods)} modifiers and {len(projection.partitions)} subgroup partitions: more than "
                         f"{MAX_MODIFIERS} of either", "declare the few covariates the question is about")
    seen = set()
    for g in projection.partitions:
        if not _is_index(g.column, m) or g.column in seen:
            raise InputError(f"dp_effects subgroup column {g.column!r} is not a covariate, or is declared twice",
                             "give each subgroup covariate once, among the study's covariates")
        seen.add(g.column)
        edges = g.edges
        numeric = all(is_finite_number(e) for e in edges)
        if not numeric or not 2 <= len(edges) <= MAX_BINS + 1:
            raise InputError(f"subgroup edges {list(edges)} of {label(g.column)} are not 2..{MAX_BINS + 1} finite "
                             "numbers (unbounded bins)", "give finite edges, e.g. [18, 50, 65, 95]")
        if any(b <= a for a, b in itertools.pairwise(edges)):
            raise InputError(f"subgroup edges {list(edges)} of {label(g.column)} are not strictly increasing "
                             "(overlapping bins)", "sort the edges and list each once")


@dataclass(frozen=True)
class ProjectionLayout:
    """The added sums of a release (module docstring) and the groups of disjoint-support sums among them."""

    parts: tuple[Component, ...]
    groups: tuple[tuple[int, ...], ...]


def projection_layout(projection: Projection, outcome_width: float, trim: float,
                      n_replicates: int) -> ProjectionLayout:
    """The sums :func:`party_projection_sums` computes, in its order: point and spread sums, then replicates.

    Point values range over ``[-a, a]`` with ``a = min(A, clip R)`` (``A`` the score's bound, :func:`score_bound`,
    ``projection.clip`` in widths ``R``; ``blp_q``'s over ``kappa_q`` times that with
    ``projection.modifier_clips``), the cells' squares over ``[0, a^2]``; with a ``projection.centre`` the
    ``blp_q`` (q = 0..p) range over ``kappa_q b``, ``b = centre R``, instead; the meat's products over those
    bounds' products; a ``projection.clip_compensation`` ``beta`` widens the point ranges (``blp_q``, the cells') by
    ``beta R``. The ``blp_q`` weigh ``projection.weights`` (one each; refused otherwise) or
    :data:`~.scores.POINT_WEIGHT`; a centred projection carries one replicate pilot per replicate (refused otherwise).
    """
    ate = components(["aipw"], ["ate"], outcome_width, trim)[0]
    bound = score_bound(projection, outcome_width, trim)
    a = bound if projection.clip is None else min(bound, float(projection.clip) * float(outcome_width))
    p = len(projection.modifiers)
    centred = bool(p) and projection.centre is not None
    # a clipped or centred intercept row, or another score: blp_0 and blp_meat_0_0 replace the ATE's sums
    own = int(bool(p) and (a < ate.high or projection.residual_clip is not None or centred))
    b = float(projection.centre) * float(outcome_width) if centred else a  # type: ignore[arg-type]
    first = 0 if own else 1
    copies = projection.replicate_pilots
    if projection.centre is not None and len(copies or ()) != n_replicates:
        raise InputError(f"{len(copies or ())} dp_effects replicate pilots for {n_replicates} noise replicates",
                         "send one pilot per replicate (the projection of its statistics and models)")
    weights = projection.weights if projection.weights is not None else (POINT_WEIGHT,) * (p + 1 - first)
    if len(weights) != p + 1 - first:
        raise InputError(f"{len(weights)} dp_effects projection weights for {p + 1 - first} projection sums",
                         "send one weight per blp sum (blp_0 first when a clip or a centre gives the intercept "
                         "its own)")
    back = 0.0 if projection.clip_compensation is None else float(projection.clip_compensation) * float(outcome_width)
    # h_0 = a = A when the ATE's phi is v_0 (nothing clipped: nothing added back)
    h = b * np.array((1.0, *(projection.modifier_clips or (1.0,) * p))) + back * np.array([own] + [1] * p)
    if p and b > MAX_MEAT_BOUND:
        raise InputError(f"dp_effects projection bound {b:g} (its centre or clip times the outcome width) makes the "
                         "meat's range, its square, overflow floating point",
                         "declare a projection clip and centre of a few outcome-range widths")
    parts = [Component(f"blp_{q}", True, -h[q], h[q], float(w)) for q, w in zip(range(first, p + 1), weights,
                                                                                 strict=True)]
    parts += [Component(f"blp_meat_{i}_{j}", False, 0.0 if i == j else -h[i] * h[j], h[i] * h[j], SPREAD_WEIGHT)
              for i in range(p + 1) for j in range(i, p + 1) if j > 0 or own]
    if p and projection.gram_weight is not None:  # model-free (no replicates), like the bins' counts
        w = float(projection.gram_weight)
        parts += [Component(f"gram_0_{q}", False, -1.0, 1.0, w) for q in range(1, p + 1)]
        parts += [Component(f"gram_{q}_{q}", False, 0.0, 1.0, w) for q in range(1, p + 1)]
    kinds: list[list[int]] = []
    for g, part in enumerate(projection.partitions):
        for name, point, low, high, weight in (("_n", False, 0.0, 1.0, COUNT_WEIGHT),
                                               ("", True, -a - back, a + back, POINT_WEIGHT),
                                               ("_sq", False, 0.0, a * a, SPREAD_WEIGHT)):
            kinds.append(list(range(len(parts), len(parts) + part.n_bins)))
            parts += [Component(f"cell_{g}_{c}{name}", point, low, high, weight) for c in range(part.n_bins)]
    copies = replicate_components(parts, n_replicates)
    start = len(parts)
    for b in range(n_replicates):
        for g in range(len(projection.partitions)):
            kinds.append([start + k for k, c in enumerate(copies) if c.copy == b and c.of.startswith(f"cell_{g}_")])
    return ProjectionLayout((*parts, *copies), tuple(tuple(k) for k in kinds if k))


def score_bound(projection: Projection, outcome_width: float, trim: float) -> float:
    """``A``, the bound on the score the added sums use: ``R / t``, or ``R + rho / t`` with a ``residual_clip``."""
    if projection.residual_clip is None:
        return components(["aipw"], ["ate"], outcome_width, trim)[0].high
    return residual_score_bound(outcome_width, trim, float(projection.residual_clip) * float(outcome_width))


def projection_sensitivity_squared(layout: ProjectionLayout) -> float:
    """The added sums' share of the squared L2 sensitivity (module docstring)."""
    weights = np.array([c.weight for c in layout.parts])
    reach = np.array([c.weight * max(abs(c.low), abs(c.high)) / c.width for c in layout.parts])
    grouped = {j for group in layout.groups for j in group}
    total = float(sum(weights[j] ** 2 for j in range(len(layout.parts)) if j not in grouped))
    for group in layout.groups:
        top = np.sort(reach[list(group)] ** 2)[::-1]
        total += max(float(np.max(weights[list(group)] ** 2)), float(top[:2].sum()))
    return total


def scores_sensitivity(parts: Sequence[Component], layout: ProjectionLayout | None) -> float:
    """L2 sensitivity of the whole score release: today's parts (:func:`~.scores.release_sensitivity`) and the added."""
    base = release_sensitivity(parts)
    if layout is None:
        return base
    return math.sqrt(base * base + projection_sensitivity_squared(layout))


@dataclass(frozen=True)
class ClipLosses:
    """Per subject, the clip losses added back (:func:`model_clip_losses`): ``rows`` (n x (p + 1)) of the ``blp_q``
    values, ``cells`` (n) of ``1[c] phi``'s, each within ``[-bound, bound]``."""

    rows: NDArray[np.float64]
    cells: NDArray[np.float64]
    bound: float


def _clip_bounds(parts: Sequence[Component], back: float) -> dict[str, tuple[float, float]]:
    """Each point sum's clip before a loss of at most ``back`` is added back (its range narrowed by ``back``)."""
    return {c.name: (c.low + back, c.high - back) if c.point else (c.low, c.high) for c in parts}


def _row_values(centred: NDArray[np.float64], phi: NDArray[np.float64], m: NDArray[np.float64],
                bounds: dict[str, tuple[float, float]]) -> NDArray[np.float64]:
    """``clip(m_q (phi - m^T gamma))`` for each row with its own ``blp_q``, ``phi`` for the intercept row without."""
    return np.column_stack([np.clip(centred * m[:, q], *bounds[f"blp_{q}"]) if f"blp_{q}" in bounds else phi
                            for q in range(m.shape[1])])


def _cell_bounds(bounds: dict[str, tuple[float, float]]) -> tuple[float, float]:
    return next((v for k, v in bounds.items() if k.startswith("cell_") and k.count("_") == 2), (-np.inf, np.inf))


def binary_outcomes(
    e: NDArray[np.float64], mu0: NDArray[np.float64], mu1: NDArray[np.float64], outcome_width: float,
    score: Callable[[NDArray[np.int8], NDArray[np.float64]], NDArray[np.float64]],
) -> list[tuple[NDArray[np.float64], NDArray[np.float64]]]:
    """``(p_s, phi_s)`` of a binary outcome's four records ``s = (t, y)``, ``y`` at either end of the range.

    ``p_s = P(T = t) P(Y = y | t)`` with ``P(T = 1) = e`` and ``P(Y = R/2 | t) = (mu_t + R/2) / R`` (``mu_t`` centred,
    in ``[-R/2, R/2]``); ``phi_s = score(t, y)`` on the centred scale: the input of :func:`model_clip_losses`.
    """
    half = float(outcome_width) / 2.0
    return [((e if arm else 1.0 - e) * ((mu + half) if top else (half - mu)) / (2.0 * half),
             score(np.full(e.size, arm, dtype=np.int8), np.full(e.size, half if top else -half)))
            for arm, mu in ((0, mu0), (1, mu1)) for top in (False, True)]


def model_clip_losses(
    parts: Sequence[Component], outcomes: Sequence[tuple[NDArray[np.float64], NDArray[np.float64]]],
    modifiers: NDArray[np.float64], pilot: Sequence[float] | None, bound: float,
) -> ClipLosses:
    """The loss each subject's point values are expected to take from their clips (module docstring).

    ``outcomes`` are ``(p_s, phi_s)``: per subject, the model probability of outcome ``s`` and the score it would
    have with it (summing to 1 over ``s``); a value ``u`` clipped to ``[lo, hi]`` loses ``u - clip(u)``, and the
    subject's loss is ``sum_s p_s (u_s - clip(u_s))``, clipped to ``[-bound, bound]``. Under the models it makes the
    clipped value unbiased for the unclipped one: ``E[clip(u)] + loss = E[u]`` when the loss is within the bound.
    """
    m = np.column_stack([np.ones(modifiers.shape[0]), modifiers])
    bounds = _clip_bounds(parts, bound)
    lo, hi = _cell_bounds(bounds)
    gamma = np.zeros(m.shape[1]) if pilot is None else np.asarray(pilot, dtype=float)
    rows, cells = np.zeros(m.shape), np.zeros(m.shape[0])
    for p_s, phi_s in outcomes:
        centred = phi_s - m @ gamma
        raw = np.column_stack([centred * m[:, q] if f"blp_{q}" in bounds else phi_s for q in range(m.shape[1])])
        rows += p_s[:, None] * (raw - _row_values(centred, phi_s, m, bounds))
        cells += p_s * (phi_s - np.clip(phi_s, lo, hi))
    return ClipLosses(np.clip(rows, -bound, bound), np.clip(cells, -bound, bound), float(bound))


def subject_projection_values(
    parts: Sequence[Component], phi: NDArray[np.float64], modifiers: NDArray[np.float64], bins: NDArray[np.int64],
    pilot: Sequence[float] | None = None, losses: ClipLosses | None = None,
) -> NDArray[np.float64]:
    """Per-subject values (n x J) of the non-replicate ``parts`` (module docstring), clipped to their ranges.

    ``modifiers`` holds ``z_1..z_p`` (n x p), ``bins`` each subject's bin per partition (n x G, -1: none);
    with a ``pilot`` ``gamma`` (:class:`Projection`'s), each subject's ``m^T gamma`` is subtracted from ``phi``
    in the ``blp_q``; with ``losses`` (:func:`model_clip_losses`), each clipped point value gets its loss back.
    The meat multiplies the ``blp`` values (``phi`` for row 0 without ``blp_0``).
    """
    m = np.column_stack([np.ones_like(phi), modifiers])
    centred = phi if pilot is None else phi - m @ np.asarray(pilot, dtype=float)
    bounds = _clip_bounds(parts, 0.0 if losses is None else losses.bound)
    v = _row_values(centred, phi, m, bounds)
    cell = np.clip(phi, *_cell_bounds(bounds))
    if losses is not None:
        v = v + losses.rows * np.array([f"blp_{q}" in bounds for q in range(m.shape[1])])
        cell = cell + losses.cells
    columns = []
    for c in parts:
        kind, *index = c.name.split("_")
        if c.name.startswith("blp_meat_"):
            columns.append(v[:, int(index[1])] * v[:, int(index[2])])
        elif kind == "blp":
            columns.append(v[:, int(index[0])])
        elif kind == "gram":
            columns.append(m[:, int(index[0])] * m[:, int(index[1])])
        else:
            inside = (bins[:, int(index[0])] == int(index[1])).astype(float)
            suffix = index[2] if len(index) > 2 else ""
            columns.append(inside * {"n": 1.0, "": cell, "sq": phi * phi}[suffix])
    out = np.column_stack(columns) if columns else np.zeros((phi.size, 0))
    return np.clip(out, [c.low for c in parts], [c.high for c in parts])


def subject_bins(X: NDArray[np.float64], projection: Projection, feature_map: FeatureMap) -> NDArray[np.int64]:
    """Each subject's bin per partition (n x G) from its covariates clipped to the public ranges."""
    out = np.empty((X.shape[0], len(projection.partitions)), dtype=np.int64)
    for g, part in enumerate(projection.partitions):
        out[:, g] = part.bin_of(np.clip(X[:, part.column], *feature_map.bounds[part.column]))
    return out


def party_projection_sums(
    X: ArrayLike, treatment: ArrayLike, outcome: ArrayLike, feature_map: FeatureMap, site: int,
    folds: NDArray[np.integer], models: Sequence[NuisanceModel], layout: ProjectionLayout, trim: float,
    projection: Projection, replicates: Sequence[Sequence[NuisanceModel]] = (),
) -> NDArray[np.float64]:
    """Exact sums of ``layout.parts`` over the rows, each fold scored with its own model (and each replicate's).

    The AIPW score is :func:`~.scores.subject_scores`' ``aipw_ate``, clipped to ``[-R/t, R/t]``, or with a
    ``projection.residual_clip`` :func:`~.scores.aipw_ate_score` of the unclipped outcome with its residuals
    clipped, within ``[-A, A]`` (:func:`score_bound`; every value is clipped to its sum's range in the end,
    :func:`subject_projection_values`); with a ``projection.clip_compensation``, each subject's clip losses under
    the scoring model (:func:`model_clip_losses`, the four outcomes of a binary ``y``) are added back; a sum over
    rows like :func:`~.release.party_score_sums`, whose fold checks the caller has run.
    """
    arr = np.asarray(X, dtype=float)
    D = feature_map.design(arr, site)
    t = check_treatment(treatment, "treatment", n=D.shape[0], both_arms=False)
    ate = components(["aipw"], ["ate"], feature_map.outcome_width, trim)[:1]
    rho = projection.residual_clip
    if rho is None:
        y = feature_map.centred_outcome(outcome)
    else:  # the outcome unclipped: only the residual's clip bounds the score
        y = check_vector(outcome, "outcome", n=D.shape[0]) - feature_map.outcome_mid
        rho = float(rho) * feature_map.outcome_width
    Z = D[:, feature_map.n_sites + np.asarray(projection.modifiers, dtype=np.int64)]
    bins = subject_bins(arr, projection, feature_map)
    base = [c for c in layout.parts if c.of is None]
    point = [c for c in base if c.point]
    total = np.zeros(len(layout.parts))
    n_base = len(base)
    for k, model in enumerate(models):
        rows = folds == k

        def values(m: NuisanceModel, pilot: Sequence[float] | None,
                   rows: NDArray[np.bool_] = rows) -> NDArray[np.float64]:
            Dk = D[rows]
            e, mu0, mu1 = m.propensity(Dk, trim), m.outcome(Dk, 0, feature_map), m.outcome(Dk, 1, feature_map)

            def score(arm: NDArray[np.int8], value: NDArray[np.float64]) -> NDArray[np.float64]:
                if rho is None:
                    return subject_scores(ate, arm, value, e, mu0, mu1)[:, 0]
                return aipw_ate_score(arm.astype(float), value, e, mu0, mu1, rho)  # within [-A, A]

            losses = None
            if projection.clip_compensation is not None:
                outcomes = binary_outcomes(e, mu0, mu1, feature_map.outcome_width, score)
                losses = model_clip_losses(base, outcomes, Z[rows], pilot,
                                           float(projection.clip_compensation) * feature_map.outcome_width)
            return subject_projection_values(base, score(t[rows], y[rows]), Z[rows], bins[rows], pilot, losses)

        at_model = values(model, projection.pilot)
        total[:n_base] += at_model.sum(axis=0)
        point_at = at_model[:, [j for j, c in enumerate(base) if c.point]]
        for b, replicate in enumerate(replicates):
            index = [j for j, c in enumerate(layout.parts) if c.copy == b]
            pilot = None if projection.replicate_pilots is None else projection.replicate_pilots[b]
            at_copy = values(replicate[k], pilot)[:, [j for j, c in enumerate(base) if c.point]]
            total[index] += replicate_differences(point, [layout.parts[j] for j in index], point_at, at_copy).sum(0)
    return total
