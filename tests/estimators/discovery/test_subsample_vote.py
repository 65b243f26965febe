"""Subsample-and-aggregate release of the ANM decision: one row moves one vote; exact accuracy; odds."""

import math

import numpy as np
import pytest

from collabcausal.errors import InputError
from collabcausal.estimators.discovery.subsample_vote import (
    ABSTAIN,
    GROUP_SIZE,
    UNANIMOUS_FLIP,
    auto_group_size,
    group_votes,
    n_groups,
    release_votes,
    resolve_group_size,
    vote_accuracy,
    vote_probability,
)
from collabcausal.simulations.pair_families import family_pairs

FIXED = {"kernel_width": 0.3, "regularization": 1e-3}


def test_a_substituted_row_changes_at_most_one_vote():
    # Same permutation (same seed) on neighbouring data sets: the row lies in one group only.
    pair = family_pairs("AN", 1, 400, seed=3)[0]
    x2, y2 = pair.x.copy(), pair.y.copy()
    for row, value in ((0, 25.0), (17, -40.0), (399, 3.0)):
        x2[row], y2[row] = value, -value
        a = group_votes(pair.x, pair.y, group_size=50, model=FIXED, random_state=5)
        b = group_votes(x2, y2, group_size=50, model=FIXED, random_state=5)
        assert a.size == b.size == 8 and np.sum(a != b) <= 1
        x2[row], y2[row] = pair.x[row], pair.y[row]


def test_a_group_whose_fit_fails_abstains():
    # A constant column and no public bounds: every group's ANM refuses; each votes 1/2.
    x = np.zeros(60)
    votes = group_votes(x, np.arange(60.0), group_size=20, model=FIXED, random_state=0)
    assert np.array_equal(votes, np.full(3, ABSTAIN))


def test_group_counts_are_public_and_refused_below_an_anm():
    assert n_groups(1000) == 10 and n_groups(1099, 100) == 10
    with pytest.raises(InputError, match="below 20"):
        n_groups(1000, 10)
    with pytest.raises(InputError, match="make no group"):
        n_groups(50, 100)


def test_the_closed_form_accuracy_equals_the_frequency_of_simulated_releases():
    rng = np.random.default_rng(7)
    votes = np.array([1, 1, 0, 1, 0.5, 1, 0, 1, 1, 0])  # 6.5 of 10 for x->y
    for epsilon in (0.5, 1.0, 3.0):
        draws = [release_votes(votes, epsilon, rng=rng).direction == "x->y" for _ in range(20000)]
        exact = vote_accuracy(votes, "x->y", epsilon)
        assert exact == pytest.approx(1 - 0.5 * math.exp(-1.5 * epsilon))
        # 6 standard errors: fails by chance with probability < 1e-8
        assert abs(np.mean(draws) - exact) < 6 * math.sqrt(exact * (1 - exact) / 20000)
        assert vote_accuracy(votes, "y->x", epsilon) == pytest.approx(1 - exact)
    assert vote_accuracy(votes, "x->y", math.inf) == 1.0 and vote_accuracy(np.array([1, 0]), "x->y", math.inf) == 0.5


def test_the_release_states_its_noise_and_the_probability_of_its_side():
    release = release_votes(np.ones(10), 1.0, rng=np.random.default_rng(0))
    assert release.n_groups == 10 and release.noise_scale == 1.0 and release.epsilon == 1.0
    assert release.probability == pytest.approx(vote_probability(release.votes, 10, 1.0))
    assert vote_probability(5.0, 10, 1.0) == 0.5
    assert vote_probability(9.0, 10, 1.0) == pytest.approx(1 - 0.5 * math.exp(-4))
    with pytest.raises(InputError, match="values in"):
        release_votes(np.array([2.0]), 1.0)


def test_the_opendp_sampler_is_the_default_noise():
    release = release_votes(np.ones(10), 2.0)
    assert np.isfinite(release.votes) and release.noise_scale == 0.5


@pytest.mark.parametrize(
    ("n", "epsilon", "size"),
    [(1000, 1.0, 125), (1000, 5.0, 500), (1000, 10.0, 1000), (2000, 1.0, 250), (2000, 0.5, 125), (1000, 0.1, 100),
     (50, 1.0, 50)],
)
def test_auto_groups_are_the_fewest_a_unanimous_vote_survives(n, epsilon, size):
    assert auto_group_size(n, epsilon) == size == resolve_group_size("auto", n, epsilon)
    k = n // size

    def flip(groups):  # P(Lap(1/eps) reverses a unanimous count of `groups`)
        return 0.5 * math.exp(-epsilon * groups / 2)

    # k groups meet the bound, k - 1 do not, unless the cap of GROUP_SIZE rows per group binds.
    assert flip(k) <= UNANIMOUS_FLIP or k == max(1, n // GROUP_SIZE)
    assert k == 1 or flip(k - 1) > UNANIMOUS_FLIP


def test_group_sizes_other_than_a_whole_number_or_auto_are_refused():
    assert resolve_group_size(100, 1000, 1.0) == 100
    for bad in ("big", True, 100.0, None):
        with pytest.raises(InputError, match="must be an integer or 'auto'"):
            resolve_group_size(bad, 1000, 1.0)
    with pytest.raises(InputError, match="below 20"):
        resolve_group_size("auto", 15, 1.0)
    with pytest.raises(InputError, match="epsilon"):
        auto_group_size(1000, 0.0)


def test_an_empty_model_means_the_fixed_defaults_not_the_default_vote_model(monkeypatch):
    # {} is the benchmark's "fixed" rule; it used to be read as "no model given" and ran the GP rule instead.
    from collabcausal.estimators.discovery import subsample_vote

    seen = []
    real = subsample_vote.AdditiveNoiseModel
    monkeypatch.setattr(subsample_vote, "AdditiveNoiseModel", lambda **kw: seen.append(kw) or real(**kw))
    pair = family_pairs("AN", 1, 40, seed=1)[0]
    group_votes(pair.x, pair.y, group_size=20, model={}, random_state=0)
    group_votes(pair.x, pair.y, group_size=20, random_state=0)
    assert [sorted(kw) for kw in seen] == [["random_state"]] * 2 + [["hsic_widths", "random_state", "regression"]] * 2
