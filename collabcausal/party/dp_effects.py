"""The party side of the private effect estimate (study kind ``dp_effects``; docs/dp-effects.md).

Two differentially private operations, each answered once per study by a party that holds all
covariates, T and Y of its own subjects; nothing per subject leaves the party:

``dp_effects_statistics``
    The per-arm sufficient statistics of each cross-fitting fold of the party's rows
    (:func:`~collabcausal.estimators.dp.effects.release.party_statistics`), its outcome cross sums weighted by
    the request's ``cross_weight`` (default 1), Gaussian noise for the L2 sensitivity
    :func:`~collabcausal.estimators.dp.effects.statistics.statistics_sensitivity` of that weight.
``dp_effects_scores``
    The sums of bounded AIPW / Hajek scores over the party's rows, scored with the nuisance
    models the analyst fitted from the released statistics (post-processing), noise for the
    sensitivity :func:`~collabcausal.estimators.dp.effects.scores.release_sensitivity`.

Both are Gaussian releases, ``rho``-zCDP (Bun & Steinke 2016) under the ledger's one relation
(substitute one record, n public) for the ``rho`` the request asks: the statistics because each
record lies in one fold (parallel composition over folds defined by position), the scores because a
record moves only its own bounded score once the models are fixed, and the models are a function
of the first release (adaptive composition; the party charges each request to its ledger as a zCDP
charge before computing it, so their rhos add and the ledger converts the sum to (epsilon, delta)).
A hostile model costs accuracy, not privacy: every score is clipped to its public range whatever the model says.

With ``secagg`` in the request the reply is masked for secure aggregation
(:mod:`collabcausal.secagg`): the party encodes its values as fixed-point integers, adds its share
of a distributed discrete Gaussian (calibrated so that the sum of ``honest`` shares is
rho-zCDP) and masks them with pairwise keys; the analyst learns only the sum over the round's
parties.

Request params shared by both: ``study``, ``rho`` (the release's zCDP budget), ``delta`` (its share of
delta, 0 < delta < 1/n), ``columns``
(covariates in design order), ``design`` (:meth:`FeatureMap.to_spec`), ``site`` (the party's index
in the one-hot), ``n_folds`` (1: full-sample nuisances; K >= 2: cross-fitting), optional
``secagg``. Scores add ``models`` (one :meth:`NuisanceModel.to_spec` per fold), ``estimators``,
``estimands``, ``trim`` and optional ``replicates`` (up to 32 noise replicates, each one model per
fold: the release then also carries, per replicate, the sums of the clipped score differences its
models make; :mod:`~collabcausal.estimators.dp.effects.scores`). Optional ``projection`` (modifiers and
subgroup bins, :meth:`~collabcausal.estimators.dp.effects.projection.Projection.to_spec`) appends the
effect-modification sums of :mod:`~collabcausal.estimators.dp.effects.projection` to the same vector,
noise for the joint sensitivity (docs/dp-cate-projection.md).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import NDArray

from collabcausal.errors import InputError, PolicyError
from collabcausal.estimators.dp.effects.design import FeatureMap
from collabcausal.estimators.dp.effects.folds import fold_labels, fold_seed
from collabcausal.estimators.dp.effects.nuisances import NuisanceModel
from collabcausal.estimators.dp.effects.projection import (
    Projection,
    ProjectionLayout,
    party_projection_sums,
    projection_layout,
    scores_sensitivity,
)
from collabcausal.estimators.dp.effects.release import party_score_sums, released_statistics, scaled_sums
from collabcausal.estimators.dp.effects.scores import (
    MAX_REPLICATES,
    Component,
    components,
    release_reach,
    release_sensitivity,
    replicate_components,
)
from collabcausal.estimators.dp.effects.statistics import (
    check_cross_weight,
    statistics_length,
    statistics_reach,
    statistics_sensitivity,
)
from collabcausal.estimators.dp.mechanisms import perturb
from collabcausal.estimators.dp.zcdp import check_rho, gaussian_zcdp_sigma
from collabcausal.estimators.validation import check_delta
from collabcausal.messages import Message
from collabcausal.party.clipping import OUTCOME, count_outside, log_clipping
from collabcausal.party.dp_queries import request_number, require_ledger
from collabcausal.party.node import Party
from collabcausal.party.operations import operation
from collabcausal.party.secagg import masked_release, secagg_spec
from collabcausal.party.table import DEFAULT_MIN_SUBJECTS, column_index

STATISTICS = "dp_effects_statistics"
SCORES = "dp_effects_scores"
MAX_FOLDS = 20
MAX_SITES = 1000
SHARED_PARAMETERS = frozenset({"columns", "design", "n_folds", "site", "rho", "delta", "secagg"})
"""The parameters both operations apply (:func:`parse_request`); each declares its own besides, and any other is
refused before the charge (:meth:`~collabcausal.party.operations.Operation.check_parameters`): a ``cross_weight``
sent to the scores, a newer version's field."""


