"""The arithmetic of vertical ``dp_effects``: who computes each entry, the weight polynomial, the score bounds."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from collabcausal.errors import InputError
from collabcausal.estimators.dp.effects.design import FeatureMap
from collabcausal.estimators.dp.effects.nuisances import NuisanceModel
from collabcausal.estimators.dp.effects.statistics import fold_statistics, statistics_length, statistics_sensitivity
from collabcausal.estimators.dp.effects.vertical import (
    ColumnGroups,
    aipw_scores,
    clipped_parts,
    cross_entries,
    cross_term,
    entry_parties,
    evaluate_weight,
    group_design,
    group_statistics_sensitivity,
    label_vectors,
    model_change,
    part_limits,
    predictor_bound,
    released_variance,
    replicate_bound,
    score_bound,
    share_variance,
    smooth_weight,
    vertical_components,
    weight_polynomial,
)

GROUPS = ColumnGroups(((0, 2), (1,), (3,)))
BOUNDS = ((-1.0, 1.0), (0.0, 2.0), (-3.0, 3.0), (0.0, 1.0))


def _model(rng: np.random.Generator, dim: int, scale: float = 0.5) -> NuisanceModel:
    return NuisanceModel(scale * rng.standard_normal(dim), (scale * rng.standard_normal(dim),
                                                            scale * rng.standard_normal(dim)))


def test_column_groups_refuse_a_split_that_is_not_a_partition() -> None:
    for bad in [((0, 1),), ((0,), (0, 1)), ((0,), (2,)), ((0, 1), ())]:
        with pytest.raises(InputError, match="do not split the covariates"):
            ColumnGroups(bad)


def test_entry_parties_counts_the_noise_adders_of_each_product_by_brute_force() -> None:
    """An entry's noise shares: the label holder's alone on its own columns' entries, else the label holder's (it
    opens) and the evaluator's (it totals); the third owner of a three-party product adds none."""
    n_sites = 2
    owner = GROUPS.owners(n_sites)
    assert owner.tolist() == [0, 0, 0, 1, 0, 2]
    dim = owner.size
    k = entry_parties(GROUPS, n_sites)
    assert k.shape == (statistics_length(dim),)
    # mark each design column by its owner and recompute each entry's owners from fold_statistics' packing
    tri = dim * (dim + 1) // 2
    iu, ju = np.triu_indices(dim)
    for arm in (0, 1):
        for e, (i, j) in enumerate(zip(iu, ju, strict=True)):
            assert k[arm * tri + e] == min(len({0, owner[i], owner[j]}), 2)
        for i in range(dim):
            assert k[2 * tri + arm * dim + i] == len({0, owner[i]})
    assert sorted(e.index for e in cross_entries(GROUPS, n_sites)) == np.flatnonzero(k == 2).tolist()


def test_noise_shares_of_any_k_minus_one_parties_reach_the_target() -> None:
    for k in range(1, 6):
        share = float(share_variance(k))
        assert float(released_variance(k)) == pytest.approx(k * share)
        assert max(k - 1, 1) * share == pytest.approx(1.0)


def test_the_design_is_the_sum_of_the_groups_designs() -> None:
    rng = np.random.default_rng(0)
    fmap = FeatureMap(BOUNDS, (0.0, 1.0), 3)
    X = rng.uniform(-3, 3, (50, 4))
    parts = [group_design(fmap, X[:, list(g)], 1, GROUPS, i) for i, g in enumerate(GROUPS.groups)]
    np.testing.assert_array_equal(np.sum(parts, axis=0), fmap.design(X, 1))


def _soft_clipped(eta: np.ndarray) -> np.ndarray:
    """The smooth trim's logit at t = 0.1: ``eta - s(eta - L) + s(-eta - L)``, ``s`` softplus of sharpness 3."""
    L = np.log(9.0)
    return eta - np.log1p(np.exp(3.0 * (eta - L))) / 3.0 + np.log1p(np.exp(3.0 * (-eta - L))) / 3.0


