"""Effect modification in dp_effects: the added sums, their sensitivity, the projection and subgroup effects.

Deterministic (seeded data, no DP noise): the sums are exact, the estimates post-processing.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from collabcausal.errors import InputError
from collabcausal.estimators.dp.effects.design import FeatureMap
from collabcausal.estimators.dp.effects.nuisances import NuisanceModel
from collabcausal.estimators.dp.effects.projection import (
    MAX_MODIFIERS,
    SPEC_KEYS,
    ClipLosses,
    Partition,
    Projection,
    check_projection,
    model_clip_losses,
    party_projection_sums,
    projection_layout,
    projection_sensitivity_squared,
    score_bound,
    subject_projection_values,
)
from collabcausal.estimators.dp.effects.projection_analysis import (
    best_linear_projection,
    effect_projection,
    modifier_gram,
    pooled_gram,
    subgroup_effects,
)
from collabcausal.estimators.dp.effects.release import party_score_sums, party_statistics
from collabcausal.estimators.dp.effects.scores import REPLICATE_SHARE, aipw_ate_score, components, subject_scores

FM = FeatureMap(((0.0, 10.0), (-1.0, 1.0), (0.0, 1.0)), (0.0, 5.0), n_sites=2)
PROJECTION = Projection((0, 1), (Partition(2, (0.0, 0.5, 1.0)), Partition(0, (0.0, 2.0, 6.0, 10.0))))
TRIM = 0.1
A = FM.outcome_width / TRIM
MODEL = NuisanceModel(np.array([0.0, 0.2, 0.3, -0.4, 0.2]),
                      (np.array([0.0, 0.1, 0.1, 0.0, 0.1]), np.array([0.1, 0.2, 0.0, -0.2, 0.1])))


def _data(n: int, seed: int):
    rng = np.random.default_rng(seed)
    X = np.column_stack([rng.uniform(0, 10, n), rng.uniform(-1, 1, n), rng.integers(0, 2, n)])
    t = rng.integers(0, 2, n).astype(np.int8)
    y = np.clip(2.5 + 0.3 * X[:, 1] + t * (0.5 + 0.1 * X[:, 0]) + rng.normal(0, 1, n), 0, 5)
    return X, t, y


def _phi_of(model: NuisanceModel, X, t, y, site=1):
    D = FM.design(X, site)
    ate = components(["aipw"], ["ate"], FM.outcome_width, TRIM)[:1]
    return subject_scores(ate, t, FM.centred_outcome(y), model.propensity(D, TRIM), model.outcome(D, 0, FM),
                          model.outcome(D, 1, FM))[:, 0], D


def _phi(X, t, y, site=1):
    D = FM.design(X, site)
    ate = components(["aipw"], ["ate"], FM.outcome_width, TRIM)[:1]
    return subject_scores(ate, t, FM.centred_outcome(y), MODEL.propensity(D, TRIM), MODEL.outcome(D, 0, FM),
                          MODEL.outcome(D, 1, FM))[:, 0], D


# the analyst's shaping (projection_budget): weights sharing the budget of three unit point sums, a clip per
# modifier, and the Gram entries again
SHAPED = {"weights": (0.5, 1.5, 0.7), "modifier_clips": (0.4, 1.0), "gram_weight": 0.25}
# a centre: the blp sums add m_q (phi - m^T gamma), clipped at 0.3 widths
CENTRED = SHAPED | {"centre": 0.3, "pilot": (1.0, -2.0, 0.5), "replicate_pilots": ()}
# residuals clipped at 0.2 widths (rho = 1): the score of the unclipped outcome within R + rho / t = 15
RESIDUAL = {"residual_clip": 0.2}


@pytest.mark.parametrize(("clip", "shaping"), [(None, {}), (2.0, {}), (2.0, SHAPED), (2.0, CENTRED), (None, CENTRED),
                                               (None, RESIDUAL), (2.0, RESIDUAL | SHAPED), (None, RESIDUAL | CENTRED)])
def test_the_added_sums_never_move_further_than_the_derived_sensitivity(clip, shaping):
    # every substitution between extreme subjects (score at -A, 0, A, A the score's bound; modifiers at the box's
    # corners and centre; every bin, and outside the bins): the scaled vector moves by at most
    # sqrt(projection_sensitivity_squared), with the projection's own clip too (values clipped to [-clip R, clip R]
    # before scaling), and with the analyst's weights, modifier clips and Gram entries, with a centre (m^T gamma of
    # each corner subtracted), and with clipped residuals (A = R + rho / t)
    projection = Projection(PROJECTION.modifiers, PROJECTION.partitions, clip, **shaping)
    layout = projection_layout(projection, FM.outcome_width, TRIM, 0)
    parts = [c for c in layout.parts if c.of is None]
    scale = np.array([c.weight / c.width for c in parts])
    rows = []
    bound = score_bound(projection, FM.outcome_width, TRIM)
    for phi, z0, z1, b0, b1 in itertools.product((-bound, 0.0, bound), (-1.0, 0.0, 1.0), (-1.0, 1.0), (-1, 0, 1),
                                                 (-1, 0, 2)):
        rows.append(subject_projection_values(parts, np.array([phi]), np.array([[z0, z1]]), np.array([[b0, b1]]),
                                              projection.pilot)[0])
    scaled = np.array(rows) * scale
    worst = max(np.linalg.norm(a - b) for a, b in itertools.combinations(scaled, 2))
    bound = math.sqrt(projection_sensitivity_squared(layout))
    assert worst <= bound + 1e-12
    assert worst >= 0.8 * bound
    # the disjoint-bin rule is needed: a count moving bins changes two counts (sqrt(2) w, not w)
    counts = [j for j, c in enumerate(parts) if c.name.startswith("cell_0_") and c.name.endswith("_n")]
    move = scaled[:, counts]
    assert max(np.linalg.norm(a - b) for a, b in itertools.combinations(move, 2)) == pytest.approx(
        math.sqrt(2) * parts[counts[0]].weight)


def test_the_projection_of_exact_sums_is_least_squares_of_the_scores_on_the_modifiers():
    X, t, y = _data(3000, 1)
    folds = np.zeros(len(t), dtype=np.int64)
    layout = projection_layout(PROJECTION, FM.outcome_width, TRIM, 0)
    added = party_projection_sums(X, t, y, FM, 1, folds, [MODEL], layout, TRIM, PROJECTION)
    base_parts = components(["aipw"], ["ate"], FM.outcome_width, TRIM)
    base = party_score_sums(X, t, y, FM, 1, folds, [MODEL], base_parts, TRIM)
    sums = {c.name: v for c, v in zip((*base_parts, *layout.parts), np.concatenate([base, added]), strict=True)}
    zero = dict.fromkeys(sums, 0.0)
    stats = party_statistics(X, t, y, FM, 1, folds, 1)
    gram, gram_sd = modifier_gram(stats, FM, PROJECTION, len(t), 0.0)
    phi, D = _phi(X, t, y)
    m = np.column_stack([np.ones(len(t)), D[:, 2:4]])
    np.testing.assert_allclose(gram, m.T @ m, rtol=1e-10)
    coefficients = best_linear_projection(sums, zero, gram, gram_sd, ["a", "b"], [5.0, 1.0])
    ols = np.linalg.lstsq(m, phi, rcond=None)[0]
    np.testing.assert_allclose([c.estimate for c in coefficients], ols, rtol=1e-9, atol=1e-12)
    Minv = np.linalg.inv(m.T @ m)
    hc0 = Minv @ (m.T * phi**2) @ m @ Minv  # the uncentred meat, as released
    np.testing.assert_allclose([c.se**2 for c in coefficients], np.diag(hc0), rtol=1e-9)
    assert coefficients[1].per_unit == pytest.approx(ols[1] / 5.0)
    effects = subgroup_effects(sums, zero, PROJECTION, [["x", "y"], ["p", "q", "r"]])
    for effect, inside in zip(effects, [X[:, 2] < 0.5, X[:, 2] >= 0.5, X[:, 0] < 2, (X[:, 0] >= 2) & (X[:, 0] < 6),
                                        X[:, 0] >= 6], strict=True):
        assert effect.estimate == pytest.approx(phi[inside].mean(), rel=1e-9)
        assert effect.se**2 == pytest.approx(phi[inside].var() / inside.sum(), rel=1e-9)


def test_with_a_clip_the_projection_uses_the_clipped_intercept_row_and_clipped_modifier_sums():
    X, t, y = _data(3000, 1)
    folds = np.zeros(len(t), dtype=np.int64)
    projection = Projection(PROJECTION.modifiers, (), clip=1.0)
    layout = projection_layout(projection, FM.outcome_width, TRIM, 0)
    added = party_projection_sums(X, t, y, FM, 1, folds, [MODEL], layout, TRIM, projection)
    base_parts = components(["aipw"], ["ate"], FM.outcome_width, TRIM)
    base = party_score_sums(X, t, y, FM, 1, folds, [MODEL], base_parts, TRIM)
    sums = {c.name: v for c, v in zip((*base_parts, *layout.parts), np.concatenate([base, added]), strict=True)}
    stats = party_statistics(X, t, y, FM, 1, folds, 1)
    gram, gram_sd = modifier_gram(stats, FM, projection, len(t), 0.0)
    phi, D = _phi(X, t, y)
    m = np.column_stack([np.ones(len(t)), D[:, 2:4]])
    a = FM.outcome_width
    assert np.abs(phi).max() > a  # the clip binds on this data
    S = np.clip(m * phi[:, None], -a, a).sum(axis=0)
    coefficients = best_linear_projection(sums, dict.fromkeys(sums, 0.0), gram, gram_sd, ["a", "b"], [5.0, 1.0])
    Minv = np.linalg.inv(m.T @ m)
    np.testing.assert_allclose([c.estimate for c in coefficients], Minv @ S, rtol=1e-9, atol=1e-12)
    released = np.clip(m * phi[:, None], -a, a)
    Q = released.T @ released  # the meat of the values the point sums add, clipped as they are
    np.testing.assert_allclose([c.se**2 for c in coefficients], np.diag(Minv @ Q @ Minv), rtol=1e-9)


def test_bonferroni_widens_each_subgroup_interval_to_the_family_level():
    X, t, y = _data(2000, 2)
    phi, _ = _phi(X, t, y)
    sums, zero = {}, {}
    for g, part in enumerate(PROJECTION.partitions):
        column = X[:, part.column]
        for c in range(part.n_bins):
            inside = part.bin_of(column) == c
            sums |= {f"cell_{g}_{c}": phi[inside].sum(), f"cell_{g}_{c}_n": float(inside.sum()),
                     f"cell_{g}_{c}_sq": (phi[inside] ** 2).sum()}
    zero = dict.fromkeys(sums, 0.0)
    labels = [["x", "y"], ["p", "q", "r"]]
    plain = subgroup_effects(sums, zero, PROJECTION, labels)
    joint = subgroup_effects(sums, zero, PROJECTION, labels, simultaneous="bonferroni")
    from scipy.stats import norm

    for p, j in zip(plain, joint, strict=True):
        assert (j.ci_high - j.estimate) / (p.ci_high - p.estimate) == pytest.approx(norm.ppf(1 - 0.05 / 10) /
                                                                                 norm.ppf(0.975))
    with pytest.raises(InputError, match="simultaneous"):
        subgroup_effects(sums, zero, PROJECTION, labels, simultaneous="max")


@pytest.mark.parametrize(("projection", "match"), [
    (Projection((3,)), "not distinct covariates"),
    (Projection((0, 0)), "not distinct covariates"),
    (Projection(tuple(range(3)) * 3), "not distinct"),
    (Projection((), (Partition(0, (0.0, 5.0, 5.0)),)), "overlapping"),
    (Projection((), (Partition(0, (5.0, 2.0)),)), "overlapping"),
    (Projection((), (Partition(0, (0.0, math.inf)),)), "unbounded"),
    (Projection((), (Partition(0, (0.0,)),)), "unbounded"),
    (Projection((), (Partition(0, (0.0, 5.0)), Partition(0, (5.0, 10.0)))), "declared twice"),
])
def test_bad_modifiers_and_subgroups_are_refused_naming_the_problem(projection, match):
    with pytest.raises(InputError, match=match):
        check_projection(projection, FM)


def test_a_clip_narrows_every_added_point_range_and_adds_only_the_intercept_rows_sums():
    clipped = projection_layout(Projection((0,), (Partition(2, (0.0, 0.5, 1.0)),), 2.0), FM.outcome_width, TRIM, 2)
    plain = projection_layout(Projection((0,), (Partition(2, (0.0, 0.5, 1.0)),)), FM.outcome_width, TRIM, 2)
    ranges = {c.name: (c.low, c.high) for c in clipped.parts}
    assert ranges["blp_1"] == ranges["cell_0_1"] == (-10.0, 10.0) and ranges["cell_0_1_sq"] == (0.0, 100.0)
    assert {c.name: (c.low, c.high) for c in plain.parts}["blp_1"] == (-A, A)
    # the clipped intercept row (weights 1 and 1/4, nothing grouped) and blp_0's replicate copies are all it adds
    added = 1 + 1 / 16 + REPLICATE_SHARE
    assert projection_sensitivity_squared(clipped) == pytest.approx(projection_sensitivity_squared(plain) + added)
    assert ranges["blp_0"] == (-10.0, 10.0) and ranges["blp_meat_0_0"] == (0.0, 100.0)
    assert "blp_0" not in {c.name for c in plain.parts}
    values = subject_projection_values([c for c in clipped.parts if c.of is None], np.array([A]), np.array([[1.0]]),
                                       np.array([[1]]))
    assert values.max() == 100.0 and values[0, 0] == values[0, 1] == 10.0
    wide = projection_layout(Projection((0,), (), 1e9), FM.outcome_width, TRIM, 0)
    assert wide.parts[0].high == A


@pytest.mark.parametrize("clip", [0.0, 1e-300, -1.0, math.nan, math.inf, True, "2"])
def test_a_bad_clip_is_refused(clip):
    with pytest.raises(InputError, match="clip"):
        check_projection(Projection((0,), (), clip), FM)


def test_more_modifiers_than_allowed_are_refused():
    fm = FeatureMap(((0.0, 1.0),) * (MAX_MODIFIERS + 1), (0.0, 1.0))
    with pytest.raises(InputError, match="more than"):
        check_projection(Projection(tuple(range(MAX_MODIFIERS + 1))), fm)


def test_the_analysts_shaping_narrows_ranges_reweighs_and_never_raises_the_sensitivity():
    plain = Projection(PROJECTION.modifiers, PROJECTION.partitions, 2.0)
    shaped = Projection.from_spec(Projection(PROJECTION.modifiers, PROJECTION.partitions, 2.0, **SHAPED).to_spec(), FM)
    assert shaped.weights == SHAPED["weights"] and shaped.modifier_clips == SHAPED["modifier_clips"]
    layout = projection_layout(shaped, FM.outcome_width, TRIM, 2)
    parts = {c.name: c for c in layout.parts}
    a = 2.0 * FM.outcome_width
    assert (parts["blp_1"].low, parts["blp_1"].high) == (-0.4 * a, 0.4 * a) and parts["blp_2"].high == a
    assert [parts[f"blp_{q}"].weight for q in range(3)] == list(SHAPED["weights"])
    assert parts["blp_1@0"].high == pytest.approx(0.4 * parts["blp_0@0"].high)  # replicates scale with the range
    gram = [c for c in layout.parts if c.name.startswith("gram_")]
    assert [(c.name, c.low, c.high) for c in gram] == [("gram_0_1", -1.0, 1.0), ("gram_0_2", -1.0, 1.0),
                                                       ("gram_1_1", 0.0, 1.0), ("gram_2_2", 0.0, 1.0)]
    # the weights share three unit sums' budget (sum w^2 = 2.99 <= 3); the Gram entries add 4 w^2, nothing else moves
    unweighted = projection_sensitivity_squared(projection_layout(plain, FM.outcome_width, TRIM, 2))
    assert projection_sensitivity_squared(layout) == pytest.approx(unweighted - 3 + 2.99 + 4 * 0.25**2)
    values = subject_projection_values([c for c in layout.parts if c.of is None], np.array([3.0]),
                                       np.array([[-0.5, 1.0]]), np.array([[1, 0]]))[0]
    named = dict(zip([c.name for c in layout.parts if c.of is None], values, strict=True))
    assert named["gram_0_1"] == -0.5 and named["gram_1_1"] == 0.25 and named["gram_2_2"] == 1.0
    assert named["blp_1"] == -1.5  # -0.5 x 3 inside the clip 0.4 a = 4


@pytest.mark.parametrize(("changes", "match"), [
    ({"weights": (1.0, 1.0, 1.1)}, "weights"),  # their squares sum above 3: more than three unit sums' budget
    ({"weights": (1.0, 0.0, 1.0)}, "weights"),
    ({"weights": (1.0, math.nan, 1.0)}, "weights"),
    ({"modifier_clips": (0.5,)}, "modifier clips"),
    ({"modifier_clips": (0.5, 1.5)}, "modifier clips"),
    ({"modifier_clips": (0.5, 0.0)}, "modifier clips"),
    ({"gram_weight": 2.0}, "gram_weight"),
    ({"gram_weight": True}, "gram_weight"),
])
def test_bad_shaping_is_refused_naming_the_problem(changes, match):
    with pytest.raises(InputError, match=match):
        check_projection(Projection(PROJECTION.modifiers, (), 2.0, **changes), FM)


def test_weights_for_another_number_of_sums_are_refused_before_any_layout():
    with pytest.raises(InputError, match="3 projection sums"):  # a clip gives the intercept row its own: 3, not 2
        projection_layout(Projection(PROJECTION.modifiers, (), 2.0, weights=(1.0, 1.0)), FM.outcome_width, TRIM, 0)


def test_the_gram_entries_released_twice_pool_by_inverse_variance():
    gram = np.array([[100.0, 10.0], [10.0, 40.0]])
    sd = np.array([[0.0, 4.0], [4.0, 2.0]])
    M, M_sd = pooled_gram(gram, sd, {"gram_0_1": 13.0}, {"gram_0_1": 2.0})
    assert M[0, 1] == M[1, 0] == pytest.approx((10 / 16 + 13 / 4) / (1 / 16 + 1 / 4))  # 12.4
    assert M_sd[0, 1] == M_sd[1, 0] == pytest.approx(1 / math.sqrt(1 / 16 + 1 / 4))
    assert M[0, 0] == 100.0 and M[1, 1] == 40.0 and M_sd[1, 1] == 2.0  # n is public; gram_1_1 was not released


def _sums_of(projection: Projection, X, t, y, models, folds):
    layout = projection_layout(projection, FM.outcome_width, TRIM, 0)
    added = party_projection_sums(X, t, y, FM, 1, folds, models, layout, TRIM, projection)
    base_parts = components(["aipw"], ["ate"], FM.outcome_width, TRIM)
    base = party_score_sums(X, t, y, FM, 1, folds, models, base_parts, TRIM)
    return {c.name: v for c, v in zip((*base_parts, *layout.parts), np.concatenate([base, added]), strict=True)}


def _one_fold():
    """3,000 seeded subjects in one fold: data, the modifiers' exact Gram, the plain score and its design."""
    X, t, y = _data(3000, 1)
    folds = np.zeros(len(t), dtype=np.int64)
    stats = party_statistics(X, t, y, FM, 1, folds, 1)
    gram, gram_sd = modifier_gram(stats, FM, PROJECTION, len(t), 0.0)
    phi, D = _phi(X, t, y)
    return X, t, y, folds, gram, gram_sd, phi, D