@dataclass(frozen=True)
class EffectsRequest:
    """The validated parameters both operations share (all public: checked before any charge)."""

    study: str
    rho: float
    delta: float
    columns: tuple[str, ...]
    feature_map: FeatureMap
    site: int
    n_folds: int
    secagg: Mapping[str, Any] | None


def parse_request(party: Party, request: Message, *, labels: bool = True) -> EffectsRequest:
    """Check the shared parameters of a ``dp_effects`` request against the party's table; no data read.

    With ``labels`` (the default) the last check is the party's arm counts (:func:`check_labels`, which reads
    its treatment column); an operation with nested specifications of its own passes ``labels=False`` and
    calls it once they are parsed, so that a malformed one is refused before any row is read.
    """
    p, op = request.params, request.operation
    for key in ("rho", "delta", "columns", "design", "site", "n_folds"):
        if key not in p:
            raise InputError(f"{op} request has no {key}", "send a complete dp_effects request (docs/protocol.md)")
    rho = check_rho(request_number(p["rho"], "rho", op), f"rho of {op}")
    delta = check_delta(request_number(p["delta"], "delta", op), f"delta of {op}")
    n = party.table.n_subjects
    if not 0.0 < delta < 1.0 / n:
        raise InputError(f"delta {delta:g} of {op} is not in (0, 1/n = 1/{n})", "e.g. delta = 1e-6")
    columns = p["columns"]
    if not isinstance(columns, list) or not columns or not all(isinstance(c, str) for c in columns):
        raise InputError(f"{op} columns must be a non-empty list of covariate names", "send columns=[...]")
    for name in columns:
        column_index(party.table, name)
    feature_map = FeatureMap.from_spec(p["design"])
    if feature_map.n_covariates != len(columns) or feature_map.n_sites > MAX_SITES:
        raise InputError(
            f"{op} declares {feature_map.n_covariates} ranges for {len(columns)} columns "
            f"(or more than {MAX_SITES} sites)",
            "send one range per column",
        )
    check_float_range(feature_map, op)
    site, n_folds = p["site"], p["n_folds"]
    if isinstance(site, bool) or not isinstance(site, int) or not 0 <= site < feature_map.n_sites:
        raise InputError(f"{op} site {site!r} is not in 0..{feature_map.n_sites - 1}", "send the party's index")
    if isinstance(n_folds, bool) or not isinstance(n_folds, int) or not 1 <= n_folds <= MAX_FOLDS:
        raise InputError(f"{op} n_folds {n_folds!r} is not in 1..{MAX_FOLDS}", "use 1, or 2..20 for cross-fitting")
    secagg = secagg_spec(p.get("secagg"), op)
    if labels:
        check_labels(party, op, n_folds)
    return EffectsRequest(str(p.get("study", "")), rho, delta, tuple(columns), feature_map, site, n_folds, secagg)


