"""The coordinator's side of study kind ``dp_effects`` (docs/dp-effects.md): two DP releases per party, pooled.

1. ``dp_effects_statistics`` from every party: per-arm sufficient statistics of its folds, noisy
   (or masked for secure aggregation, so only their sum is seen);
2. the nuisance models, fitted here from the pooled statistics (``nuisance = "pooled"``, a site
   one-hot in every design row) or from each party's own (``"site"``), and ``nuisance_replicates``
   refits on the statistics plus fresh noise of their own law (seeded by ``seed``): post-processing;
3. ``dp_effects_scores`` from every party with those models: noisy (or masked) score sums, and for
   each replicate the sums of the clipped score differences it makes (how far the statistics' noise
   moves the estimate through the models, which the interval then counts);
4. estimates, standard errors and intervals from the summed scores
   (:func:`~collabcausal.estimators.dp.effects.analysis.effects_from_sums`), per-party estimates and
   their inverse-variance pool when the parties' sums are seen one by one.

Both releases are Gaussian, so they share the study's budget in zCDP (Bun & Steinke 2016):
``rho = zcdp_rho(epsilon, delta)``, the largest rho whose OpenDP conversion at delta is epsilon; every
party is charged ``nuisance_share * rho`` (and delta/2) for the first release and the rest for the
second, so its ledger composes them to exactly the study's (epsilon, delta). Split as two
(epsilon_k, delta_k) charges instead, each release's noise sd would be 1.3x larger (1.40x with secure
aggregation) at (1, 1e-6).
The analyst recomputes every noise scale from its own requests and refuses a reply that states
another, so a party cannot make the interval look narrower than its noise allows.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timezone
from functools import partial
from typing import Any

import numpy as np
from numpy.typing import NDArray

from collabcausal.analyst.dp_effects_feasibility import check_study_size, interval_caveat
from collabcausal.analyst.dp_effects_spec import DPEffectsSpec, Round
from collabcausal.analyst.dp_projection import allocate_projection, plan_projection, projection_report
from collabcausal.analyst.grid import Grid
from collabcausal.analyst.replies import check_description
from collabcausal.analyst.secure_sum import secure_sum
from collabcausal.errors import StudyFailedError
from collabcausal.estimators.dp.effects.analysis import effects_from_sums, fold_models, noise_replicates
from collabcausal.estimators.dp.effects.design import FeatureMap
from collabcausal.estimators.dp.effects.pooling import inverse_variance_pool
from collabcausal.estimators.dp.effects.release import unscaled_noise_sd
from collabcausal.estimators.dp.effects.scores import (
    Component,
    components,
    release_reach,
    release_sensitivity,
    release_weights,
    replicate_components,
)
from collabcausal.estimators.dp.effects.statistics import (
    check_cross_weight,
    entry_noise_sd,
    statistics_length,
    statistics_reach,
    statistics_sensitivity,
    statistics_weights,
)
from collabcausal.estimators.dp.zcdp import gaussian_zcdp_sigma, zcdp_epsilon
from collabcausal.messages import Message

STATISTICS = "dp_effects_statistics"
SCORES = "dp_effects_scores"
NOTE = (
    "dp_effects: each party released two Gaussian (zCDP) aggregates of its own rows (per-arm sufficient statistics, "
    "then bounded score sums; substitution of one record, n public), together (epsilon, delta)-DP as its ledger "
    "composes them (privacy below); the nuisance models, estimates "
    "and intervals are post-processing. No row, representation or model of a party's data left it. The interval "
    "adds the known DP noise variance, the noise in the variance estimate and the variability the statistics' noise "
    "gives the nuisance models (from noise replicates) to the sandwich variance."
)
SEED_NOTE = (
    "dp_effects: seed {seed} seeds only the analyst's noise replicates (and, in simulate, the split of the rows into "
    "parties); the DP noise is not seeded (OpenDP draws it from the operating system's entropy), so every run of the "
    "same study gives another estimate, within its DP noise (dp_floor)"
)


def dp_effects_results(grid: Grid, spec: DPEffectsSpec, study: str, parties: Sequence[str], *,
                       timeout: float | None = None, on_missing: str = "fail") -> dict[str, Any]:
    """Run the ``dp_effects`` study over ``parties`` (one per row group); the report's kind-specific part.

    ``on_missing = "continue"``: a party lost during a per-party statistics round is dropped and the study
    goes on over the others, whose releases do not depend on its rows; the report names it, says when and
    what it may have been charged, and that the results exclude it. A party lost during a per-party scores
    round fails the study either way: its statistics are in the nuisance models the other parties' scores
    were computed with, so the estimate would no longer be the one the study declared (the error says what
    was charged). A secure-aggregation round restarts among the rest whatever ``on_missing`` says
    (:func:`~collabcausal.analyst.secure_sum.secure_sum`; the report counts the attempts).
    """
    w = check_cross_weight(spec.cross_weight, "[dp_effects]")  # before anything is sent
    described = grid.send_and_receive(
        {p: Message("describe", {"study": study}) for p in parties}, timeout=timeout
    )
    n_subjects = {}
    for p in parties:
        check_description(p, described[p])
        missing = [c for c in spec.columns if c not in described[p].params["covariates"]]
        if missing or not described[p].params["has_labels"]:
            raise StudyFailedError(
                f"party {p!r} holds {'no covariate ' + repr(missing[0]) if missing else 'no treatment and outcome'}",
                "dp_effects needs every party to hold all the study's covariates, T and Y (row groups only)",
            )
        n_subjects[p] = int(described[p].params["n_subjects"])
    check_study_size(spec, n_subjects)  # before the first charge: a study too small for its eps is refused
    pooled = spec.nuisance == "pooled"
    feature_map = FeatureMap(spec.bounds, spec.outcome_range, len(parties) if pooled else 1)
    parts = components(spec.estimators, spec.estimands, feature_map.outcome_width, spec.trim)
    parts += replicate_components(parts, spec.nuisance_replicates)
    plan = plan_projection(spec, feature_map, parts)  # refusals before any charge
    sites = {p: (i if pooled else 0) for i, p in enumerate(parties)}
    (rho_n, delta_n), (rho_s, delta_s) = spec.budgets
    base = {"study": study, "columns": list(spec.columns), "design": feature_map.to_spec(), "n_folds": spec.n_folds}
    secure = spec.secure_aggregation and len(parties) > 1
    largest = float(max(n_subjects.values()))
    length = statistics_length(feature_map.dim)
    # site nuisances need each party's own statistics: that release is per party even with secure aggregation
    release_statistics = _secure_round if secure and pooled else partial(_plain_round, on_missing=on_missing)
    stats = release_statistics(
        grid, STATISTICS, list(parties),
        lambda p: base | {"site": sites[p], "rho": rho_n, "delta": delta_n, "cross_weight": w},
        statistics_sensitivity(feature_map, w), rho_n, length=spec.n_folds * length,
        value_bound=largest * statistics_reach(w), timeout=timeout, study=study)
    stats = _unweighted(stats, np.tile(statistics_weights(feature_map.dim, w), spec.n_folds))
    rng = np.random.default_rng(spec.seed)
    if pooled:
        assert stats.total is not None
        rows = stats.total.reshape(spec.n_folds, length)
        sd, fit = stats.total_noise_sd, (feature_map.dim, feature_map.n_sites)
        shared = fold_models(rows, *fit, sd, ridge_scale=spec.ridge_scale)
        copies = noise_replicates(rows, *fit, entry_noise_sd(sd, feature_map.dim, w), spec.nuisance_replicates, rng,
                                  ridge_scale=spec.ridge_scale, step=spec.replicate_step)
        models = {p: (shared, [r.models for r in copies]) for p in stats.parties}
    else:
        models, copies = {}, []  # site nuisances: no centre (refused by plan_projection), so no copy's pilot
        for p in stats.parties:
            rows, sd = stats.values[p].reshape(spec.n_folds, length), stats.party_noise_sd
            models[p] = (fold_models(rows, feature_map.dim, 1, sd, ridge_scale=spec.ridge_scale),
                         [r.models for r in noise_replicates(rows, feature_map.dim, 1,
                                                             entry_noise_sd(sd, feature_map.dim, w),
                                                             spec.nuisance_replicates, rng,
                                                             ridge_scale=spec.ridge_scale,
                                                             step=spec.replicate_step)])

    extra = {"estimators": list(spec.estimators), "estimands": list(spec.estimands), "trim": spec.trim}
    every, sensitivity = parts, release_sensitivity(parts)
    if plan is not None:
        counts = [0] * feature_map.n_sites  # subjects per site (pooled nuisances: a party per site)
        for p in stats.parties:
            counts[sites[p]] += n_subjects[p]
        plan = allocate_projection(spec, plan, parts, stats, feature_map, sum(n_subjects[p] for p in stats.parties),
                                   models[stats.parties[0]][0], counts, copies)
        extra["projection"] = plan.projection.to_spec()
        every, sensitivity = parts + plan.layout.parts, plan.sensitivity
    release_scores = _secure_round if secure else _plain_round
    scores = release_scores(grid, SCORES, stats.parties, lambda p: base | extra | {
        "site": sites[p], "rho": rho_s, "delta": delta_s, "models": [m.to_spec() for m in models[p][0]],
        "replicates": [[m.to_spec() for m in replicate] for replicate in models[p][1]]},
        sensitivity, rho_s, length=len(every), value_bound=largest * release_reach(every), timeout=timeout,
        study=study)
    report = _report(spec, every, scores, {p: n_subjects[p] for p in scores.parties}, stats, feature_map)
    caveat = interval_caveat(spec, n_subjects)
    report["warnings"] += [caveat] if caveat else []
    if plan is not None:
        report["effect_modification"] = projection_report(spec, plan, every, scores, stats, feature_map,
                                           sum(n_subjects[p] for p in scores.parties))
    return report


def _unweighted(stats: Round, weights: NDArray[np.float64]) -> Round:
    """The statistics round with each entry divided by its release weight (the cross sums by the study's
    ``cross_weight``): what every later step reads. The round's noise sds stay those of a Gram entry; a cross sum's
    is that over its weight."""
    return replace(stats, values={p: v / weights for p, v in stats.values.items()},
                   total=None if stats.total is None else stats.total / weights)


def _report(spec: DPEffectsSpec, parts: tuple[Component, ...], scores: Round, n_subjects: dict[str, int],
            stats: Round, feature_map: FeatureMap) -> dict[str, Any]:
    widths, weights = np.array([c.width for c in parts]), release_weights(parts)
    n = sum(n_subjects.values())

    def unscale(v: NDArray[np.float64]) -> NDArray[np.float64]:
        return v * widths / weights

    assert scores.total is not None
    effects = effects_from_sums(unscale(scores.total), unscaled_noise_sd(scores.total_noise_sd, parts), parts, n,
                                spec.estimators, spec.estimands, alpha=spec.alpha, replicate_step=spec.replicate_step)
    floor = {c.name: float(sd) for c, sd in zip(parts, unscaled_noise_sd(scores.total_noise_sd, parts), strict=True)}
    estimates = {}
    for e in effects:
        row = e.to_dict() | {"method": f"dp-{e.estimator}", "n": n}
        if e.estimator == "aipw" and e.estimand == "ate":
            row["dp_floor"] = floor["aipw_ate"] / n
        estimates[f"{e.estimator}-{e.estimand}"] = row
    per_party: dict[str, Any] = {}
    if scores.values:
        site_effects = {
            p: effects_from_sums(unscale(v), unscaled_noise_sd(scores.party_noise_sd, parts), parts, n_subjects[p],
                                 spec.estimators, spec.estimands, alpha=spec.alpha,
                                 replicate_step=spec.replicate_step)
            for p, v in scores.values.items()
        }
        per_party = {p: {f"{e.estimator}-{e.estimand}": e.to_dict() for e in es} for p, es in site_effects.items()}
        for k, e in enumerate(effects):
            pooled = inverse_variance_pool([es[k] for es in site_effects.values()], alpha=spec.alpha)
            if pooled is not None:
                estimates[f"{e.estimator}-{e.estimand} (inverse-variance pool of sites)"] = pooled.to_dict() | {
                    "method": f"dp-{e.estimator}-meta"}
    (rho_n, delta_n), (rho_s, delta_s) = spec.budgets
    rho, delta = rho_n * stats.attempts + rho_s * scores.attempts, delta_n * stats.attempts + delta_s * scores.attempts
    spend = {p: {"epsilon": zcdp_epsilon(rho, delta), "delta": delta, "rho": rho} for p in stats.parties}
    warnings = []
    if stats.attempts > 1 or scores.attempts > 1:
        warnings.append(f"secure aggregation: a party dropped out; rounds were restarted ({stats.attempts} "
                        f"statistics, {scores.attempts} scores attempts), each attempt charged again")
    warnings += [lost_warning(p, when, STATISTICS, rho_n, delta_n) for p, when in stats.lost.items()]
    unpinned = sorted(set(stats.unpinned) | set(scores.unpinned))
    if unpinned:
        warnings.append(f"secure aggregation: {', '.join(unpinned)} trust the coordinator's roster (peers = \"any\"): "
                        "their releases are protected only against an honest-but-curious coordinator")
    return {
        "estimand": "/".join(spec.estimands),
        "estimates": estimates,
        "per_party": per_party,
        "privacy": spend,
        "dp_effects": {
            "n_subjects": n_subjects, "nuisance": spec.nuisance, "n_folds": spec.n_folds,
            "secure_aggregation": spec.secure_aggregation, "secure_aggregation_unpinned": unpinned,
            "statistics_noise_sd": stats.total_noise_sd,
            "scores_noise_sd": {c.name: floor[c.name] for c in parts}, "design": feature_map.to_spec(),
            "trim": spec.trim, "nuisance_replicates": spec.nuisance_replicates, "replicate_step": spec.replicate_step,
        },
        "notes": [NOTE, SEED_NOTE.format(seed=spec.seed)],
        "warnings": warnings,
    } | ({"lost_parties": {p: {"lost_at": when, "during": STATISTICS} for p, when in stats.lost.items()}}
         if stats.lost else {})


def lost_warning(party: str, when: str, operation: str, rho: float, delta: float) -> str:
    """The report's line for a party dropped mid-study: who, when, what was and was not charged, what it excludes."""
    return (f"party {party} was lost during {operation} at {when} and dropped (on_missing_party = \"continue\"): "
            f"its {operation} release may have been charged to its ledger (rho {rho:.6g}, epsilon "
            f"{zcdp_epsilon(rho, delta):.4g}, delta {delta:g}) with nothing received (`collabcausal party budget` at "
            f"{party} shows it); nothing more was asked of it; the estimates exclude its subjects, and privacy lists "
            "the parties whose releases were received")