def test_a_centred_projection_adds_its_pilot_back_and_clips_only_around_it():
    X, t, y, folds, gram, gram_sd, phi, D = _one_fold()
    m = np.column_stack([np.ones(len(t)), D[:, 2:4]])
    ols = np.linalg.lstsq(m, phi, rcond=None)[0]
    pilot = (0.3, 1.0, -0.2)
    for bound in (1e6, 0.2):  # wide: least squares whatever the pilot; narrow: clipped around m^T gamma
        projection = Projection(PROJECTION.modifiers, (), 1.0, centre=bound, pilot=pilot, replicate_pilots=())
        sums = _sums_of(projection, X, t, y, [MODEL], folds)
        assert "blp_0" in sums and "blp_meat_0_0" in sums
        coefficients = best_linear_projection(sums, dict.fromkeys(sums, 0.0), gram, gram_sd, ["a", "b"], [5.0, 1.0],
                                              pilot=pilot)
        b = bound * FM.outcome_width
        clipped = np.clip(m * (phi - m @ pilot)[:, None], -b, b).sum(axis=0)
        expected = ols if bound > 1e3 else pilot + np.linalg.solve(m.T @ m, clipped)
        np.testing.assert_allclose([c.estimate for c in coefficients], expected, rtol=1e-9, atol=1e-12)
    assert np.abs(phi - m @ pilot).max() > 0.2 * FM.outcome_width  # the narrow bound binds on this data
    # the meat is of the centred, clipped values the blp sums add: the sandwich of exactly what was summed
    released = np.clip(m * (phi - m @ pilot)[:, None], -b, b)
    Minv = np.linalg.inv(m.T @ m)
    np.testing.assert_allclose([c.sampling_var for c in coefficients],
                               np.diag(Minv @ released.T @ released @ Minv), rtol=1e-9)


