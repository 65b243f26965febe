"""dp_effects score sums: every per-subject value stays in its public range whatever the model.

The models below are hostile (huge, random, sign-flipped coefficients): privacy must not depend
on the analyst sending sensible nuisances. Deterministic (seeded).
"""

from __future__ import annotations

import numpy as np
import pytest

from collabcausal.errors import InputError
from collabcausal.estimators.dp.effects.design import FeatureMap
from collabcausal.estimators.dp.effects.nuisances import NuisanceModel
from collabcausal.estimators.dp.effects.release import party_score_sums, scaled_sums
from collabcausal.estimators.dp.effects.scores import (
    MAX_REPLICATES,
    NEEDS,
    REPLICATE_CLIP,
    REPLICATE_SHARE,
    aipw_ate_score,
    components,
    release_sensitivity,
    release_weights,
    replicate_components,
    residual_score_bound,
    subject_scores,
)

FM = FeatureMap(((0.0, 10.0), (-2.0, 2.0)), (0.0, 100.0), n_sites=1)
TRIM = 0.1
ALL = components(("aipw", "ipw"), ("ate", "att"), FM.outcome_width, TRIM)
REPLICATES = 3


def _hostile_models(rng: np.random.Generator, k: int = 30) -> list[NuisanceModel]:
    scale = 10.0 ** rng.integers(-3, 6, size=(k, 3))
    return [NuisanceModel(rng.standard_normal(FM.dim) * s[0],
                          (rng.standard_normal(FM.dim) * s[1], rng.standard_normal(FM.dim) * s[2])) for s in scale]


def test_every_score_stays_in_its_range_for_hostile_models_and_extreme_rows():
    rng = np.random.default_rng(2)
    X = np.vstack([rng.uniform(-50, 50, (200, 2)), [[0, -2], [10, 2], [1e6, -1e6]]])
    T = rng.integers(0, 2, len(X)).astype(np.int8)
    y = FM.centred_outcome(np.r_[rng.uniform(-500, 600, 200), 0.0, 100.0, 1e9])
    D = FM.design(X, 0)
    low, high = np.array([c.low for c in ALL]), np.array([c.high for c in ALL])
    for model in _hostile_models(rng):
        values = subject_scores(ALL, T, y, model.propensity(D, TRIM), model.outcome(D, 0, FM), model.outcome(D, 1, FM))
        assert (values >= low - 1e-9).all() and (values <= high + 1e-9).all()


def test_unclipped_scores_reach_their_bounds_so_the_ranges_are_not_loose():
    e = np.array([TRIM, TRIM, 1 - TRIM, 1 - TRIM])
    h = FM.outcome_width / 2
    T = np.array([1, 1, 0, 0], dtype=np.int8)
    y, mu = np.array([h, -h, -h, h]), np.array([-h, h, h, -h])
    parts = components(("aipw",), ("ate",), FM.outcome_width, TRIM)
    phi = subject_scores(parts, T, y, e, mu, mu)[:, 0]
    assert phi.max() == pytest.approx(parts[0].high) and phi.min() == pytest.approx(parts[0].low)


@pytest.mark.parametrize("rho", [0.5, 7.0, 100.0])
def test_with_clipped_residuals_the_score_of_any_outcome_stays_within_R_plus_rho_over_t_and_reaches_it(rho):
    # docs/dp-cate-projection.md, "Clipping the residual": y unclipped (far outside the range too), the models
    # hostile; the bound holds before any final clip, and the extreme subjects below reach both ends of it
    rng = np.random.default_rng(5)
    X = np.vstack([rng.uniform(-50, 50, (200, 2)), [[0, -2], [10, 2], [1e6, -1e6]]])
    T = rng.integers(0, 2, len(X)).astype(float)
    y = np.r_[rng.uniform(-500, 600, 200), -1e300, 1e300, 1e9] - FM.outcome_mid
    D = FM.design(X, 0)
    bound = residual_score_bound(FM.outcome_width, TRIM, rho)
    assert bound == FM.outcome_width + rho / TRIM
    for model in _hostile_models(rng):
        phi = aipw_ate_score(T, y, model.propensity(D, TRIM), model.outcome(D, 0, FM), model.outcome(D, 1, FM), rho)
        assert np.isfinite(phi).all() and np.abs(phi).max() <= bound * (1 + 1e-12)
    h = FM.outcome_width / 2
    e = np.array([TRIM, TRIM, 1 - TRIM, 1 - TRIM])
    T4, mu1 = np.array([1.0, 1.0, 0.0, 0.0]), np.array([h, -h, h, -h])
    phi = aipw_ate_score(T4, np.array([1e9, -1e9, -1e9, 1e9]), e, -mu1, mu1, rho)
    np.testing.assert_allclose(phi, [bound, -bound, bound, -bound])


def test_without_a_residual_clip_the_score_is_the_released_aipw_score():
    rng = np.random.default_rng(6)
    T = rng.integers(0, 2, 500).astype(np.int8)
    y, mu0, mu1 = (rng.uniform(-50, 50, 500) for _ in range(3))
    e = rng.uniform(TRIM, 1 - TRIM, 500)
    parts = components(("aipw",), ("ate",), FM.outcome_width, TRIM)
    np.testing.assert_array_equal(aipw_ate_score(T.astype(float), y, e, mu0, mu1),
                                  subject_scores(parts, T, y, e, mu0, mu1)[:, 0])


