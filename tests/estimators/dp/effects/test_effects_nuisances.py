"""dp_effects nuisances: from exact statistics they recover the design's models; specs are checked."""

from __future__ import annotations

import numpy as np
import pytest

from collabcausal.errors import InputError
from collabcausal.estimators.dp.effects.analysis import fold_models
from collabcausal.estimators.dp.effects.design import FeatureMap
from collabcausal.estimators.dp.effects.folds import assign_folds, fold_seed
from collabcausal.estimators.dp.effects.nuisances import SPEC_KEYS, NuisanceModel
from collabcausal.estimators.dp.effects.release import party_statistics
from collabcausal.simulations.multisite import OUTCOME_RANGE, covariate_bounds, simulate_sites


def test_exact_statistics_give_propensities_and_outcomes_close_to_the_truth():
    sites = simulate_sites(20_000, "continuous", np.random.default_rng(6), n_sites=2)
    fm = FeatureMap(tuple(covariate_bounds()), OUTCOME_RANGE["continuous"], 2)
    stats = sum(party_statistics(s.X, s.T, s.Y, fm, i, np.zeros(len(s.T), dtype=np.int64), 1)
                for i, s in enumerate(sites))
    (model,) = fold_models(stats, fm.dim, 2, 0.0)
    D = fm.design(sites[1].X, 1)
    e = model.propensity(D, 0.01)
    assert np.mean(np.abs(e - sites[1].propensity)) < 0.03  # LDA is not exact for the 2 binary covariates
    effect = (model.outcome(D, 1, fm) - model.outcome(D, 0, fm)).mean()
    assert effect == pytest.approx(1.0, abs=0.05)


def test_cross_fitted_model_k_never_sees_fold_k():
    fm = FeatureMap(((0.0, 1.0),), (0.0, 1.0), 1)
    rng = np.random.default_rng(8)
    X, T, y = rng.uniform(0, 1, (300, 1)), rng.integers(0, 2, 300), rng.uniform(0, 1, 300)
    folds = assign_folds(300, 3, 11)
    rows = party_statistics(X, T, y, fm, 0, folds, 3)
    poisoned = rows.copy()
    poisoned[1] *= 1000.0  # fold 1's statistics changed: model 1 must not move
    before, after = fold_models(rows, fm.dim, 1, 0.0), fold_models(poisoned, fm.dim, 1, 0.0)
    np.testing.assert_allclose(before[1].outcome_coef[0], after[1].outcome_coef[0])
    assert not np.allclose(before[0].outcome_coef[0], after[0].outcome_coef[0])


def test_folds_are_balanced_keyed_and_stable():
    seed = fold_seed(b"k" * 32, "study")
    a, b = assign_folds(101, 4, seed), assign_folds(101, 4, seed)
    np.testing.assert_array_equal(a, b)
    assert sorted(np.bincount(a)) == [25, 25, 25, 26]
    assert fold_seed(b"k" * 32, "other") != seed
    with pytest.raises(InputError, match="16 bytes"):
        fold_seed(b"short", "study")


@pytest.mark.parametrize("spec", [None, {"propensity": [1.0]}, {"propensity": [1, 2], "outcome_0": [1, 2],
                                                                 "outcome_1": [1, float("nan")]}])
def test_a_malformed_model_spec_is_refused(spec):
    with pytest.raises(InputError):
        NuisanceModel.from_spec(spec, 2)


def test_a_model_key_the_party_does_not_apply_is_refused_by_name():
    """A stated ``sigma`` or a newer analyst's ``ridge`` beside the three coefficient lists: refused, not left aside;
    the keys a model sends are exactly those a party reads back."""
    model = NuisanceModel(np.array([0.0, 0.5]), (np.array([0.1, -0.2]), np.array([0.3, 0.0])))
    assert set(model.to_spec()) == set(SPEC_KEYS)
    again = NuisanceModel.from_spec(model.to_spec(), 2)
    assert again.to_spec() == model.to_spec()
    with pytest.raises(InputError, match=r"^dp_effects nuisance model options 'ridge', 'sigma' are not ones this "
                                         r"party applies \(outcome_0, outcome_1, propensity\); fix: drop them"):
        NuisanceModel.from_spec(model.to_spec() | {"sigma": 0.0, "ridge": 1.0}, 2)