def check_float_range(feature_map: FeatureMap, op: str) -> None:
    """Every declared range has a finite width and midpoint, so no row's arithmetic overflows.

    Refused before the charge: a row that overflowed would fail the request after it, and whether
    it failed would depend on the rows, a channel outside the DP release (docs/dp-effects-audit.md).
    """
    for lo, hi in (*feature_map.bounds, feature_map.outcome_range):
        if not (math.isfinite(hi - lo) and math.isfinite(lo + hi)):
            raise InputError(
                f"{op} declares the range ({lo:g}, {hi:g}), whose width or midpoint overflows floating point",
                "declare the ranges the data can take",
            )


def _check_scores_arithmetic(party: Party, widths: list[float], models: list[NuisanceModel]) -> None:
    """No sum of ``n`` scores of these ranges' ``widths`` and no model's design product can overflow.

    See :func:`check_float_range`. Every range contains 0, so a sum of ``n`` scores is at most
    ``n`` times its width in absolute value; a coefficient vector with a finite sum of absolute
    values keeps every partial sum of ``d @ coef`` finite (``|d_i| <= 1``), whatever the order BLAS
    adds them in. No width underflows to 0 either (a sum is released divided by its width: at an outcome
    range of 1e-200 the squares' ``(R / t)^2`` is 0, and the release failed on 0 / 0 after its charge).
    """
    n = party.table.n_subjects
    if not all(math.isfinite(n * w) and w > 0.0 for w in widths):
        raise InputError(
            f"{SCORES} score sums over {n} rows can overflow or underflow floating point with this outcome range, "
            "trim and projection bounds", "declare the outcome range the data can take, a trim such as 0.1 and a "
            "projection clip and centre of a few outcome-range widths",
        )
    vectors = [v for m in models for v in (m.propensity_coef, *m.outcome_coef)]
    with np.errstate(over="ignore"):
        finite = all(np.isfinite(np.abs(v).sum()) for v in vectors)
    if not finite:
        raise InputError(
            f"{SCORES} nuisance coefficients overflow floating point (their absolute sum is not finite)",
            "send the models fitted from the released statistics",
        )


def check_labels(party: Party, op: str, n_folds: int) -> None:
    """The party holds T and Y, and each arm has at least ``min_subjects`` subjects.

    The refusal is a function of the arm counts and is not differentially private: a study
    requires each arm to reach ``min_subjects`` at every party as a public precondition
    (docs/dp-effects.md, "What a refusal reveals").
    """
    table = party.table
    if not table.has_labels:
        raise InputError(
            f"party {party.name!r} holds no treatment and outcome", "dp_effects needs every party's T and Y"
        )
    floor = getattr(party.policy, "min_subjects", DEFAULT_MIN_SUBJECTS)
    counts = table.arm_counts
    if counts.min() < max(floor, n_folds):
        arm = "treated" if counts[1] < counts[0] else "control"
        raise PolicyError(
            f"party {party.name!r} has fewer than {max(floor, n_folds)} {arm} subjects (its min_subjects) for {op}",
            "leave this party out of the study, or pool it with another site",
        )


def folds_of(party: Party, request: EffectsRequest) -> Callable[[slice], NDArray[np.int8]]:
    """The fold labels of any block of the party's rows: by position, keyed by a secret its ledger keeps
    (same across requests and restarts; read once here, not in the workers)."""
    n = party.table.n_subjects
    if request.n_folds == 1:
        return lambda rows: np.zeros(len(range(n)[rows]), dtype=np.int8)
    seed = fold_seed(require_ledger(party, STATISTICS).secret("dp_effects folds"), request.study)
    return lambda rows: fold_labels(rows, n, request.n_folds, seed)


class RowSums(NamedTuple):
    """What one pass over a party's rows gives a release: its exact sums, and per column how many
    values lie outside the study's declared range (:mod:`collabcausal.party.clipping`; logged, never sent)."""

    sums: NDArray[np.float64]
    outside: dict[str, int]


