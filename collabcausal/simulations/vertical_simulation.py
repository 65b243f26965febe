"""Vertical ``dp_effects`` on one machine: the plaintext twin, or the encrypted rounds in process.

Runs, for row groups whose covariates are split between parties
(:class:`~collabcausal.estimators.dp.effects.vertical.ColumnGroups`), the sums the protocol computes
(:mod:`collabcausal.estimators.dp.effects.vertical`) with each computing party's noise share drawn
separately, and the coordinator's post-processing of the horizontal study
(:func:`~collabcausal.estimators.dp.effects.analysis.fold_models`,
:func:`~collabcausal.estimators.dp.effects.analysis.effects_from_sums`). By default in the clear (the
**plaintext twin**, where the benchmark's replications run); with ``encrypted=True`` each row group runs the
encrypted rounds (:mod:`collabcausal.vertical.dp_effects_rounds`; with three or more column groups the
products and parts passed between parties, which the protocol seals, stay in this process) on the same
inputs and noise shares, which tests/simulations check agree to the CKKS error bound.

Several row groups are summed in the clear at the coordinator (each row group's release is DP on its
own; secure aggregation across row groups would lower the noise, and is not wired here).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from collabcausal.analyst.dp_effects import DPEffectsSpec
from collabcausal.errors import InputError
from collabcausal.estimators.dp.effects.design import FeatureMap
from collabcausal.estimators.dp.effects.pooling import DPEffect
from collabcausal.estimators.dp.effects.statistics import fold_statistics
from collabcausal.estimators.dp.effects.vertical import (
    ColumnGroups,
    WeightPolynomial,
    cross_entries,
    entry_parties,
    group_design,
    label_vectors,
    released_variance,
    scaled_score_terms,
)
from collabcausal.estimators.dp.effects.vertical_program import (
    SCORE_NOISE_PARTIES,
    ScoreProgram,
    noise_share,
    program_from_statistics,
    score_inputs,
    scores_sigma,
    share_sd,
    statistics_sigma,
    vertical_effect,
)
from collabcausal.vertical import KeyOwner, load_public_context, preset
from collabcausal.vertical.column import RelayedColumn
from collabcausal.vertical.dp_effects_rounds import (
    ARM_PRODUCT,
    arm_products,
    cross_summands,
    encrypt_label_vectors,
    encrypt_score_inputs,
    open_totals,
    packed_entries,
    score_summands,
    statistics_depth,
)


@dataclass(frozen=True)
class RowGroup:
    """One row group's aligned subjects: each column group's covariates, the label holder's T and Y."""

    X: tuple[NDArray[np.float64], ...]
    T: NDArray[np.int8]
    Y: NDArray[np.float64]

    @property
    def n(self) -> int:
        """Subjects of the row group."""
        return int(self.T.shape[0])


@dataclass(frozen=True)
class VerticalResult:
    """The estimate, the released noise sds and the weight polynomial of one vertical study."""

    effect: DPEffect
    statistics_sd: NDArray[np.float64]
    scores_sd: NDArray[np.float64]
    weight: WeightPolynomial
    dp_floor: float
    wire: WireLog | None = None


def noise_shares(k: NDArray[np.int64], sigma: float, rng: np.random.Generator | None) -> NDArray[np.float64]:
    """Each computing party's noise share on each entry: row ``p`` is party ``p``'s
    (:func:`~collabcausal.estimators.dp.effects.vertical_program.noise_share`; entry ``j`` is computed by
    parties ``0 .. k[j] - 1``, zero elsewhere)."""
    return np.stack([np.where(k > p, noise_share(k, sigma, rng), 0.0) for p in range(int(k.max()))])