def test_smooth_weight_follows_the_hard_trimmed_weight_away_from_the_trimming_points() -> None:
    eta = np.linspace(-12.0, 12.0, 240_001)
    hard = 1.0 / np.clip(1.0 / (1.0 + np.exp(-eta)), 0.1, 0.9)
    smooth = smooth_weight(eta, 0.1)
    np.testing.assert_allclose(smooth, 1.0 + np.exp(-_soft_clipped(eta)), rtol=1e-12)
    assert np.all((smooth > 1.0 / 0.9) & (smooth < 10.0))
    away = np.abs(np.abs(eta) - np.log(9.0)) >= 1.0
    assert np.max(np.abs(smooth - hard)[away] / hard[away]) < 0.02
    np.testing.assert_allclose(smooth_weight(-eta, 0.1), 1.0 / (1.0 - 1.0 / smooth), rtol=1e-9)  # 1/(1 - e)


@pytest.mark.parametrize("domain", [1.0, 3.0, 5.0, 8.0])
def test_weight_polynomial_range_and_slope_hold_on_a_dense_grid(domain: float) -> None:
    poly = weight_polynomial(domain, 0.1)
    x = np.linspace(-1.0, 1.0, 200_001)
    values = np.polynomial.chebyshev.chebval(x, poly.coefficients)
    np.testing.assert_allclose(evaluate_weight(poly, x, np.ones_like(x)), values, atol=1e-12)
    np.testing.assert_allclose(evaluate_weight(poly, x, -np.ones_like(x)), values[::-1], atol=1e-12)
    assert poly.low <= values.min() and values.max() <= poly.high
    slopes = np.abs(np.diff(values) / np.diff(x))
    assert slopes.max() <= poly.slope * (1 + 1e-6)
    target = 1.0 + np.exp(-_soft_clipped(domain * x))
    assert np.max(np.abs(values - target)) <= poly.error * (1 + 1e-6) + 1e-12


def test_weight_polynomial_is_close_to_the_smoothly_trimmed_weight_at_the_benchmark_domain() -> None:
    assert weight_polynomial(4.0, 0.1).error < 0.03
    assert weight_polynomial(5.5, 0.1).error < 0.12


def test_weight_polynomial_refuses_bad_domains_and_trims() -> None:
    with pytest.raises(InputError, match="domain"):
        weight_polynomial(float("inf"), 0.1)
    with pytest.raises(InputError, match="trimming"):
        weight_polynomial(2.0, 0.5)


def test_aipw_scores_use_one_polynomial_for_both_arms() -> None:
    """``p(s x)`` is ``1/e`` for the treated and ``1/(1 - e)`` for controls (smooth trim is symmetric)."""
    rng = np.random.default_rng(1)
    n = 1000
    T = rng.integers(0, 2, n).astype(float)
    y = rng.uniform(-0.5, 0.5, n)
    eta, mu0, mu1 = rng.uniform(-3, 3, n), rng.uniform(-0.5, 0.5, n), rng.uniform(-0.5, 0.5, n)
    poly = weight_polynomial(3.0, 0.1, degree=40)
    e = 1.0 / (1.0 + np.exp(-_soft_clipped(eta)))
    expected = mu1 - mu0 + T * (y - mu1) / e - (1 - T) * (y - mu0) / (1 - e)
    np.testing.assert_allclose(aipw_scores(T, y, eta / 3.0, mu0, mu1, poly), expected, atol=1e-6)


