"""Empirical DP audit of the two ``dp_effects`` releases through :meth:`Party.handle` (issue 21, item 5).

The auditor is a hostile coordinator that picks two neighbouring tables (same n, one record
substituted) and asks real :class:`~collabcausal.party.Party` objects (their ledgers, the OpenDP
sampler a party draws from) for the same release many times; the likelihood-ratio test of
:mod:`collabcausal.attacks.dp_audit` then bounds the epsilon it sees from below.

Worst-case neighbours (docs/dp-effects-audit.md):

* statistics (release 1, :mod:`collabcausal.estimators.dp.effects.statistics`): the target at the all-ones
  corner of the covariate box (``||d||^2 = B^2 = 1 + m``), the cross sums weighted by ``w``
  (:func:`~collabcausal.estimators.dp.effects.release.released_statistics`). Up to ``w = sqrt(2 (B^2 + 1))`` it
  moves from arm 0 to arm 1 with its outcome at the top of the range (``|u| = 1/2``): the released rows differ
  by ``sqrt(B^4 + B^2 + w^2 B^2 / 2)``; above, its outcome moves from one end of the range to the other in
  one arm: only the cross sums move, by ``w B``. Both stay within the proved bound
  ``Delta = sqrt(B^4 + B^2 + w^2 B^2)`` (:func:`statistics_neighbours`);
* scores (release 2, :mod:`collabcausal.estimators.dp.effects.scores`): the nuisance models are a
  prior release, so both neighbours are scored with the same (hostile) models; the target is the
  pair of candidate records, over a grid of the covariate box, both arms and both outcome
  extremes, whose scaled score vectors are furthest apart (:func:`scores_neighbours`).

:func:`miss_probability` is the exact chance that the audit of a release calibrated for a wrong
(too small) sensitivity fails to exceed the claim: a test's false-failure rate.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray
from scipy.stats import binom, norm

from collabcausal.attacks.dp_audit import ReleaseAudit, projection_errors, release_audit
from collabcausal.attacks.privacy_audit import clopper_pearson
from collabcausal.estimators.dp.effects.design import FeatureMap
from collabcausal.estimators.dp.effects.nuisances import NuisanceModel
from collabcausal.estimators.dp.effects.projection import Projection, party_projection_sums, projection_layout
from collabcausal.estimators.dp.effects.release import party_score_sums, released_statistics, scaled_sums
from collabcausal.estimators.dp.effects.scores import (
    Component,
    components,
    release_weights,
    replicate_components,
    replicate_differences,
    subject_scores,
)
from collabcausal.estimators.dp.zcdp import zcdp_epsilon
from collabcausal.ledger import PrivacyLedger
from collabcausal.messages import Message
from collabcausal.party import Party, PartyTable
from collabcausal.party.dp_effects import STATISTICS


def background_frame(feature_map: FeatureMap, columns: Sequence[str], n: int, seed: int) -> pd.DataFrame:
    """``n`` seeded subjects inside the box, arms alternating (so both reach ``min_subjects``)."""
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame({c: rng.uniform(lo, hi, n) for c, (lo, hi) in zip(columns, feature_map.bounds, strict=True)})
    return frame.assign(t=np.arange(n) % 2, y=rng.uniform(*feature_map.outcome_range, n))


def with_target(background: pd.DataFrame, record: dict[str, float]) -> pd.DataFrame:
    """``background`` plus the target record as its last row."""
    return pd.concat([background, pd.DataFrame([record])], ignore_index=True)


def statistics_neighbours(
    feature_map: FeatureMap, columns: Sequence[str], background: pd.DataFrame, cross_weight: float = 1.0,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The pair furthest apart for the release's ``cross_weight`` (module docstring): the target at the all-ones
    corner with the top outcome in arm 0 versus arm 1, or, above ``w = sqrt(2 (B^2 + 1))``, in arm 1 with the
    outcome at either end of its range."""
    corner = {c: hi for c, (_, hi) in zip(columns, feature_map.bounds, strict=True)}
    low, high = feature_map.outcome_range
    swap = float(cross_weight) ** 2 > 2.0 * (feature_map.squared_norm_bound + 1.0)
    first = corner | ({"t": 1, "y": low} if swap else {"t": 0, "y": high})
    return with_target(background, first), with_target(background, corner | {"t": 1, "y": high})