@pytest.mark.parametrize("n_replicates", [0, REPLICATES])
def test_substituting_one_subject_moves_the_scaled_release_by_at_most_the_sensitivity(n_replicates):
    """Worst-case neighbours under hostile models (and hostile replicate models when the release carries them)."""
    rng = np.random.default_rng(3 + n_replicates)
    n = 60
    X, T, y = rng.uniform(0, 10, (n, 2)), rng.integers(0, 2, n).astype(np.int8), rng.uniform(0, 100, n)
    folds = np.zeros(n, dtype=np.int64)
    parts = ALL + replicate_components(ALL, n_replicates)
    delta = release_sensitivity(parts)
    worst = 0.0
    for _ in range(10):
        model, *copies = _hostile_models(rng, 1 + n_replicates)
        replicates = tuple([m] for m in copies)

        def release(X, T, y, model=model, replicates=replicates):
            return scaled_sums(party_score_sums(X, T, y, FM, 0, folds, [model], parts, TRIM, replicates), parts)

        base = release(X, T, y)
        for _ in range(20):
            X2, T2, y2 = X.copy(), T.copy(), y.copy()
            X2[0] = rng.uniform(-20, 30, 2)
            T2[0] = rng.integers(0, 2)
            y2[0] = rng.choice([0.0, 100.0, rng.uniform(0, 100)])
            worst = max(worst, float(np.linalg.norm(release(X2, T2, y2) - base)))
    assert 0.0 < worst <= delta


def test_replicate_components_copy_each_model_dependent_point_sum_with_a_small_clipped_range():
    copies = replicate_components(ALL, REPLICATES)
    replicated = {c.of for c in copies}
    assert replicated == {c.name for c in ALL if c.point} - {"n_treated", "att_y1"}
    aipw = next(c for c in ALL if c.name == "aipw_ate")
    first = next(c for c in copies if c.of == "aipw_ate")
    assert (first.name, first.copy, first.point) == ("aipw_ate@0", 0, False)
    assert first.high == -first.low == pytest.approx(REPLICATE_CLIP * aipw.width)
    own = release_weights([c for c in copies if c.of == "aipw_ate"])
    assert float(np.sum(own**2)) == pytest.approx(REPLICATE_SHARE)  # the copies of one sum weigh REPLICATE_SHARE
    assert replicate_components(ALL, 0) == ()
    for bad in (-1, MAX_REPLICATES + 1, 2.5, True):
        with pytest.raises(InputError, match="noise replicates"):
            replicate_components(ALL, bad)


def test_a_replicate_sums_the_clipped_differences_its_models_make():
    rng = np.random.default_rng(5)
    n = 40
    X, T, y = rng.uniform(0, 10, (n, 2)), rng.integers(0, 2, n).astype(np.int8), rng.uniform(0, 100, n)
    folds = np.zeros(n, dtype=np.int64)
    parts = components(("aipw",), ("ate",), FM.outcome_width, TRIM)
    model = NuisanceModel(np.array([0.0, 0.3, -0.2]), (np.array([0.0, 0.1, 0.0]), np.array([0.1, 0.0, 0.1])))
    near = NuisanceModel(model.propensity_coef + 0.01, model.outcome_coef)
    far = NuisanceModel(model.propensity_coef + 3.0, model.outcome_coef)
    full = parts + replicate_components(parts, 3)
    sums = party_score_sums(X, T, y, FM, 0, folds, [model], full, TRIM, [[model], [near], [far]])
    D, yc = FM.design(X, 0), FM.centred_outcome(y)

    def phi(m):
        return subject_scores(parts, T, yc, m.propensity(D, TRIM), m.outcome(D, 0, FM), m.outcome(D, 1, FM))[:, 0]

    c = REPLICATE_CLIP * parts[0].width
    assert sums[0] == pytest.approx(phi(model).sum())
    assert [p.name for p in full[2:]] == ["aipw_ate@0", "aipw_ate@1", "aipw_ate@2"]
    assert sums[2] == 0.0  # the model itself moves nothing
    assert sums[3] == pytest.approx((phi(near) - phi(model)).sum())  # small moves pass unclipped
    assert np.abs(phi(near) - phi(model)).max() < c
    assert np.abs(phi(far) - phi(model)).max() > c
    assert sums[4] == pytest.approx(np.clip(phi(far) - phi(model), -c, c).sum())
    with pytest.raises(InputError, match="replicate"):
        party_score_sums(X, T, y, FM, 0, folds, [model], full, TRIM, [[model]])


def test_components_are_the_union_each_estimate_needs():
    parts = components(("aipw",), ("att",), 1.0, TRIM)
    assert [c.name for c in parts] == list(NEEDS["aipw", "att"])
    with pytest.raises(InputError, match="estimators"):
        components(("tmle",), ("ate",), 1.0, TRIM)
    with pytest.raises(InputError, match="trimming"):
        components(("aipw",), ("ate",), 1.0, 0.5)
