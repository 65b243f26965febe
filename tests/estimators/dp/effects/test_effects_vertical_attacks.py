"""Red-team attacks on the bounds vertical ``dp_effects``' sensitivities rest on (docs/dp-effects-vertical.md).

A hostile coordinator chooses the model, the replicates, the clip limits and the weight polynomial; worst-case
neighbours sit at the covariate box's corners with extreme outcomes. Every attack either is refused in one
line before anything is computed, or leaves each released per-subject value within its proved bound.
"""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pytest

from collabcausal.errors import InputError
from collabcausal.estimators.dp.effects.design import FeatureMap
from collabcausal.estimators.dp.effects.nuisances import NuisanceModel
from collabcausal.estimators.dp.effects.statistics import fold_statistics, statistics_sensitivity
from collabcausal.estimators.dp.effects.vertical import (
    ColumnGroups,
    PartLimits,
    WeightPolynomial,
    aipw_scores,
    clipped_parts,
    cross_entries,
    cross_term,
    evaluate_weight,
    group_design,
    label_vectors,
    model_change,
    part_limits,
    proved_weight,
    scaled_score_terms,
    score_scales,
    vertical_components,
    weight_polynomial,
)

GROUPS = ColumnGroups(((0, 1), (2, 3)))
BOUNDS = ((-1.0, 1.0), (0.0, 2.0), (-3.0, 3.0), (0.0, 1.0))
FMAP = FeatureMap(BOUNDS, (-2.0, 3.0), 2)
S, R = FMAP.n_sites, FMAP.outcome_width