def row_sums(party: Party, request: EffectsRequest, per_rows: Callable[..., NDArray[np.float64]]) -> RowSums:
    """``per_rows(X, t, y, folds)`` summed over the party's rows (in memory: one block; out of core: each batch).

    ``X`` holds the requested covariates in design order and ``folds`` the rows' fold labels. The same
    pass counts the values outside the design's bounds and the outcome range, so a release reads the
    rows once.
    """
    folds = folds_of(party, request)
    fm = request.feature_map
    bounds = np.array(fm.bounds, dtype=float).reshape(-1, 2)

    def task(rows: slice, X: Any, t: Any, y: Any) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
        return per_rows(X, t, y, folds(rows)), count_outside(bounds, fm.outcome_range, X, y)

    sums, outside = party.table.reduce_rows(task, request.columns, lambda a, b: (a[0] + b[0], a[1] + b[1]))
    names = [*request.columns, OUTCOME]
    return RowSums(sums, {name: int(k) for name, k in zip(names, outside, strict=True)})


@operation(STATISTICS, parameters=SHARED_PARAMETERS | {"cross_weight"}, differentially_private=True, out_of_core=True)
def dp_effects_statistics(party: Party, request: Message) -> Message:
    """``rho``-zCDP per-fold sufficient statistics of the party's rows (module docstring)."""
    req = parse_request(party, request)
    w = check_cross_weight(request.params.get("cross_weight", 1.0), STATISTICS)
    sensitivity = statistics_sensitivity(req.feature_map, w)
    length = req.n_folds * statistics_length(req.feature_map.dim)
    return _release(party, request, req, sensitivity, length, {"n_folds": req.n_folds, "cross_weight": w},
                    lambda: row_sums(party, req, lambda X, t, y, folds: released_statistics(
                        X, t, y, req.feature_map, req.site, folds, req.n_folds, w)), statistics_reach(w))


@operation(SCORES, parameters=SHARED_PARAMETERS | {"models", "replicates", "estimators", "estimands", "trim",
                                                   "projection"}, differentially_private=True, out_of_core=True)
def dp_effects_scores(party: Party, request: Message) -> Message:
    """``rho``-zCDP sums of bounded AIPW / Hajek scores (module docstring)."""
    req = parse_request(party, request, labels=False)
    p = request.params
    models_spec = p.get("models")
    if not isinstance(models_spec, list) or len(models_spec) != req.n_folds:
        raise InputError(f"{SCORES} needs one nuisance model per fold ({req.n_folds})", "send models=[...]")
    models = [NuisanceModel.from_spec(m, req.feature_map.dim) for m in models_spec]
    replicates_spec = p.get("replicates", [])
    if (not isinstance(replicates_spec, list) or len(replicates_spec) > MAX_REPLICATES
            or not all(isinstance(r, list) and len(r) == req.n_folds for r in replicates_spec)):
        raise InputError(f"{SCORES} replicates must be a list of at most {MAX_REPLICATES} lists of {req.n_folds} "
                         "models", "send replicates=[[model per fold], ...] or none")
    replicates = [[NuisanceModel.from_spec(m, req.feature_map.dim) for m in r] for r in replicates_spec]
    estimators, estimands = p.get("estimators"), p.get("estimands")
    if not isinstance(estimators, list) or not isinstance(estimands, list):
        raise InputError(f"{SCORES} needs estimators and estimands lists", 'e.g. ["aipw"] and ["ate", "att"]')
    trim = request_number(p.get("trim"), "trim", SCORES)
    try:
        parts = components(estimators, estimands, req.feature_map.outcome_width, trim)
    except OverflowError:
        raise InputError(f"{SCORES} trim {trim:g} makes the score ranges overflow floating point",
                         "declare a trim such as 0.1") from None
    parts += replicate_components(parts, len(replicates))
    projection, layout = _projection(req, p.get("projection"), parts, trim, len(replicates))
    check_labels(party, SCORES, req.n_folds)  # every specification parsed: the first read of a row
    every = parts + (layout.parts if layout is not None else ())
    _check_scores_arithmetic(party, [c.width for c in every], models + [m for r in replicates for m in r])
    sensitivity = release_sensitivity(parts) if layout is None else scores_sensitivity(parts, layout)
    details = {"components": [c.name for c in every], "trim": trim, "replicates": len(replicates)}

    def sums(X: NDArray[np.float64], t: NDArray[np.int8], y: NDArray[np.float64],
             folds: NDArray[np.int8]) -> NDArray[np.float64]:
        base = party_score_sums(X, t, y, req.feature_map, req.site, folds, models, parts, trim, replicates)
        if layout is None:
            return base
        return np.concatenate([base, party_projection_sums(X, t, y, req.feature_map, req.site, folds, models,
                                                           layout, trim, projection, replicates)])

    def exact() -> RowSums:
        summed = row_sums(party, req, sums)
        return summed._replace(sums=scaled_sums(summed.sums, every))

    return _release(party, request, req, sensitivity, len(every), details, exact, release_reach(every))


