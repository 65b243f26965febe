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


def test_stratified_cross_fit_folds_are_sklearns_stratified_kfold_and_keep_the_treated_share():
    from sklearn.model_selection import StratifiedKFold

    T = np.random.default_rng(1).binomial(1, 0.2, size=503)
    plan = cross_fit_plan(503, ("propensity", "outcome"), 4, seed=9, strata=T)
    reference = StratifiedKFold(4, shuffle=True, random_state=9).split(np.zeros((503, 1)), T)
    for rnd, (train, held) in zip(plan, reference, strict=True):
        assert np.array_equal(rnd.evaluate, held) and np.array_equal(rnd.train["outcome"], train)
        treated = T[rnd.evaluate].sum()
        assert T.sum() // 4 <= treated <= -(-T.sum() // 4)


def test_an_arm_smaller_than_the_number_of_folds_is_refused():
    T = np.zeros(100, dtype=int)
    T[:2] = 1
    with pytest.raises(InputError, match="fewer than the 3 folds"):
        cross_fit_plan(100, ("a",), 3, seed=0, strata=T)


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


def _part_of_each_row(plan, n):
    (round_,) = plan
    part = np.full(n, -1)
    for k, rows in enumerate([*round_.train.values(), round_.evaluate]):
        part[rows[rows < n]] = k
    return part


def test_under_substitution_a_changed_row_moves_no_other_row_between_the_disjoint_splits():
    # The plan is a function of the public n and the seed only: a substituted row keeps every
    # position, so exactly one split sees the change and parallel composition holds. Adding a
    # row (n -> n + 1, the other relation) reshuffles a large share of the rows.
    same_n = [_part_of_each_row(disjoint_plan(400, ["e", "m"], (0.25, 0.25, 0.5), seed=3), 400) for _ in range(2)]
    assert np.array_equal(*same_n)
    grown = _part_of_each_row(disjoint_plan(401, ["e", "m"], (0.25, 0.25, 0.5), seed=3), 400)
    assert (grown != same_n[0]).mean() > 0.05


def test_check_arms_names_the_arm_counts_of_every_split_when_a_nuisance_split_has_one_arm():
    from collabcausal.estimators.metalearners.splits import check_arms

    T = np.zeros(40, dtype=np.int8)
    plan = disjoint_plan(40, ("propensity", "outcome"), (0.25, 0.25, 0.5), seed=0)
    T[plan[0].train["outcome"][:2]] = 1
    check_arms(T, plan, ("outcome",))  # the only nuisance that needs both arms has them
    with pytest.raises(InputError) as caught:
        check_arms(T, plan, ("propensity", "outcome"))
    message = str(caught.value)
    assert "propensity split: 0 treated, 10 control; outcome split: 2 treated, 8 control; " in message
    assert "final stage: 0 treated, 20 control" in message and "\n" not in message