def _plain_round(grid: Grid, operation: str, parties: list[str], params: Any, sensitivity: float, rho: float, *,
                 length: int, value_bound: float, timeout: float | None, study: str, on_missing: str = "fail") -> Round:
    """Each party adds its own full noise; the analyst sees every party's release (and their sum).

    ``on_missing = "continue"``: a party that does not answer is dropped (:func:`answered`), not fatal.
    """
    requests = {p: Message(operation, params(p)) for p in parties}
    if on_missing == "continue":
        replies, lost = answered(grid, requests, timeout)
        parties = [p for p in parties if p in replies]
    else:
        replies, lost = grid.send_and_receive(requests, timeout=timeout), {}
    sigma = gaussian_zcdp_sigma(sensitivity, rho)
    values = {p: checked_values(p, operation, replies[p], sigma, length) for p in parties}
    total = np.sum([values[p] for p in parties], axis=0)
    return Round(parties, values, total, sigma * math.sqrt(len(parties)), sigma, lost=lost)


def answered(grid: Grid, requests: Mapping[str, Message],
             timeout: float | None) -> tuple[dict[str, Message], dict[str, str]]:
    """The replies of the parties that answered, and party -> when (UTC) each other one was lost.

    Raises :class:`StudyFailedError` when no party answered.
    """
    replies, lost = grid.send_each(requests, timeout=timeout)
    if not replies:
        operation = next(iter(requests.values())).operation
        raise StudyFailedError(f"every party was lost during {operation!r}", "restart the parties and the study")
    when = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    return replies, dict.fromkeys(sorted(lost), when)