def _corners(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every corner and the midpoint of the box plus random subjects, in both arms, at both extreme outcomes."""
    box = np.asarray(BOUNDS)
    inside = rng.uniform(box[:, 0], box[:, 1], (n, 4))
    X = np.vstack([np.array(list(itertools.product(*box))), box.mean(axis=1), inside])
    X = np.vstack([X] * 4)
    k = len(X) // 4
    T = np.r_[np.zeros(k), np.ones(k), np.zeros(k), np.ones(k)]
    Y = np.r_[np.full(2 * k, FMAP.outcome_range[0]), np.full(2 * k, FMAP.outcome_range[1])]
    return X, T, Y


def _model(rng: np.random.Generator, scale: float) -> NuisanceModel:
    return NuisanceModel(scale * rng.standard_normal(FMAP.dim),
                         (scale * rng.standard_normal(FMAP.dim), scale * rng.standard_normal(FMAP.dim)))


def _terms(X, T, Y, site, model, limits, changes, poly, parts, unit):
    """The per-subject released values, computed as the parties do (each group's clipped parts / its scale)."""
    designs = [group_design(FMAP, X[:, list(g)], site, GROUPS, i) for i, g in enumerate(GROUPS.groups)]
    scales = np.array([poly.domain, unit, unit])[:, None]
    summed = sum(np.asarray([v for m, lim in [(model, limits), *changes]
                             for v in np.asarray(clipped_parts(m, D, g, GROUPS, lim, S, R)) / scales])
                 for g, D in enumerate(designs))
    at_copies = [list(summed[:3] + summed[i:i + 3]) for i in range(3, len(summed), 3)]
    return scaled_score_terms(T, FMAP.centred_outcome(Y), list(summed[:3]), at_copies, poly, parts, unit)


def _assert_within_release_bounds(terms, parts) -> None:
    """Each released column within what the sensitivity assumes: ``[low, high] w / r`` (a range of width ``w``)."""
    for term, part in zip(terms, parts, strict=True):
        assert np.all(np.isfinite(term))
        scale = part.weight / part.width
        assert part.low * scale * (1 + 1e-12) <= term.min() and term.max() <= part.high * scale * (1 + 1e-12)


def _honest_setup(seed: int, scale: float = 1.0, n_sds: float = 1.0, copies: int = 2):
    rng = np.random.default_rng(seed)
    model = _model(rng, scale)
    D = FMAP.design(rng.uniform(np.asarray(BOUNDS)[:, 0], np.asarray(BOUNDS)[:, 1], (400, 4)), 0)
    gram = D.T @ D
    limits = part_limits(model, gram, GROUPS, S, R, n_sds=n_sds)
    changes = [(d, part_limits(d, gram, GROUPS, S, R, n_sds=n_sds))
               for d in (model_change(model, _model(rng, scale)) for _ in range(copies))]
    domain, unit = score_scales(model, limits, changes, S, R)
    return rng, model, limits, changes, weight_polynomial(domain, 0.1), unit


@pytest.mark.parametrize("seed,scale,n_sds", [(0, 1.0, 1.0), (1, 5.0, 0.5), (2, 0.01, 4.0), (3, 30.0, 8.0)])
def test_released_values_stay_within_their_bounds_for_hostile_sized_models(seed, scale, n_sds) -> None:
    """Held: scaled terms (point, sum of squares, replicates) within ``w/2`` (``w/4``) on corners, both arms."""
    rng, model, limits, changes, poly, unit = _honest_setup(seed, scale, n_sds)
    parts = vertical_components(["aipw"], ["ate"], model, limits, changes, poly, S, R)
    X, T, Y = _corners(rng, 300)
    for site in range(S):
        _assert_within_release_bounds(_terms(X, T, Y, site, model, limits, changes, poly, parts, unit), parts)


def test_degenerate_and_inverted_limits_keep_the_bounds() -> None:
    """Held: zero-variance parts (lo = hi), inverted limits (lo > hi: numpy's clip returns hi) and limits
    wider than the hard bound leave every released value within its bound."""
    rng, model, limits, changes, _poly, _unit = _honest_setup(4)
    for low, high in [(limits.low * 0 + 0.3, limits.low * 0 + 0.3), (limits.high, limits.low),
                      (limits.low - 50.0, limits.high + 50.0)]:
        hostile = PartLimits(low, high)
        moved = [(d, PartLimits(lim.high, lim.low)) for d, lim in changes]
        domain, unit = score_scales(model, hostile, moved, S, R)
        poly = weight_polynomial(domain, 0.1)
        parts = vertical_components(["aipw"], ["ate"], model, hostile, moved, poly, S, R)
        X, T, Y = _corners(rng, 100)
        _assert_within_release_bounds(_terms(X, T, Y, 1, model, hostile, moved, poly, parts, unit), parts)


def test_a_weight_polynomial_narrower_than_the_models_logit_is_refused() -> None:
    """Hole: the coordinator sends a valid polynomial on a domain smaller than the model's ``|eta|`` bound;
    subjects then evaluate it outside [-1, 1], where it grows like ``T_15`` (phi ~ 1e4 against a bound of ~10)."""
    _rng, model, limits, changes, poly, _unit = _honest_setup(5)
    narrow = weight_polynomial(poly.domain / 4, 0.1)
    at_edge = evaluate_weight(narrow, np.array([4.0, -4.0]), np.ones(2))  # a subject at |eta| = E
    assert np.abs(at_edge).max() > 1e3 * narrow.high
    with pytest.raises(InputError, match="domain"):
        vertical_components(["aipw"], ["ate"], model, limits, changes, narrow, S, R)


def test_a_weight_polynomial_with_a_forged_range_is_not_trusted() -> None:
    """Hole: the polynomial's stated range and slope are the coordinator's word; the bounds must follow the
    coefficients, which are what the parties evaluate."""
    _rng, model, limits, changes, poly, _unit = _honest_setup(6)
    honest = vertical_components(["aipw"], ["ate"], model, limits, changes, poly, S, R)
    forged = dataclasses.replace(poly, low=1.0, high=1.0 + 1e-6, slope=1e-6)
    parts = vertical_components(["aipw"], ["ate"], model, limits, changes, forged, S, R)
    for a, b in zip(parts, honest, strict=True):
        assert a.high == pytest.approx(b.high, rel=1e-9)


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_a_non_finite_coefficient_is_refused(bad: float) -> None:
    """Hole: an infinite coefficient makes a subject's part NaN exactly when its covariate is 0 (inf * 0),
    so whether the release is NaN, or a party refuses to encrypt, depends on one subject's value."""
    _rng, model, limits, changes, poly, _unit = _honest_setup(7)
    coef = model.propensity_coef.copy()
    coef[S + 2] = bad
    hostile = NuisanceModel(coef, model.outcome_coef)
    other = group_design(FMAP, np.array([[0.0, 0.5]]), 0, GROUPS, 1)
    with np.errstate(invalid="ignore"):
        eta = clipped_parts(hostile, other, 1, GROUPS, limits, S, R)[0]
    assert np.isnan(eta).all()  # covariate at the box's midpoint: z = 0, inf * 0 (or nan) whatever the limits
    with pytest.raises(InputError, match="finite"):
        vertical_components(["aipw"], ["ate"], hostile, limits, changes, poly, S, R)
    with pytest.raises(InputError, match="finite"):
        vertical_components(["aipw"], ["ate"], model, limits, [*changes, (hostile, limits)], poly, S, R)


def test_non_finite_limits_of_a_later_replicate_are_refused() -> None:
    """Hole: ``max`` skips a NaN after a finite value, so NaN limits of the second replicate left the domain
    finite and gave that replicate NaN bounds (and NaN scaled terms)."""
    _rng, model, limits, changes, poly, _unit = _honest_setup(8)
    nan = PartLimits(np.full_like(limits.low, np.nan), np.full_like(limits.high, np.nan))
    with pytest.raises(InputError, match="finite"):
        vertical_components(["aipw"], ["ate"], model, limits, [changes[0], (changes[1][0], nan)], poly, S, R)


def test_a_replicate_equal_to_the_model_is_refused() -> None:
    """Hole: a zero change with zero limits has replicate bound 0, so its scale ``w / r`` divided by zero."""
    _rng, model, limits, _changes, poly, _unit = _honest_setup(9)
    zero = model_change(model, model)
    zero_limits = PartLimits(np.zeros_like(limits.low), np.zeros_like(limits.high))
    with pytest.raises(InputError, match="positive"):
        vertical_components(["aipw"], ["ate"], model, limits, [(zero, zero_limits)], poly, S, R)


@pytest.mark.parametrize("domain,trim,degree", [(1e-6, 0.1, 15), (40.0, 1e-6, 15), (300.0, 0.49, 63), (4.0, 0.1, 1),
                                                (7.0, 0.001, 2), (1e4, 0.01, 31), (1e-300, 0.1, 15),
                                                (1e300, 0.1, 15)])
def test_evaluate_weight_stays_within_the_proved_range_at_extreme_domains(domain, trim, degree) -> None:
    """Held: the power-basis recurrence in floating point stays inside ``[low, high]`` on a dense grid and at
    the exact endpoints, for both arms."""
    poly = weight_polynomial(domain, trim, degree)
    x = np.r_[np.linspace(-1.0, 1.0, 100_001), -1.0, 1.0, np.nextafter(1.0, 0.0), np.nextafter(-1.0, 0.0)]
    for sign in (1.0, -1.0):
        values = evaluate_weight(poly, x, np.full(x.shape, sign))
        assert poly.low <= values.min() and values.max() <= poly.high


def test_a_subnormal_trim_is_refused_in_one_line() -> None:
    """A trim so small that ``logit(1 - t)`` overflows made a NaN interpolant (numpy's LinAlgError)."""
    with pytest.raises(InputError, match="trimming"):
        weight_polynomial(4.0, 1e-320)


@pytest.mark.parametrize("seed", range(3))
def test_substituting_one_record_moves_the_statistics_within_their_sensitivity(seed: int) -> None:
    """Held: the statistics as the encrypted round computes them (label holder's factors times the other
    party's products) move by at most ``statistics_sensitivity`` when one subject is replaced by a box corner
    (either arm, either extreme outcome, an out-of-range value that is clipped)."""
    rng = np.random.default_rng(seed)
    groups = ColumnGroups(((0, 3), (1, 2)))
    box = np.asarray(BOUNDS)
    X = rng.uniform(box[:, 0], box[:, 1], (40, 4))
    T = rng.integers(0, 2, 40)
    Y = rng.uniform(-2.0, 3.0, 40)

    def released(X, T, Y):
        label, other = (group_design(FMAP, X[:, list(g)], 1, groups, i) for i, g in enumerate(groups.groups))
        y = FMAP.centred_outcome(Y)
        out = fold_statistics(label, T, y, R)
        vectors = label_vectors(label, T.astype(float), np.clip(y / R, -0.5, 0.5), groups, S, 1)
        for entry in cross_entries(groups, S):
            out[entry.index] = cross_term(vectors, other, entry).sum()
        return out

    base = released(X, T, Y)
    worst = 0.0
    corners = list(itertools.product(*(np.c_[box[:, 0] - 5, box[:, 1] + 5])))
    for corner, t, y in itertools.product(corners, (0, 1), (-10.0, 10.0)):
        X2, T2, Y2 = X.copy(), T.copy(), Y.copy()
        X2[0], T2[0], Y2[0] = corner, t, y
        worst = max(worst, float(np.linalg.norm(released(X2, T2, Y2) - base)))
    assert worst <= statistics_sensitivity(FMAP)


def _any_parts(rng: np.random.Generator, model: NuisanceModel, limits: PartLimits, n: int) -> list[np.ndarray]:
    """``eta, mu0, mu1`` of ``n`` subjects whose parts take any values the clip admits (a superset of what any
    covariates give): each group's part uniform in its limits, a third of them at an end, any site's intercept."""
    coefficients = [model.propensity_coef, R * model.outcome_coef[0], R * model.outcome_coef[1]]
    site = rng.integers(0, S, n)
    out = []
    for r, c in enumerate(coefficients):
        lo, hi = limits.low[r], limits.high[r]
        u = rng.uniform(size=(n, lo.size))
        u[rng.random(u.shape) < 0.3] = 0.0
        u[rng.random(u.shape) < 0.3] = 1.0
        out.append(c[:S][site] + np.clip(lo + u * (hi - lo), lo, hi).sum(axis=1))
    return out


@pytest.mark.parametrize("seed", range(4))
def test_score_and_replicate_bounds_hold_over_every_admissible_combination_of_parts(seed: int) -> None:
    """Held: worst case over the parts themselves (not only covariates), both arms, extreme outcomes, hostile
    model sizes from 0.01 to 30 and limits at 0.5 to 4 sds; measured worst ratios 0.99 (score) and 0.96
    (replicate) over 300 such models."""
    rng = np.random.default_rng(100 + seed)
    for _ in range(10):
        scale = 10 ** rng.uniform(-2, 1.5)
        model, change = _model(rng, scale), model_change(_model(rng, scale), _model(rng, scale))
        D = FMAP.design(rng.uniform(np.asarray(BOUNDS)[:, 0], np.asarray(BOUNDS)[:, 1], (200, 4)), 0)
        limits, change_limits = (part_limits(m, D.T @ D, GROUPS, S, R, n_sds=rng.choice([0.5, 4.0]))
                                 for m in (model, change))
        domain, _unit = score_scales(model, limits, [(change, change_limits)], S, R)
        poly = weight_polynomial(domain, float(rng.choice([0.01, 0.1, 0.3])))
        parts = vertical_components(["aipw"], ["ate"], model, limits, [(change, change_limits)], poly, S, R)
        at, moved = _any_parts(rng, model, limits, 5000), _any_parts(rng, change, change_limits, 5000)
        T = rng.integers(0, 2, 5000).astype(float)
        y = rng.choice([-R / 2, R / 2], 5000)
        phi = aipw_scores(T, y, at[0] / domain, at[1], at[2], poly)
        again = aipw_scores(T, y, (at[0] + moved[0]) / domain, at[1] + moved[1], at[2] + moved[2], poly)
        assert np.abs(phi).max() <= parts[0].high
        assert np.abs(again - phi).max() <= parts[2].high


def test_the_range_of_a_hostile_polynomial_covers_its_evaluation() -> None:
    """Held: for coefficients the coordinator chooses (flat extrema where ``p'`` has a root of order up to 13,
    whose numerical roots turn complex; random degrees to 40 and sizes to 1e6), :func:`proved_weight`'s range
    and slope cover :func:`evaluate_weight` on a dense grid, both signs."""
    rng = np.random.default_rng(36)
    cases = [np.polynomial.chebyshev.Chebyshev.cast(3.0 - np.polynomial.Polynomial.fromroots([c] * (m + 1))).coef
             for m in (3, 7, 13) for c in (0.3, -0.77, 0.999)]
    for _ in range(40):
        degree = int(rng.integers(2, 40))
        cases.append(rng.standard_normal(degree + 1) * 10 ** rng.uniform(-3, 6)
                     / (1 + np.arange(degree + 1)) ** rng.uniform(0, 3))
    x = np.linspace(-1.0, 1.0, 100_001)
    for coefficients in cases:
        poly = proved_weight(WeightPolynomial(tuple(map(float, coefficients)), 1.0, 0.1, 0.0, 0.0, 0.0, 0.0))
        for sign in (1.0, -1.0):
            values = evaluate_weight(poly, x, np.full(x.shape, sign))
            assert poly.low <= values.min() and values.max() <= poly.high
        slopes = np.abs(np.diff(np.polynomial.chebyshev.chebval(x, coefficients)) / np.diff(x))
        assert slopes.max() <= poly.slope * (1 + 1e-6)