def test_with_a_pilot_the_gram_noise_multiplies_the_estimate_minus_the_pilot():
    # delta method: an entry E of M moves beta = gamma + M^{-1} S by -M^{-1} E (beta - gamma); checked by moving
    # M_01 by h and recomputing, and with gamma = beta (up to the move) the Gram noise vanishes
    gram = np.array([[1000.0, 30.0], [30.0, 90.0]])
    sums = {"blp_0": 50.0, "blp_1": 20.0, "blp_meat_0_0": 9e3, "blp_meat_0_1": 100.0, "blp_meat_1_1": 900.0}
    zero = dict.fromkeys(sums, 0.0)
    sd = np.array([[0.0, 1.0], [1.0, 0.0]])
    pilot = (0.5, -1.0)
    first = best_linear_projection(sums, zero, gram, sd, ["a"], [1.0], pilot=pilot)
    h = 1e-4
    moved = best_linear_projection(sums, zero, gram + h * np.array([[0.0, 1.0], [1.0, 0.0]]), sd, ["a"], [1.0],
                                   pilot=pilot)
    slope = np.array([(b.estimate - a.estimate) / h for a, b in zip(first, moved, strict=True)])
    np.testing.assert_allclose([c.gram_noise_var for c in first], slope**2, rtol=1e-4)
    beta = np.array([c.estimate for c in first])
    at_beta = best_linear_projection({**sums, "blp_0": 0.0, "blp_1": 0.0}, zero, gram, sd, ["a"], [1.0],
                                     pilot=tuple(beta))
    assert [c.gram_noise_var for c in at_beta] == [0.0, 0.0]


