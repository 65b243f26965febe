"""The encrypted rounds of vertical dp_effects equal their plaintext twin on the same inputs and noise."""

from __future__ import annotations

import numpy as np
import pytest

from collabcausal.errors import ProtocolError
from collabcausal.estimators.dp.effects.design import FeatureMap
from collabcausal.estimators.dp.effects.nuisances import NuisanceModel
from collabcausal.estimators.dp.effects.statistics import fold_statistics
from collabcausal.estimators.dp.effects.vertical import (
    ColumnGroups,
    clipped_parts,
    cross_entries,
    cross_term,
    group_design,
    label_vectors,
    model_change,
    part_limits,
    scaled_score_terms,
    score_scales,
    vertical_components,
    weight_polynomial,
)
from collabcausal.vertical import load_public_context
from collabcausal.vertical.column import EncryptedColumn, RelayedColumn
from collabcausal.vertical.dp_effects_rounds import (
    cross_summands,
    cross_totals,
    encrypt_label_vectors,
    encrypt_score_inputs,
    open_totals,
    packed_entries,
    score_summands,
)

N = 3000
GROUPS = ColumnGroups(((0, 1, 2), (3, 4)))
BOUNDS = ((-3.0, 3.0),) * 3 + ((-2.0, 2.0), (0.0, 1.0))


@pytest.fixture(scope="module")
def study():
    rng = np.random.default_rng(7)
    fmap = FeatureMap(BOUNDS, (0.0, 1.0), 1)
    X = np.column_stack([rng.standard_normal((N, 4)), rng.integers(0, 2, N)])
    eta = X @ np.array([0.5, -0.4, 0.3, 0.4, 0.5]) - 0.2
    T = (rng.random(N) < 1 / (1 + np.exp(-eta))).astype(float)
    Y = (rng.random(N) < 1 / (1 + np.exp(-(X @ np.array([0.3, 0.2, -0.2, 0.3, 0.1]) + 0.5 * T)))).astype(float)
    designs = [group_design(fmap, X[:, list(g)], 0, GROUPS, i) for i, g in enumerate(GROUPS.groups)]
    return fmap, designs, T, fmap.centred_outcome(Y)


def test_statistics_round_equals_the_twin(study, owner1) -> None:
    """L encrypts its factors, P totals each cross entry with its noise share (all packed into one ciphertext), L
    opens with its own: each entry is the exact joined statistic plus both shares, to the CKKS error of n subjects
    and the grid."""
    _fmap, (label, other), T, y = study
    exact = fold_statistics(label + other, T, y, 1.0)
    entries = packed_entries(cross_entries(GROUPS, 1))
    vectors = label_vectors(label, T, np.clip(y, -0.5, 0.5), GROUPS, 1, 0)
    evaluator = load_public_context(owner1.public_context())
    relayed = {k: RelayedColumn(evaluator, c.to_bytes(), N) for k, c in encrypt_label_vectors(owner1, vectors).items()}
    rng = np.random.default_rng(8)
    noise_p, noise_l = rng.normal(0, 30.0, len(entries)), rng.normal(0, 30.0, len(entries))
    grid = 1e-3
    totals = cross_totals(relayed, other, entries, noise_p, flood_sd=30.0)
    assert len(totals) == 1
    opened = open_totals(owner1, totals, noise_l, grid)
    twin = np.array([cross_term(vectors, other, e).sum() for e in entries]) + noise_p + noise_l
    np.testing.assert_allclose(twin, exact[[e.index for e in entries]] + noise_p + noise_l, atol=1e-8)
    tolerance = N * owner1.parameters.error_bound + grid
    assert np.max(np.abs(opened - twin)) <= tolerance
    assert np.max(np.abs(opened - twin) / np.maximum(np.abs(twin), 1.0)) < 1e-4