def check_stated_sigma(party: str, operation: str, reply: Message, sigma: float) -> None:
    """Refuse a reply whose stated noise sd is not the one the analyst's own request implies."""
    stated = reply.params.get("sigma")
    if isinstance(stated, bool) or not isinstance(stated, (int, float)) or not math.isclose(stated, sigma,
                                                                                            rel_tol=1e-9):
        raise StudyFailedError(
            f"party {party!r} stated noise sd {stated!r} for {operation}, but the request implies {sigma:.6g}",
            "check that party's software version",
        )


def checked_values(party: str, operation: str, reply: Message, sigma: float, length: int) -> NDArray[np.float64]:
    """The reply's ``length`` finite values, once its stated noise sd is checked (:func:`check_stated_sigma`)."""
    check_stated_sigma(party, operation, reply, sigma)
    values = np.asarray(reply.arrays.get("values"), dtype=float).ravel()
    if values.size != length or not np.isfinite(values).all():
        raise StudyFailedError(f"party {party!r} sent not {length} finite values for {operation}", "check that party")
    return values


def _secure_round(grid: Grid, operation: str, parties: list[str], params: Any, sensitivity: float, rho: float, *,
                  length: int, value_bound: float, timeout: float | None, study: str) -> Round:
    """Masked shares, summed: the analyst sees only the total (:mod:`collabcausal.analyst.secure_sum`)."""
    result = secure_sum(grid, operation, parties, params, sensitivity, rho, length=length,
                        value_bound=value_bound, study=study, timeout=timeout)
    return Round(result.parties, {}, result.total, result.noise_sd, 0.0, result.attempts, result.unpinned)