def scores_neighbours(
    feature_map: FeatureMap, columns: Sequence[str], background: pd.DataFrame, site: int,
    model: NuisanceModel, parts: Sequence[Component], trim: float, grid: int = 3,
    replicates: Sequence[NuisanceModel] = (), projection: Projection | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The two candidate records whose scaled scores under ``model`` are furthest apart (module docstring).

    Candidates: every point of a ``grid``-per-axis lattice of the covariate box, either arm, the
    outcome at either end of its range. With noise ``replicates`` (one model each) the scaled vector
    also holds each candidate's replicate values, as the release does; with a ``projection``
    (modifiers, subgroups: docs/dp-cate-projection.md) its added sums too, and with its ``residual_clip``
    (whose scores take the outcome unclipped) outcomes ten widths beyond either end as well.
    """
    axes = [np.linspace(lo, hi, grid) for lo, hi in feature_map.bounds]
    low, high = feature_map.outcome_range
    far = 10.0 * feature_map.outcome_width
    outcomes = (low, high) if projection is None or projection.residual_clip is None else (
        low - far, low, high, high + far)
    records = [dict(zip(columns, point, strict=True)) | {"t": t, "y": y}
               for point in itertools.product(*axes) for t in (0, 1) for y in outcomes]
    X = np.array([[r[c] for c in columns] for r in records])
    D = feature_map.design(X, site)
    t = np.array([r["t"] for r in records], dtype=np.int8)
    y = feature_map.centred_outcome([r["y"] for r in records])

    def score(m: NuisanceModel) -> NDArray[np.float64]:
        return subject_scores(parts, t, y, m.propensity(D, trim), m.outcome(D, 0, feature_map),
                              m.outcome(D, 1, feature_map))

    at_model = score(model)
    copies = replicate_components(parts, len(replicates))
    columns_of = [at_model] + [
        replicate_differences(parts, [c for c in copies if c.copy == b], at_model, score(m))
        for b, m in enumerate(replicates)
    ]
    every = (*parts, *copies)  # copy-major, as columns_of
    if projection:  # each candidate's added sums: the party's own function on a one-row table
        layout = projection_layout(projection, feature_map.outcome_width, trim, len(replicates))
        columns_of.append(np.stack([party_projection_sums(
            X[k : k + 1], t[k : k + 1], [records[k]["y"]], feature_map, site, np.zeros(1, np.int64), [model], layout,
            trim, projection, [[m] for m in replicates]) for k in range(len(records))]))
        every = (*every, *layout.parts)
    scaled = np.hstack(columns_of) * release_weights(every) / np.array([c.width for c in every])
    gaps = np.linalg.norm(scaled[:, None, :] - scaled[None, :, :], axis=2)
    i, j = np.unravel_index(int(np.argmax(gaps)), gaps.shape)
    return with_target(background, records[i]), with_target(background, records[j])


def audit_table(frame: pd.DataFrame, columns: Sequence[str]) -> PartyTable:
    """The party table of a neighbour (``t`` and ``y`` its labels)."""
    return PartyTable.from_frame(frame, list(columns), treatment="t", outcome="y")


def exact_values(table: PartyTable, request: Message) -> NDArray[np.float64]:
    """What a party holding ``table`` noises for a single-fold ``request`` (the operation's exact vector)."""
    p = request.params
    feature_map = FeatureMap.from_spec(p["design"])
    X = np.column_stack([table.column(c) for c in p["columns"]])
    folds = np.zeros(table.n_subjects, dtype=np.int64)
    args = (X, table.treatment, table.outcome, feature_map, p["site"], folds)
    if request.operation == STATISTICS:
        return released_statistics(*args, 1, p.get("cross_weight", 1.0))
    base = components(p["estimators"], p["estimands"], feature_map.outcome_width, p["trim"])
    replicates = [[NuisanceModel.from_spec(m, feature_map.dim) for m in r] for r in p.get("replicates", [])]
    parts = base + replicate_components(base, len(replicates))
    models = [NuisanceModel.from_spec(m, feature_map.dim) for m in p["models"]]
    values = scaled_sums(party_score_sums(*args, models, parts, p["trim"], replicates), parts)
    if "projection" not in p:
        return values
    projection = Projection.from_spec(p["projection"], feature_map)
    layout = projection_layout(projection, feature_map.outcome_width, p["trim"], len(replicates))
    added = party_projection_sums(*args, models, layout, p["trim"], projection, replicates)
    return np.concatenate([values, scaled_sums(added, layout.parts)])


def audit_through_parties(
    frames: tuple[pd.DataFrame, pd.DataFrame], columns: Sequence[str], request: Message, n_releases: int,
    ledger_dir: Path, *, confidence: float = 1.0 - 1e-6,
) -> tuple[ReleaseAudit, dict[str, Any]]:
    """Ask a party holding each neighbour for ``request`` ``n_releases`` times; test every reply.

    The claim audited is the party's own: the ``rho`` and ``delta`` its reply reports, as the
    epsilon OpenDP converts them to (the claimed ``mu`` depends on nothing else, so a wrong
    sensitivity shows as ``mu_lower > mu``).
    Each party's ledger (budget 1e12, delta 0.5) is a file in ``ledger_dir``. Returns the audit and
    the first reply's params.
    """
    tables = [audit_table(f, columns) for f in frames]
    first, second = (exact_values(t, request) for t in tables)
    parties = [Party(f"neighbour{k}", t, ledger=PrivacyLedger(Path(ledger_dir) / f"neighbour{k}.sqlite",
                                                              epsilon=1e12, delta=0.5, dataset="audit"))
               for k, t in enumerate(tables)]
    errors, params = [], {}
    for party, says_second in zip(parties, (True, False), strict=True):
        replies = [party.handle(request) for _ in range(int(n_releases))]
        params = replies[0].params
        errors.append(projection_errors(np.stack([r.arrays["values"] for r in replies]), first, second, says_second))
        if len(party.ledger.history()) != n_releases:
            raise AssertionError("a release was not charged")
    sensitivity = float(params["sensitivity"])
    return release_audit(errors[0], errors[1], int(n_releases), float(np.linalg.norm(second - first)), sensitivity,
                         zcdp_epsilon(float(params["rho"]), float(params["delta"])), float(params["delta"]),
                         confidence), params


def miss_probability(n_releases: int, distance: float, sigma: float, claimed_mu: float,
                     confidence: float = 1.0 - 1e-6) -> float:
    """Exact probability that the audit's ``mu_lower`` stays at or below ``claimed_mu``.

    For releases that really carry noise ``sigma`` on neighbours ``distance`` apart, each of the
    test's errors (:func:`~collabcausal.attacks.dp_audit.projection_errors`) has probability
    ``Phi(-distance / (2 sigma))``, independently, so ``FP`` and ``FN`` are two independent binomials.
    With ``sigma`` too small for the claim (a sensitivity bug) this is the chance the bug is missed.
    """
    n = int(n_releases)
    alpha = (1.0 - confidence) / 2.0
    upper = np.array([clopper_pearson(k, n, alpha)[1] for k in range(n + 1)])
    pmf = binom.pmf(np.arange(n + 1), n, norm.cdf(-distance / (2.0 * sigma)))
    # mu_lower > claimed  <=>  FNR+(k2) < Phi(isf(FPR+(k1)) - claimed); FNR+ increases with k2
    largest = np.searchsorted(upper, norm.cdf(norm.isf(upper) - claimed_mu), side="left") - 1
    caught = np.where(largest >= 0, np.cumsum(pmf)[np.maximum(largest, 0)], 0.0)
    return float(max(0.0, 1.0 - np.dot(pmf, caught)))


MISS_LEVEL = 1e-4
"""A planted bug that the audit misses with a probability below this counts as a failure of the audit."""


def audit_verdict(exceeded: bool, planted: bool, n_releases: int, distance: float, sigma: float, claimed_mu: float
                  ) -> tuple[float, str, bool]:
    """One audit row's verdict: ``(miss probability, verdict, failed)``.

    ``exceeded``: the audit's lower bound on epsilon is above the claim. A correct release fails when it
    exceeds its claim ("EXCEEDS CLAIM"); a release with a planted bug whose releases carry noise ``sigma`` is
    "caught" when it exceeds, and fails ("MISSED") when it does not although :func:`miss_probability` is below
    :data:`MISS_LEVEL` ("not seen (no power)" otherwise).
    """
    if not planted:
        return float("nan"), "EXCEEDS CLAIM" if exceeded else "ok", exceeded
    miss = miss_probability(n_releases, distance, sigma, claimed_mu)
    if exceeded:
        return miss, "caught", False
    return miss, "MISSED" if miss < MISS_LEVEL else "not seen (no power)", miss < MISS_LEVEL