def test_the_pilot_is_least_squares_of_the_models_effect_on_the_modifiers_fold_by_fold():
    X, t, y = _data(3001, 2)
    folds = (np.arange(len(t)) % 2).astype(np.int64)  # the counts of fold_labels: position modulo K
    other = NuisanceModel(MODEL.propensity_coef, (MODEL.outcome_coef[0], MODEL.outcome_coef[1] + 0.1))
    stats = party_statistics(X, t, y, FM, 1, folds, 2)
    gram, _ = modifier_gram(stats, FM, PROJECTION, len(t), 0.0)
    pilot = effect_projection(stats, FM, PROJECTION, [MODEL, other], [0, len(t)], gram)
    D = FM.design(X, 1)
    effect = np.where(folds == 0, D @ (MODEL.outcome_coef[1] - MODEL.outcome_coef[0]),
                      D @ (other.outcome_coef[1] - other.outcome_coef[0])) * FM.outcome_width
    m = np.column_stack([np.ones(len(t)), D[:, 2:4]])
    np.testing.assert_allclose(pilot, np.linalg.lstsq(m, effect, rcond=None)[0], rtol=1e-9, atol=1e-12)


LINE = (0.0, 0.0, 0.0)
"""A pilot for the two modifiers and the intercept."""


@pytest.mark.parametrize(("changes", "match"), [
    ({"centre": 0.5}, "pilot"),
    ({"pilot": LINE}, "pilot"),
    ({"replicate_pilots": (LINE,)}, "pilot"),  # a copy's line without a centre
    ({"centre": 0.5, "pilot": LINE}, "pilot"),  # a centre without its copies' lines (none: an empty list)
    ({"centre": 0.5, "pilot": (0.0, 0.0), "replicate_pilots": ()}, "pilot"),
    ({"centre": 0.5, "pilot": (0.0, math.nan, 0.0), "replicate_pilots": ()}, "pilot"),
    ({"centre": 0.0, "pilot": LINE, "replicate_pilots": ()}, "centre"),
    ({"centre": math.inf, "pilot": LINE, "replicate_pilots": ()}, "centre"),
    ({"centre": 10**400, "pilot": LINE, "replicate_pilots": ()}, "centre"),  # no float holds it: not an OverflowError
    ({"centre": 0.5, "pilot": (10**400, 0.0, 0.0), "replicate_pilots": ()}, "pilot"),
    # each finite, but m^T gamma overflows: (phi - inf) z_q is NaN where z_q = 0 (BLAS may also add inf and -inf)
    ({"centre": 0.5, "pilot": (1e308, 1e308, 0.0), "replicate_pilots": ()}, "pilot"),
    ({"centre": 0.5, "pilot": (0.6e308, 0.0, -0.6e308), "replicate_pilots": ()}, "pilot"),
    # a copy's line: the same checks
    ({"centre": 0.5, "pilot": LINE, "replicate_pilots": (LINE, (0.0, 0.0))}, "pilot"),
    ({"centre": 0.5, "pilot": LINE, "replicate_pilots": ((0.0, math.inf, 0.0),)}, "pilot"),
    ({"centre": 0.5, "pilot": LINE, "replicate_pilots": ((1e308, 1e308, 0.0),)}, "pilot"),
    ({"centre": 0.5, "pilot": LINE, "replicate_pilots": (LINE, (True, 0.0, 0.0))}, "pilot"),
])
def test_a_bad_centre_is_refused(changes, match):
    with pytest.raises(InputError, match=match):
        check_projection(Projection(PROJECTION.modifiers, (), 2.0, **changes), FM)