def test_statistics_summed_over_batches_equal_the_twin(study, owner1) -> None:
    """The evaluator's summands of two batches of subjects (the second short, its padding corrected), added under
    encryption, open to the same totals as one batch of every subject."""
    _fmap, (label, other), T, y = study
    entries = packed_entries(cross_entries(GROUPS, 1))
    vectors = label_vectors(label, T, np.clip(y, -0.5, 0.5), GROUPS, 1, 0)
    evaluator = load_public_context(owner1.public_context())
    parts = []
    for rows in (slice(0, 2000), slice(2000, N)):
        sent = encrypt_label_vectors(owner1, {k: v[rows] for k, v in vectors.items()})
        relayed = {k: RelayedColumn(evaluator, c.to_bytes(), rows.stop - rows.start) for k, c in sent.items()}
        parts.append(cross_summands(relayed, other[rows], entries))
    noise = np.random.default_rng(9).normal(0, 30.0, (2, len(entries)))
    totals = parts[0].plus(parts[1], evaluator).packed(evaluator, noise[0], 30.0)
    opened = open_totals(owner1, totals, noise[1], 1e-3)
    twin = np.array([cross_term(vectors, other, e).sum() for e in entries]) + noise.sum(axis=0)
    assert np.max(np.abs(opened - twin)) <= N * owner1.parameters.error_bound + 1e-3


def test_scores_round_equals_the_twin(study, owner7) -> None:
    """P encrypts its clipped parts (model and one replicate's change), L evaluates the score program under
    encryption and totals each released sum with its share, P opens with its own."""
    fmap, designs, T, y = study
    rng = np.random.default_rng(9)
    dim = fmap.dim
    model = NuisanceModel(0.3 * rng.standard_normal(dim), (0.2 * rng.standard_normal(dim),
                                                           0.2 * rng.standard_normal(dim)))
    copy = NuisanceModel(model.propensity_coef + 0.02 * rng.standard_normal(dim),
                         tuple(c + 0.01 * rng.standard_normal(dim) for c in model.outcome_coef))
    full = designs[0] + designs[1]
    moments = full.T @ full
    limits = part_limits(model, moments, GROUPS, 1, 1.0)
    change = model_change(model, copy)
    changes = [(change, part_limits(change, moments, GROUPS, 1, 1.0))]
    domain, unit = score_scales(model, limits, changes, 1, 1.0)
    poly = weight_polynomial(domain, 0.1)
    parts = vertical_components(["aipw"], ["ate"], model, limits, changes, poly, 1, 1.0)
    scales = np.array([domain, unit, unit])[:, None]

    def inputs(group: int) -> list[np.ndarray]:
        pieces = [clipped_parts(model, designs[group], group, GROUPS, limits, 1, 1.0),
                  clipped_parts(change, designs[group], group, GROUPS, changes[0][1], 1, 1.0)]
        return [v for piece in pieces for v in (np.asarray(piece) / scales)]

    plain, theirs = inputs(0), inputs(1)
    evaluator = load_public_context(owner7.public_context())
    encrypted = [EncryptedColumn.from_bytes(evaluator, c.to_bytes(), N) for c in encrypt_score_inputs(owner7, theirs)]
    noise_l, noise_p = rng.normal(0, 5.0, len(parts)), rng.normal(0, 5.0, len(parts))
    grid = 1e-2
    totals = score_summands(encrypted, plain, T, y, poly, parts, unit).packed(evaluator, noise_l, 5.0)
    opened = open_totals(owner7, totals, noise_p, grid)
    summed = [a + b for a, b in zip(theirs, plain, strict=True)]
    at_copy = [a + d for a, d in zip(summed[:3], summed[3:], strict=True)]
    twin = np.array([t.sum() for t in scaled_score_terms(T, y, summed[:3], [at_copy], poly, parts, unit)])
    twin += noise_l + noise_p
    assert np.max(np.abs(opened - twin)) <= N * owner7.parameters.error_bound + grid


def test_rounds_refuse_mismatched_noise_and_inputs(study, owner1) -> None:
    _fmap, (_label, other), T, y = study
    entries = cross_entries(GROUPS, 1)
    with pytest.raises(ProtocolError, match="noise shares"):
        cross_totals({}, other, entries, np.zeros(2), flood_sd=1.0)
    with pytest.raises(ProtocolError, match="not in the packed order"):
        cross_totals({}, other, entries, np.ones(len(entries)), flood_sd=1.0)
    with pytest.raises(ProtocolError, match="score inputs"):
        score_summands([], [np.zeros(N)], T, y, weight_polynomial(2.0, 0.1), [], 1.0)