def vertical_study(row_groups: Sequence[RowGroup], groups: ColumnGroups, spec: DPEffectsSpec, *,
                   rng: np.random.Generator | None = None, encrypted: bool = False) -> VerticalResult:
    """Run vertical ``dp_effects`` (AIPW, ATE, pooled nuisances, one fold) on ``row_groups``.

    ``rng=None`` draws the noise shares from OpenDP (as parties do); a generator makes them reproducible.
    ``encrypted``: each row group computes its cross statistics and its scores by the encrypted rounds; the
    result then also records the time and the ciphertext bytes each round took.
    """
    if spec.n_folds != 1 or spec.nuisance != "pooled":
        raise InputError("dp_effects on column groups fits pooled full-sample nuisances",
                         'use n_folds = 1 and nuisance = "pooled"')
    feature_map = FeatureMap(spec.bounds, spec.outcome_range, len(row_groups))
    (rho_n, _), (rho_s, _) = spec.budgets
    k_stats = entry_parties(groups, feature_map.n_sites)
    sigma_n = statistics_sigma(feature_map, rho_n, groups)
    designs = [_design(feature_map, rg, site, groups) for site, rg in enumerate(row_groups)]
    wire = WireLog() if encrypted else None
    statistics = sum(
        _statistics(D, rg, groups, feature_map, site, noise_shares(k_stats, sigma_n, rng), sigma_n, wire)
        for site, (D, rg) in enumerate(zip(designs, row_groups, strict=True)))
    stats_sd = sigma_n * np.sqrt(released_variance(k_stats) * len(row_groups))
    program = program_from_statistics(
        np.asarray(statistics), stats_sd, feature_map, groups, trim=spec.trim, ridge_scale=spec.ridge_scale,
        n_replicates=spec.nuisance_replicates, rng=np.random.default_rng(spec.seed),
        estimators=spec.estimators, estimands=spec.estimands)
    sigma_s = scores_sigma(program, rho_s)
    k_scores = np.full(len(program.parts), SCORE_NOISE_PARTIES)
    released = sum(
        _scores(D, rg, groups, feature_map, program, noise_shares(k_scores, sigma_s, rng), sigma_s, wire)
        for D, rg in zip(designs, row_groups, strict=True))
    scores_sd = float(sigma_s * np.sqrt(released_variance(SCORE_NOISE_PARTIES) * len(row_groups)))
    n = sum(rg.n for rg in row_groups)
    effect, sds = vertical_effect(np.asarray(released), scores_sd, program.parts, n, alpha=spec.alpha)
    return VerticalResult(effect, stats_sd, sds, program.poly, float(sds[0] / n), wire)


@dataclass
class WireLog:
    """Seconds and ciphertext bytes of the encrypted rounds (contexts, columns, totals), summed over row groups."""

    seconds: dict[str, float] = field(default_factory=dict)
    bytes: dict[str, int] = field(default_factory=dict)

    def add(self, step: str, seconds: float, payload: Sequence[bytes] = ()) -> None:
        """Count one step's time and the bytes it sends."""
        self.seconds[step] = self.seconds.get(step, 0.0) + seconds
        self.bytes[step] = self.bytes.get(step, 0) + sum(len(b) for b in payload)


def _statistics(designs: list[NDArray[np.float64]], rg: RowGroup, groups: ColumnGroups, feature_map: FeatureMap,
                site: int, shares: NDArray[np.float64], sigma: float, wire: WireLog | None) -> NDArray[np.float64]:
    """One row group's released statistics: the joined rows' exact vector plus every party's share (twin),
    or the label holder's local entries and the encrypted round's cross entries (flooded at the noise
    share's sd, :func:`share_sd`)."""
    y = feature_map.centred_outcome(rg.Y)
    if wire is None:
        exact = fold_statistics(np.sum(designs, axis=0), rg.T, y, feature_map.outcome_width)
        return exact + shares.sum(axis=0)
    label = designs[0]
    released = fold_statistics(label, rg.T, y, feature_map.outcome_width) + shares[0]
    u = np.clip(y / feature_map.outcome_width, -0.5, 0.5)
    vectors = label_vectors(label, rg.T.astype(float), u, groups, feature_map.n_sites, site)
    start = time.perf_counter()
    owner = KeyOwner(preset(statistics_depth(groups.n_parties)))
    sent = {k: column.to_bytes() for k, column in encrypt_label_vectors(owner, vectors).items()}
    wire.add("statistics: label holder encrypts", time.perf_counter() - start,
             [owner.public_context(), *(c for chunks in sent.values() for c in chunks)])
    context = load_public_context(owner.public_context())
    relayed: dict[object, RelayedColumn] = {k: RelayedColumn(context, chunks, rg.n) for k, chunks in sent.items()}
    entries = cross_entries(groups, feature_map.n_sites)
    for g in range(1, groups.n_parties):
        own = groups.design_columns(g, feature_map.n_sites)
        mine = packed_entries([e for e in entries if e.evaluator == g])
        at = [e.index for e in mine]
        start = time.perf_counter()
        totals = cross_summands(relayed, designs[g], mine, own).packed(context, shares[1, at], share_sd(sigma))
        products = arm_products(relayed["arm"], designs[g], own) if g < groups.n_parties - 1 else []
        wire.add("statistics: parties total their cross entries", time.perf_counter() - start,
                 [*totals, *(c for chunks in products for c in chunks)])
        if products:  # sealed to every later party in the protocol; here held for them in the clear of this process
            relayed |= {(ARM_PRODUCT, c): RelayedColumn(context, chunks, rg.n)
                        for c, chunks in zip(own, products, strict=True)}
        start = time.perf_counter()
        released[at] = open_totals(owner, totals, shares[0, at], grid=owner.parameters.error_bound)
        wire.add("statistics: label holder opens", time.perf_counter() - start)
    return released


