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
from collabcausal.estimators.dp.effects.scores import NEEDS, components, release_sensitivity, subject_scores

FM = FeatureMap(((0.0, 10.0), (-2.0, 2.0)), (0.0, 100.0), n_sites=1)
TRIM = 0.1
ALL = components(("aipw", "ipw"), ("ate", "att"), FM.outcome_width, TRIM)


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


def test_substituting_one_subject_moves_the_scaled_release_by_at_most_the_sensitivity():
    rng = np.random.default_rng(3)
    n = 60
    X, T, y = rng.uniform(0, 10, (n, 2)), rng.integers(0, 2, n).astype(np.int8), rng.uniform(0, 100, n)
    folds = np.zeros(n, dtype=np.int64)
    delta = release_sensitivity(ALL)
    worst = 0.0
    for model in _hostile_models(rng, 10):
        base = scaled_sums(party_score_sums(X, T, y, FM, 0, folds, [model], ALL, TRIM), ALL)
        for _ in range(20):
            X2, T2, y2 = X.copy(), T.copy(), y.copy()
            X2[0] = rng.uniform(-20, 30, 2)
            T2[0] = rng.integers(0, 2)
            y2[0] = rng.choice([0.0, 100.0, rng.uniform(0, 100)])
            moved = scaled_sums(party_score_sums(X2, T2, y2, FM, 0, folds, [model], ALL, TRIM), ALL)
            worst = max(worst, float(np.linalg.norm(moved - base)))
    assert 0.0 < worst <= delta


def test_components_are_the_union_each_estimate_needs():
    parts = components(("aipw",), ("att",), 1.0, TRIM)
    assert [c.name for c in parts] == list(NEEDS["aipw", "att"])
    with pytest.raises(InputError, match="estimators"):
        components(("tmle",), ("ate",), 1.0, TRIM)
    with pytest.raises(InputError, match="trimming"):
        components(("aipw",), ("ate",), 1.0, 0.5)
