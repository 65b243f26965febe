"""Three column groups: the encrypted rounds with a third party equal their plaintext twin on the same inputs and
noise (statistics: products of the label holder's arm relayed from one party to the next; scores: a further party's
parts under the key owner's public key)."""

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
    group_design,
    label_vectors,
    part_limits,
    scaled_score_terms,
    score_scales,
    vertical_components,
    weight_polynomial,
)
from collabcausal.vertical import load_public_context
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
)

N = 2500
GROUPS = ColumnGroups(((0, 1), (2, 3), (4,)))
BOUNDS = ((-3.0, 3.0),) * 4 + ((0.0, 1.0),)


@pytest.fixture(scope="module")
def study():
    rng = np.random.default_rng(17)
    fmap = FeatureMap(BOUNDS, (0.0, 1.0), 1)
    X = np.column_stack([rng.standard_normal((N, 4)), rng.integers(0, 2, N)])
    T = (rng.random(N) < 1 / (1 + np.exp(-(X @ np.array([0.5, -0.4, 0.3, 0.4, 0.5]) - 0.2)))).astype(float)
    Y = (rng.random(N) < 1 / (1 + np.exp(-(X @ np.array([0.3, 0.2, -0.2, 0.3, 0.1]) + 0.5 * T)))).astype(float)
    designs = [group_design(fmap, X[:, list(g)], 0, GROUPS, i) for i, g in enumerate(GROUPS.groups)]
    return fmap, designs, T, fmap.centred_outcome(Y)


def test_statistics_with_a_third_party_equal_the_joined_rows(study, owner2) -> None:
    """L's factors go to P1 and P2; P1 multiplies L's arm by its columns and passes the products to P2; each evaluator
    totals its entries with its share and L opens both: every cross entry is the joined rows' statistic plus the two
    shares, to the CKKS error of n subjects and the grid."""
    _fmap, designs, T, y = study
    exact = fold_statistics(np.sum(designs, axis=0), T, y, 1.0)
    vectors = label_vectors(designs[0], T, np.clip(y, -0.5, 0.5), GROUPS, 1, 0)
    context = load_public_context(owner2.public_context())
    relayed = {k: RelayedColumn(context, c.to_bytes(), N) for k, c in encrypt_label_vectors(owner2, vectors).items()}
    own = {g: GROUPS.design_columns(g, 1) for g in (1, 2)}
    products = arm_products(relayed["arm"], designs[1], own[1])
    columns_p2 = relayed | {(ARM_PRODUCT, c): RelayedColumn(context, chunks, N)
                            for c, chunks in zip(own[1], products, strict=True)}
    rng = np.random.default_rng(3)
    grid = 1e-3
    for g, columns in ((1, relayed), (2, columns_p2)):
        entries = packed_entries([e for e in cross_entries(GROUPS, 1) if e.evaluator == g])
        assert entries
        noise_p, noise_l = rng.normal(0, 30.0, (2, len(entries)))
        totals = cross_summands(columns, designs[g], entries, own[g]).packed(context, noise_p, 30.0)
        opened = open_totals(owner2, totals, noise_l, grid)
        twin = exact[[e.index for e in entries]] + noise_p + noise_l
        assert np.max(np.abs(opened - twin)) <= 2 * N * owner2.parameters.error_bound + grid


def test_scores_with_a_further_partys_parts_equal_the_twin(study, owner7) -> None:
    """P1 (the key owner) encrypts its parts; P2 encrypts its own under P1's public key; L adds both and its own and
    evaluates the score program: the totals open to the twin's sums of all three parties' parts."""
    fmap, designs, T, y = study
    rng = np.random.default_rng(19)
    dim = fmap.dim
    model = NuisanceModel(0.3 * rng.standard_normal(dim), (0.2 * rng.standard_normal(dim),
                                                           0.2 * rng.standard_normal(dim)))
    full = np.sum(designs, axis=0)
    limits = part_limits(model, full.T @ full, GROUPS, 1, 1.0)
    domain, unit = score_scales(model, limits, [], 1, 1.0)
    poly = weight_polynomial(domain, 0.1)
    parts = vertical_components(["aipw"], ["ate"], model, limits, [], poly, 1, 1.0)
    scales = np.array([domain, unit, unit])[:, None]
    inputs = [list(np.asarray(clipped_parts(model, designs[g], g, GROUPS, limits, 1, 1.0)) / scales) for g in range(3)]
    context = load_public_context(owner7.public_context())
    mine = [RelayedColumn(context, c.to_bytes(), N) for c in encrypt_score_inputs(owner7, inputs[1])]
    further = [RelayedColumn(context, c.to_bytes(), N) for c in encrypt_score_inputs(context, inputs[2])]
    noise_l, noise_p = rng.normal(0, 5.0, (2, len(parts)))
    summed = score_summands(mine, inputs[0], T, y, poly, parts, unit, [further])
    opened = open_totals(owner7, summed.packed(context, noise_l, 5.0), noise_p, 1e-2)
    at_model = [a + b + c for a, b, c in zip(*inputs, strict=True)]
    twin = np.array([t.sum() for t in scaled_score_terms(T, y, at_model, [], poly, parts, unit)]) + noise_l + noise_p
    assert np.max(np.abs(opened - twin)) <= N * owner7.parameters.error_bound + 1e-2
    with pytest.raises(ProtocolError, match="further parties"):
        score_summands(mine, inputs[0], T, y, poly, parts, unit, [further[:2]])