def test_every_option_a_projection_sends_is_one_the_party_reads_back():
    projection = Projection((0, 1), PROJECTION.partitions, 2.0, (1.0, 1.0, 1.0), (0.5, 1.0), 0.25, 0.5, LINE, 0.3,
                            (LINE,), 0.1)
    assert set(projection.to_spec()) == SPEC_KEYS
    assert Projection.from_spec(projection.to_spec(), FM) == projection


def test_a_centre_needs_one_copy_line_per_noise_replicate():
    centred = Projection(PROJECTION.modifiers, (), 2.0, centre=0.5, pilot=LINE, replicate_pilots=(LINE,))
    check_projection(centred, FM)
    assert projection_layout(centred, FM.outcome_width, TRIM, 1).parts
    for n_replicates in (0, 2):
        with pytest.raises(InputError, match=f"1 dp_effects replicate pilots for {n_replicates} noise replicates"):
            projection_layout(centred, FM.outcome_width, TRIM, n_replicates)


def _replicate_sums(projection: Projection, X, t, y, folds, models, replicates):
    """The point sums and each copy's replicate sums (by the point sum's name) of a one-fold release."""
    layout = projection_layout(projection, FM.outcome_width, TRIM, len(replicates))
    added = party_projection_sums(X, t, y, FM, 1, folds, models, layout, TRIM, projection, replicates)
    sums = {c.name: v for c, v in zip(layout.parts, added, strict=True) if c.of is None}
    copies = [{c.of: v for c, v in zip(layout.parts, added, strict=True) if c.copy == b}
              for b in range(len(replicates))]
    return sums | {"aipw_ate": 0.0}, copies  # the ATE's sum is not read: blp_0 is the intercept row's


def _nuisance_var(sums, copies, gram, gram_sd, pilot, copy_pilots):
    coefficients = best_linear_projection(sums, dict.fromkeys(sums, 0.0), gram, gram_sd, ["a", "b"], [5.0, 1.0],
                                          pilot=pilot, replicates=copies,
                                          replicate_sd=dict.fromkeys(copies[0], 0.0), replicate_pilots=copy_pilots)
    return np.array([c.nuisance_var for c in coefficients])


def test_a_centred_copy_is_scored_around_its_own_pilot_and_moves_the_estimate_by_the_pilots_difference_too():
    # copy b of a centred sum is m_q (clip(phi_b - m^T gamma_b) - clip(phi - m^T gamma)), clipped at a tenth of its
    # width; it moves beta = gamma + M^{-1} S by gamma_b - gamma + M^{-1} Delta_b, whose square is the nuisance term
    X, t, y, folds, gram, gram_sd, phi, D = _one_fold()
    m = np.column_stack([np.ones(len(t)), D[:, 2:4]])
    other = NuisanceModel(MODEL.propensity_coef * 0.8, (MODEL.outcome_coef[0] + 0.05, MODEL.outcome_coef[1]))
    pilot, copy = (0.3, 1.0, -0.2), (0.4, 0.9, -0.1)
    projection = Projection(PROJECTION.modifiers, (), 1.0, centre=0.2, pilot=pilot, replicate_pilots=(copy,))
    sums, copies = _replicate_sums(projection, X, t, y, folds, [MODEL], [[other]])
    phi_b, _ = _phi_of(other, X, t, y)
    b = 0.2 * FM.outcome_width
    at_model = np.clip(m * (phi - m @ pilot)[:, None], -b, b)
    at_copy = np.clip(m * (phi_b - m @ copy)[:, None], -b, b)
    delta = np.clip(at_copy - at_model, -0.2 * b, 0.2 * b).sum(axis=0)  # a tenth of the width 2b
    np.testing.assert_allclose([copies[0][f"blp_{q}"] for q in range(3)], delta, rtol=1e-9, atol=1e-9)
    move = np.subtract(copy, pilot) + np.linalg.solve(gram, delta)
    np.testing.assert_allclose(_nuisance_var(sums, copies, gram, gram_sd, pilot, (copy,)), move**2, rtol=1e-9)