def _projection(req: EffectsRequest, spec: object, parts: tuple[Component, ...], trim: float,
                n_replicates: int) -> tuple[Projection, ProjectionLayout | None]:
    """The request's modifiers and subgroups (docs/dp-cate-projection.md), checked before any charge.

    Refused: a malformed or out-of-range declaration, and a release without the AIPW ATE (its score is
    what the projection projects). Nothing here reads a row: a refusal that depended on how many
    subjects a bin holds would let a coordinator learn bin counts exactly by sending uncharged
    declarations with moving edges (docs/dp-cate-projection.md, "What a bin reveals"). A thin bin costs
    accuracy, not privacy: the release's sensitivity does not depend on the bins' sizes, and each bin's
    noisy count is released for the analyst to judge.
    """
    if spec is None:
        return Projection(), None
    projection = Projection.from_spec(spec, req.feature_map)
    if not projection:
        return projection, None
    if "aipw_ate" not in {c.name for c in parts}:
        raise InputError(f"{SCORES} modifiers and subgroups project the AIPW ATE's score, which this release lacks",
                         'request estimators = ["aipw"] and estimands = ["ate"] with them')
    return projection, projection_layout(projection, req.feature_map.outcome_width, trim, n_replicates)


def _release(
    party: Party, request: Message, req: EffectsRequest, sensitivity: float, length: int, details: dict[str, Any],
    exact: Callable[[], RowSums], reach: float = 1.0,
) -> Message:
    """Charge, compute ``exact()``, add noise (or mask a noisy share), reply. The charge comes first.

    Every entry of the vector moves by at most ``reach`` per subject (statistics: products of design
    entries in [-1, 1] and weighted cross sums, :func:`~.statistics.statistics_reach`; scores: scaled to their
    weight, :func:`~.scores.release_reach`), so ``n reach``
    bounds it for the wrap-around check of secure aggregation. The clip counts of the same pass are logged here.
    """
    op = request.operation
    ledger = require_ledger(party, op)
    n = party.table.n_subjects
    if req.secagg is not None:
        prepared = masked_release(party, req.study, req.secagg, op, sensitivity=sensitivity, rho=req.rho,
                                  length=length, value_bound=float(n) * reach)
        ledger.charge_zcdp(op, req.rho, req.delta, study=req.study, details=details | prepared.details)
        summed = exact()
        log_clipping(party.name, op, summed.outside, n)
        return prepared.reply(op, summed.sums)
    sigma = gaussian_zcdp_sigma(sensitivity, req.rho)
    ledger.charge_zcdp(op, req.rho, req.delta, study=req.study, details=details | {"sigma": sigma})
    summed = exact()
    log_clipping(party.name, op, summed.outside, n)
    values = np.asarray(summed.sums, dtype=float)
    params = {"sigma": sigma, "sensitivity": sensitivity, "rho": req.rho, "delta": req.delta, "n_subjects": n}
    return Message(op, params, {"values": perturb("gaussian", values, sigma)})