def _scores(designs: list[NDArray[np.float64]], rg: RowGroup, groups: ColumnGroups, feature_map: FeatureMap,
            program: ScoreProgram, shares: NDArray[np.float64], sigma: float, wire: WireLog | None
            ) -> NDArray[np.float64]:
    """One row group's released (scaled) score sums: :func:`scaled_score_terms` of the groups' clipped parts
    summed plus every party's share (twin), or by the encrypted round."""
    def inputs(group: int) -> list[NDArray[np.float64]]:
        return score_inputs(program, designs[group], group, groups, feature_map)

    T, y = rg.T.astype(float), feature_map.centred_outcome(rg.Y)
    if wire is None:
        summed = np.sum([inputs(g) for g in range(groups.n_parties)], axis=0)
        at_copies = [list(summed[:3] + summed[i:i + 3]) for i in range(3, len(summed), 3)]
        terms = scaled_score_terms(T, y, list(summed[:3]), at_copies, program.poly, program.parts, program.unit)
        return np.array([t.sum() for t in terms]) + shares.sum(axis=0)
    start = time.perf_counter()
    owner = KeyOwner(preset(7))
    sent = [column.to_bytes() for column in encrypt_score_inputs(owner, inputs(1))]
    wire.add("scores: party encrypts its parts", time.perf_counter() - start,
             [owner.public_context(), *(c for chunks in sent for c in chunks)])
    context = load_public_context(owner.public_context())
    start = time.perf_counter()
    further = [[column.to_bytes() for column in encrypt_score_inputs(context, inputs(g))]
               for g in range(2, groups.n_parties)]
    if further:
        wire.add("scores: further parties encrypt their parts", time.perf_counter() - start,
                 [c for party in further for chunks in party for c in chunks])
    start = time.perf_counter()
    relayed = [RelayedColumn(context, chunks, rg.n) for chunks in sent]
    others = [[RelayedColumn(context, chunks, rg.n) for chunks in party] for party in further]
    summed = score_summands(relayed, inputs(0), T, y, program.poly, program.parts, program.unit, others)
    totals = summed.packed(context, shares[0], share_sd(sigma))
    wire.add("scores: label holder evaluates and totals", time.perf_counter() - start, totals)
    start = time.perf_counter()
    opened = open_totals(owner, totals, shares[1], grid=owner.parameters.error_bound)
    wire.add("scores: party opens", time.perf_counter() - start)
    return opened


def _design(feature_map: FeatureMap, rg: RowGroup, site: int, groups: ColumnGroups) -> list[NDArray[np.float64]]:
    if len(rg.X) != groups.n_parties or any(x.shape[1] != len(g) for x, g in zip(rg.X, groups.groups, strict=True)):
        raise InputError("a row group's column blocks do not match the column groups",
                         "give each party its declared covariates, in the declared order")
    return [group_design(feature_map, x, site, groups, g) for g, x in enumerate(rg.X)]


