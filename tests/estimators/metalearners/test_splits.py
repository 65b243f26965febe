"""Sample-splitting plans: cross-fitting covers every subject once; disjoint splits partition."""

import numpy as np
import pytest

from collabcausal.errors import InputError
from collabcausal.estimators.metalearners import cross_fit_plan, disjoint_plan


def test_cross_fit_plan_evaluates_every_subject_once_on_models_trained_without_it():
    plan = cross_fit_plan(103, ("propensity", "outcome"), 3, seed=0)
    evaluated = np.concatenate([r.evaluate for r in plan])
    assert np.array_equal(np.sort(evaluated), np.arange(103))
    for r in plan:
        for idx in r.train.values():
            assert np.intersect1d(idx, r.evaluate).size == 0
            assert idx.size + r.evaluate.size == 103


def test_disjoint_plan_is_a_partition_with_the_requested_sizes():
    (r,) = disjoint_plan(1000, ("propensity", "outcome"), (0.25, 0.25, 0.5), seed=0)
    parts = [r.train["propensity"], r.train["outcome"], r.evaluate]
    assert [p.size for p in parts] == [250, 250, 500]
    assert np.array_equal(np.sort(np.concatenate(parts)), np.arange(1000))


def test_bad_fractions_and_folds_are_refused():
    with pytest.raises(InputError, match="summing to 1"):
        disjoint_plan(100, ("a", "b"), (0.5, 0.6, 0.1))
    with pytest.raises(InputError, match="folds"):
        cross_fit_plan(100, ("a",), 0)