def test_where_nothing_is_clipped_a_copy_that_only_moves_the_pilot_moves_nothing():
    # beta = gamma + M^{-1} sum m (phi - m^T gamma) = M^{-1} sum m phi whatever gamma when no value is clipped: a copy
    # with the study's models and another pilot adds no nuisance variance (the pilots' difference and the sums'
    # cancel); with a narrow centre they no longer cancel, the pilot's noise passing on through the clip
    X, t, y, folds, gram, gram_sd, _, _ = _one_fold()
    pilot, copy = (0.3, 1.0, -0.2), (0.32, 0.97, -0.18)
    nuisance = {}
    for centre in (1e6, 0.2):
        projection = Projection(PROJECTION.modifiers, (), 1.0, centre=centre, pilot=pilot, replicate_pilots=(copy,))
        sums, copies = _replicate_sums(projection, X, t, y, folds, [MODEL], [[MODEL]])
        nuisance[centre] = _nuisance_var(sums, copies, gram, gram_sd, pilot, (copy,))
    assert np.all(nuisance[1e6] < 1e-20)
    assert np.all(nuisance[0.2] > 1e-6)


def test_a_residual_clip_bounds_the_score_by_R_plus_rho_over_t_and_gives_the_intercept_row_its_own_sums():
    projection = Projection((0,), (Partition(2, (0.0, 0.5, 1.0)),), residual_clip=0.2)
    layout = projection_layout(projection, FM.outcome_width, TRIM, 2)
    plain = projection_layout(Projection((0,), (Partition(2, (0.0, 0.5, 1.0)),)), FM.outcome_width, TRIM, 2)
    ranges = {c.name: (c.low, c.high) for c in layout.parts}
    a = FM.outcome_width + 0.2 * FM.outcome_width / TRIM  # 5 + 1 / 0.1 = 15, against A = 50
    assert score_bound(projection, FM.outcome_width, TRIM) == a
    assert ranges["blp_0"] == ranges["blp_1"] == ranges["cell_0_1"] == (-a, a)
    assert ranges["blp_meat_0_0"] == ranges["cell_0_0_sq"] == (0.0, a * a) and ranges["blp_meat_0_1"] == (-a * a, a * a)
    # the intercept row's own sums and blp_0's replicates are all it adds to the unclipped layout's sensitivity
    added = 1 + 1 / 16 + REPLICATE_SHARE
    assert projection_sensitivity_squared(layout) == pytest.approx(projection_sensitivity_squared(plain) + added)
    # a projection clip below the residual bound binds as before; above it, the residual bound stands
    clipped = projection_layout(Projection((0,), (), 2.0, residual_clip=0.2), FM.outcome_width, TRIM, 0)
    assert {c.name: c.high for c in clipped.parts}["blp_0"] == 10.0
    wide = projection_layout(Projection((0,), (), 1e9, residual_clip=0.2), FM.outcome_width, TRIM, 0)
    assert wide.parts[0].high == a
    # with subgroups only, the cells use the residual bound
    cells = projection_layout(Projection((), (Partition(2, (0.0, 0.5, 1.0)),), residual_clip=0.2), FM.outcome_width,
                              TRIM, 0)
    assert {c.name: c.high for c in cells.parts}["cell_0_1"] == a


def test_with_a_residual_clip_every_subjects_values_stay_in_their_ranges_whatever_its_outcome():
    # one-row tables (each row's sums are its per-subject values) of extreme subjects: covariates at the box's
    # corners and beyond, either arm, outcomes inside the range and far outside it; hostile models and a replicate
    projection = Projection(PROJECTION.modifiers, PROJECTION.partitions, residual_clip=0.2)
    rng = np.random.default_rng(9)
    models = [NuisanceModel(rng.standard_normal(FM.dim) * 40, (rng.standard_normal(FM.dim) * 3,
                                                                rng.standard_normal(FM.dim) * 3)) for _ in range(6)]
    layout = projection_layout(projection, FM.outcome_width, TRIM, 1)
    low, high = np.array([c.low for c in layout.parts]), np.array([c.high for c in layout.parts])
    reached = 0.0
    for model, replicate in itertools.pairwise(models):
        for x0, x1, x2, t, y in itertools.product((-5.0, 0.0, 10.0), (-1.0, 1.0), (0.0, 1.0), (0, 1),
                                                  (-1e12, 0.0, 2.5, 5.0, 1e12)):
            values = party_projection_sums(np.array([[x0, x1, x2]]), np.array([t], np.int8), [y], FM, 1,
                                           np.zeros(1, np.int64), [model], layout, TRIM, projection, [[replicate]])
            assert (values >= low).all() and (values <= high).all()
            reached = max(reached, abs(values[0]) / high[0])
    assert reached > 0.9  # blp_0, the score itself, comes close to R + rho / t: the range is not loose


@pytest.mark.parametrize("rho", [1e-3, 1.0])  # the two ends accepted
def test_at_the_residual_clips_ends_the_widest_pilot_and_extreme_models_keep_every_value_finite_and_in_range(rho):
    # one-row tables: the widest pilot check_projection accepts (sum |gamma| just below half the largest float),
    # subjects with z_q = 0 and at the corners, outcomes up to the largest float, models whose coefficients' absolute
    # sums are just finite (so d @ coef is huge and R times it would overflow) and a mirrored replicate
    pilot = (2.9e307, 2.9e307, -2.9e307)
    projection = Projection(PROJECTION.modifiers, PROJECTION.partitions, centre=1.0, pilot=pilot, residual_clip=rho,
                            replicate_pilots=(tuple(-v for v in pilot),))  # the replicate's line mirrored
    check_projection(projection, FM)
    big = 3e307 * np.array([1.0, -1.0, 1.0, -1.0, 1.0])
    models = [NuisanceModel(big, (-big, big[::-1])), NuisanceModel(-big, (big, -big[::-1]))]
    layout = projection_layout(projection, FM.outcome_width, TRIM, 1)
    low, high = np.array([c.low for c in layout.parts]), np.array([c.high for c in layout.parts])
    far = np.finfo(float).max
    for (model, replicate), x0, x1, t, y in itertools.product(
            (models, models[::-1]), (0.0, 5.0, 10.0), (-1.0, 0.0, 1.0), (0, 1), (-far, 2.5, far)):
        values = party_projection_sums(np.array([[x0, x1, 1.0]]), np.array([t], np.int8), [y], FM, 1,
                                       np.zeros(1, np.int64), [model], layout, TRIM, projection, [[replicate]])
        assert np.isfinite(values).all() and (values >= low).all() and (values <= high).all()