def _admissible_corners(fmap: FeatureMap, rng: np.random.Generator, n: int) -> tuple[np.ndarray, ...]:
    """Subjects at the corners of the declared box (and random interior ones), both arms, extreme outcomes."""
    box = np.asarray(fmap.bounds)
    corners = np.array(list(itertools.product(*box)))
    X = np.vstack([corners, rng.uniform(box[:, 0], box[:, 1], (n, len(box)))])
    X = np.vstack([X, X])
    T = np.r_[np.zeros(len(X) // 2), np.ones(len(X) // 2)]
    Y = rng.choice(fmap.outcome_range, len(X))
    return X, T, Y


def _scores(fmap, X, T, Y, site, model, limits, poly, change=None, change_limits=None):
    designs = [group_design(fmap, X[:, list(g)], site, GROUPS, i) for i, g in enumerate(GROUPS.groups)]
    S, R = fmap.n_sites, fmap.outcome_width

    def parts(m, lim):
        return [sum(p) for p in zip(*(clipped_parts(m, D, g, GROUPS, lim, S, R) for g, D in enumerate(designs)),
                                    strict=True)]

    at = parts(model, limits)
    if change is not None:
        at = [a + b for a, b in zip(at, parts(change, change_limits), strict=True)]
    return aipw_scores(T, fmap.centred_outcome(Y), at[0] / poly.domain, at[1], at[2], poly)


@pytest.mark.parametrize("seed", range(6))
def test_score_and_replicate_bounds_hold_for_every_admissible_subject(seed: int) -> None:
    """The sensitivity rests on these bounds: checked on the box's corners and random subjects, for
    random (hostile-sized) models and limits from a random Gram matrix."""
    rng = np.random.default_rng(seed)
    fmap = FeatureMap(BOUNDS, (-2.0, 3.0), 2)
    model, copy = _model(rng, fmap.dim, 1.0), _model(rng, fmap.dim, 1.0)
    D = fmap.design(rng.uniform(-3, 3, (500, 4)), 0)
    gram = D.T @ D
    S, R = fmap.n_sites, fmap.outcome_width
    limits = part_limits(model, gram, GROUPS, S, R, n_sds=1.0)  # tight limits: they bind often
    change = model_change(model, copy)
    change_limits = part_limits(change, gram, GROUPS, S, R, n_sds=1.0)
    domain = predictor_bound(model, limits, S, R, 0) + predictor_bound(change, change_limits, S, R, 0)
    poly = weight_polynomial(domain, 0.1)
    X, T, Y = _admissible_corners(fmap, rng, 2000)
    bound = score_bound(model, limits, poly, S, R)
    moved = replicate_bound(model, limits, change, change_limits, poly, S, R)
    for site in range(S):
        base = _scores(fmap, X, T, Y, site, model, limits, poly)
        again = _scores(fmap, X, T, Y, site, model, limits, poly, change, change_limits)
        assert np.abs(base).max() <= bound
        assert np.abs(again - base).max() <= moved


def test_vertical_components_refuse_what_the_vertical_release_does_not_serve() -> None:
    rng = np.random.default_rng(2)
    fmap = FeatureMap(BOUNDS, (0.0, 1.0), 1)
    model = _model(rng, fmap.dim)
    D = fmap.design(rng.uniform(-1, 1, (100, 4)), 0)
    limits = part_limits(model, D.T @ D, GROUPS, 1, 1.0)
    poly = weight_polynomial(2.0 * predictor_bound(model, limits, 1, 1.0, 0), 0.1)  # |eta| of the model + change
    with pytest.raises(InputError, match="column groups serves"):
        vertical_components(["ipw"], ["ate"], model, limits, [], poly, 1, 1.0)
    parts = vertical_components(["aipw"], ["ate"], model, limits, [(model_change(model, model), limits)], poly, 1, 1.0)
    assert [c.name for c in parts] == ["aipw_ate", "aipw_ate_sq", "aipw_ate@0"]


def test_statistics_of_the_joined_design_are_the_horizontal_statistics() -> None:
    """The vertical statistics release is the horizontal vector of the aligned, joined rows (only who
    computes each entry differs), so the coordinator's models are fitted by the same code."""
    rng = np.random.default_rng(3)
    fmap = FeatureMap(BOUNDS, (0.0, 1.0), 1)
    X = rng.uniform(-1, 1, (300, 4))
    T = rng.integers(0, 2, 300)
    y = fmap.centred_outcome(rng.uniform(0, 1, 300))
    designs = [group_design(fmap, X[:, list(g)], 0, GROUPS, i) for i, g in enumerate(GROUPS.groups)]
    np.testing.assert_allclose(fold_statistics(np.sum(designs, axis=0), T, y, 1.0),
                               fold_statistics(fmap.design(X, 0), T, y, 1.0))


@pytest.mark.parametrize("n_sites,site", [(1, 0), (3, 1)])
def test_cross_terms_sum_to_the_joined_statistics(n_sites: int, site: int) -> None:
    """The label holder's factors times the other party's products give every cross entry exactly; the
    label holder's own design gives every other entry."""
    rng = np.random.default_rng(4)
    groups = ColumnGroups(((0, 3), (1, 2)))
    fmap = FeatureMap(BOUNDS, (0.0, 1.0), n_sites)
    X = rng.uniform(-3, 3, (200, 4))
    T = rng.integers(0, 2, 200)
    y = fmap.centred_outcome(rng.uniform(-1, 2, 200))
    label, other = (group_design(fmap, X[:, list(g)], site, groups, i) for i, g in enumerate(groups.groups))
    joined = fold_statistics(label + other, T, y, 1.0)
    local = fold_statistics(label, T, y, 1.0)
    u = np.clip(y, -0.5, 0.5)
    vectors = label_vectors(label, T.astype(float), u, groups, n_sites, site)
    assert all(np.abs(v).max() <= 1.0 for v in vectors.values())
    entries = cross_entries(groups, n_sites)
    assert sorted(e.index for e in entries) == sorted(np.flatnonzero(entry_parties(groups, n_sites) == 2).tolist())
    for entry in entries:
        assert cross_term(vectors, other, entry).sum() == pytest.approx(joined[entry.index], abs=1e-9)
        local[entry.index] = joined[entry.index]
    np.testing.assert_allclose(local, joined, atol=1e-9)


def test_cross_entries_of_three_column_groups_are_totalled_by_the_later_party() -> None:
    """With three groups a Gram entry of two other parties' columns is the label holder's arm times both columns,
    evaluated by the later party; every other cross entry by the owner of its columns."""
    owner = GROUPS.owners(1)
    entries = cross_entries(GROUPS, 1)
    three = [e for e in entries if len({int(owner[c]) for c in e.party}) == 2]
    assert three and all(e.label == "arm" and e.evaluator == 2 for e in three)
    assert all(e.evaluator == max(int(owner[c]) for c in e.party) for e in entries)


def test_norm_bounds_clip_each_party_and_bound_the_statistics_sensitivity() -> None:
    """With declared norm bounds every group's scaled covariates obey them, and substituting one subject by any
    other (box corners included) moves the joined statistics by at most ``group_statistics_sensitivity``."""
    rng = np.random.default_rng(7)
    fmap = FeatureMap(BOUNDS, (0.0, 1.0), 1)
    groups = ColumnGroups(((0, 2), (1, 3)), (0.5, 1.2))
    box = np.asarray(BOUNDS)
    X = np.vstack([np.array(list(itertools.product(*box))), rng.uniform(box[:, 0], box[:, 1], (200, 4))])
    designs = [group_design(fmap, X[:, list(g)], 0, groups, k) for k, g in enumerate(groups.groups)]
    for k, g in enumerate(groups.groups):
        assert np.all(np.sum(designs[k][:, 1 + np.asarray(g)] ** 2, axis=1) <= groups.norm_bounds[k] * (1 + 1e-12))
    D = np.sum(designs, axis=0)
    sensitivity = group_statistics_sensitivity(fmap, groups)
    assert sensitivity < statistics_sensitivity(fmap)
    T = rng.integers(0, 2, D.shape[0])
    y = rng.choice([-0.5, 0.5], D.shape[0])
    base = fold_statistics(D, T, y, 1.0)
    for other in range(0, D.shape[0], 7):
        for arm, out in ((0, 0.5), (1, -0.5)):
            t2, y2, D2 = T.copy(), y.copy(), D.copy()
            t2[0], y2[0], D2[0] = arm, out, D[other]
            assert np.linalg.norm(fold_statistics(D2, t2, y2, 1.0) - base) <= sensitivity * (1 + 1e-12)