def test_a_residual_clip_scores_the_unclipped_outcome_and_is_the_plain_score_where_nothing_is_clipped():
    X, t, y, folds, gram, gram_sd, phi, D = _one_fold()
    m = np.column_stack([np.ones(len(t)), D[:, 2:4]])
    # inside the range with rho = R no residual is clipped: least squares of the plain score, as without the clip
    whole = _sums_of(Projection(PROJECTION.modifiers, (), residual_clip=1.0), X, t, y, [MODEL], folds)
    assert "blp_0" in whole and "blp_meat_0_0" in whole
    coefficients = best_linear_projection(whole, dict.fromkeys(whole, 0.0), gram, gram_sd, ["a", "b"], [5.0, 1.0])
    np.testing.assert_allclose([c.estimate for c in coefficients], np.linalg.lstsq(m, phi, rcond=None)[0],
                               rtol=1e-9, atol=1e-12)
    # outcomes beyond the range: the residual clip, not the range, bounds them
    wild = y + np.where(np.arange(len(y)) % 7 == 0, 40.0, 0.0)
    sums = _sums_of(Projection(PROJECTION.modifiers, (), residual_clip=0.2), X, t, wild, [MODEL], folds)
    e, mu0, mu1 = MODEL.propensity(D, TRIM), MODEL.outcome(D, 0, FM), MODEL.outcome(D, 1, FM)
    phi_r = aipw_ate_score(t.astype(float), wild - FM.outcome_mid, e, mu0, mu1, 0.2 * FM.outcome_width)
    assert not np.allclose(phi_r, phi)
    coefficients = best_linear_projection(sums, dict.fromkeys(sums, 0.0), gram, gram_sd, ["a", "b"], [5.0, 1.0])
    np.testing.assert_allclose([c.estimate for c in coefficients], np.linalg.lstsq(m, phi_r, rcond=None)[0],
                               rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("rho", [0.0, -0.0, 1e-300, -0.2, 1.5, math.nan, math.inf, True, "0.3", [0.3], 10**400])
def test_a_bad_residual_clip_is_refused(rho):
    with pytest.raises(InputError, match="residual_clip"):
        check_projection(Projection((0,), (), residual_clip=rho), FM)


def test_the_residual_clip_travels_in_the_request_so_analyst_and_party_lay_out_the_same_sums():
    projection = Projection(PROJECTION.modifiers, PROJECTION.partitions, 1.0, residual_clip=0.25)
    received = Projection.from_spec(projection.to_spec(), FM)
    assert received == projection
    assert projection_layout(received, FM.outcome_width, TRIM, 2) == projection_layout(projection, FM.outcome_width,
                                                                                        TRIM, 2)
    assert Projection.from_spec(Projection(PROJECTION.modifiers).to_spec(), FM).residual_clip is None


def _four_outcomes(e, mu0, mu1, rho=None):
    """(p_s, phi_s) of the four outcomes of a binary y at the range's ends, as the party forms them."""
    ate = components(["aipw"], ["ate"], FM.outcome_width, TRIM)[:1]
    half = FM.outcome_width / 2
    out = []
    for arm, mu in ((0, mu0), (1, mu1)):
        for y in (-half, half):
            t, value = np.full(e.size, arm, dtype=np.int8), np.full(e.size, y)
            phi = (subject_scores(ate, t, value, e, mu0, mu1)[:, 0] if rho is None
                   else aipw_ate_score(t.astype(float), value, e, mu0, mu1, rho))
            out.append(((e if arm else 1 - e) * (mu + half if y > 0 else half - mu) / FM.outcome_width, phi))
    return out


@pytest.mark.parametrize("shaping", [{}, SHAPED, CENTRED, RESIDUAL | SHAPED])
def test_the_clip_loss_added_back_makes_each_clipped_value_unbiased_under_the_models(shaping):
    # E_s[clip(u_s) + loss] = E_s[u_s] exactly, subject by subject, for every blp row and cell, when the loss is within
    # its bound: the identity the compensation rests on (docs/dp-cate-projection.md, "The clip's expected loss added
    # back"); without it the clipped mean is off
    rng = np.random.default_rng(5)
    n = 400
    e, mu0, mu1 = rng.uniform(TRIM, 1 - TRIM, n), rng.uniform(-2.5, 2.5, n), rng.uniform(-2.5, 2.5, n)
    Z, bins = rng.uniform(-1, 1, (n, 2)), np.column_stack([rng.integers(0, 2, n), rng.integers(-1, 3, n)])
    rho = None if "residual_clip" not in shaping else shaping["residual_clip"] * FM.outcome_width
    projection = Projection(PROJECTION.modifiers, PROJECTION.partitions, 0.5, clip_compensation=1.0, **shaping)
    parts = [c for c in projection_layout(projection, FM.outcome_width, TRIM, 0).parts if c.point]
    outcomes = _four_outcomes(e, mu0, mu1, rho)
    np.testing.assert_allclose(sum(p for p, _ in outcomes), 1.0, rtol=1e-12)
    losses = model_clip_losses(parts, outcomes, Z, projection.pilot, 1.0 * FM.outcome_width)
    m = np.column_stack([np.ones(n), Z])
    gamma = np.zeros(3) if projection.pilot is None else np.array(projection.pilot)
    inside = np.abs(losses.rows).max(axis=1) < losses.bound  # the loss within its bound: nothing cut
    assert inside.mean() > 0.5 and losses.rows[:, 0].std() > 0
    compensated = sum(p[:, None] * subject_projection_values(parts, phi, Z, bins, projection.pilot, losses)
                      for p, phi in outcomes)
    plain = sum(p[:, None] * subject_projection_values(parts, phi, Z, bins, projection.pilot) for p, phi in outcomes)
    raw = sum(p[:, None] * np.column_stack([(phi - m @ gamma)[:, None] * m,
                                            *[(bins[:, g] == c) * phi for g, part in enumerate(projection.partitions)
                                              for c in range(part.n_bins)]]) for p, phi in outcomes)
    names = [c.name for c in parts]
    cells = [f"cell_{g}_{c}" for g, part in enumerate(projection.partitions) for c in range(part.n_bins)]
    columns = [names.index(f"blp_{q}") for q in range(3)] + [names.index(c) for c in cells]
    np.testing.assert_allclose(compensated[inside][:, columns], raw[inside], atol=1e-9)
    assert np.abs(plain[inside][:, columns] - raw[inside]).max() > 0.1


def test_a_clip_compensation_widens_the_point_ranges_by_its_bound_and_keeps_the_sensitivity():
    plain = Projection(PROJECTION.modifiers, PROJECTION.partitions, 0.5, **SHAPED)
    compensated = Projection(PROJECTION.modifiers, PROJECTION.partitions, 0.5, clip_compensation=0.2, **SHAPED)
    before, after = (projection_layout(p, FM.outcome_width, TRIM, 2) for p in (plain, compensated))
    back = 0.2 * FM.outcome_width
    for old, new in zip(before.parts, after.parts, strict=True):
        point = old.point and old.of is None
        widen = back if point else 0.0
        if old.name.startswith("blp_meat_"):
            i, j = map(int, old.name.split("_")[2:])
            h = [after.parts[[c.name for c in after.parts].index(f"blp_{q}")].high for q in (i, j)]
            assert (new.low, new.high) == pytest.approx((0.0 if i == j else -h[0] * h[1], h[0] * h[1]))
        elif old.of is not None:  # a replicate: a tenth of its point sum's range
            assert new.width == pytest.approx(old.width * (1 + 2 * back / before.parts[[c.name for c in before.parts]
                                                                                     .index(old.of)].width))
        else:
            assert (new.low, new.high) == pytest.approx((old.low - widen, old.high + widen)), old.name
        assert new.weight == old.weight
    assert projection_sensitivity_squared(after) == pytest.approx(projection_sensitivity_squared(before))


@pytest.mark.parametrize("shaping", [{}, SHAPED, CENTRED])
def test_with_a_clip_compensation_the_added_sums_never_move_further_than_the_derived_sensitivity(shaping):
    # extreme subjects as above, now also with every row's and cell's loss at -beta R, 0 or beta R
    projection = Projection(PROJECTION.modifiers, PROJECTION.partitions, 0.5, clip_compensation=0.2, **shaping)
    layout = projection_layout(projection, FM.outcome_width, TRIM, 0)
    parts = [c for c in layout.parts if c.of is None]
    scale = np.array([c.weight / c.width for c in parts])
    bound, back = score_bound(projection, FM.outcome_width, TRIM), 0.2 * FM.outcome_width
    rows = []
    for phi, z0, z1, b0, b1, loss in itertools.product((-bound, 0.0, bound), (-1.0, 0.0, 1.0), (-1.0, 1.0),
                                                       (-1, 0, 1), (-1, 0, 2), (-back, 0.0, back)):
        losses = ClipLosses(np.full((1, 3), loss), np.full(1, loss), back)
        rows.append(subject_projection_values(parts, np.array([phi]), np.array([[z0, z1]]), np.array([[b0, b1]]),
                                              projection.pilot, losses)[0])
    scaled = np.array(rows) * scale
    worst = max(np.linalg.norm(a - b) for a, b in itertools.combinations(scaled, 2))
    derived = math.sqrt(projection_sensitivity_squared(layout))
    assert derived * 0.8 <= worst <= derived + 1e-12


@pytest.mark.parametrize(("clip", "beta"), [(None, 0.1), (2.0, 0.0), (2.0, 1e-300), (2.0, -0.1), (2.0, 1.5),
                                            (2.0, math.nan), (2.0, math.inf), (2.0, True), (2.0, "0.1"), (2.0, [0.1])])
def test_a_bad_clip_compensation_is_refused(clip, beta):
    with pytest.raises(InputError, match="clip_compensation"):
        check_projection(Projection((0,), (), clip, clip_compensation=beta), FM)


def test_the_clip_compensation_travels_in_the_request_and_the_party_adds_the_models_losses_back():
    X, t, y = _data(2000, 4)
    folds = np.zeros(len(t), dtype=np.int64)
    projection = Projection(PROJECTION.modifiers, PROJECTION.partitions, 0.5, clip_compensation=0.1)
    received = Projection.from_spec(projection.to_spec(), FM)
    assert received == projection
    layout = projection_layout(received, FM.outcome_width, TRIM, 0)
    compensated = party_projection_sums(X, t, y, FM, 1, folds, [MODEL], layout, TRIM, received)
    plain_projection = Projection(PROJECTION.modifiers, PROJECTION.partitions, 0.5)
    plain = party_projection_sums(X, t, y, FM, 1, folds, [MODEL], projection_layout(plain_projection,
                                                                                    FM.outcome_width, TRIM, 0),
                                  TRIM, plain_projection)
    # the point sums move by the subjects' losses under MODEL, summed: computed here from the four outcomes
    D = FM.design(X, 1)
    e, mu0, mu1 = MODEL.propensity(D, TRIM), MODEL.outcome(D, 0, FM), MODEL.outcome(D, 1, FM)
    parts = [c for c in layout.parts if c.point]
    losses = model_clip_losses(parts, _four_outcomes(e, mu0, mu1), D[:, [2, 3]], None, 0.1 * FM.outcome_width)
    names = [c.name for c in layout.parts]
    for q in range(3):
        assert compensated[names.index(f"blp_{q}")] - plain[names.index(f"blp_{q}")] == pytest.approx(
            losses.rows[:, q].sum(), rel=1e-9, abs=1e-9)
    assert np.abs(losses.rows).sum() > 0
