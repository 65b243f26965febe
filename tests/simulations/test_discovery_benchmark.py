"""The discovery benchmark: accuracy with spreads and the majority baseline beside it."""

import numpy as np
import pytest

from collabcausal.simulations.anm_pairs import LabelledPair
from collabcausal.simulations.discovery_benchmark import run_benchmark, subsample


@pytest.fixture(scope="module")
def table():
    return run_benchmark(
        families=("AN", "SIM-G"), n_pairs=10, n_rows=300, max_rows=200, split_seeds=(0, 1), scores=("hsic",),
        epsilons=(10.0,),
    )


def test_every_row_carries_its_interval_seed_range_and_baseline(table):
    assert set(table["rule"]) == {"fixed", "loo", "loo+median"}
    assert not ((table["rule"] == "loo+median") & np.isfinite(table["epsilon"])).any()  # non-private only
    for r in table.itertuples():
        assert r.ci_low <= r.accuracy <= r.ci_high
        assert r.seed_min <= r.accuracy + 1e-12 and r.accuracy <= r.seed_max + 1e-12
        assert 0.5 <= r.majority_baseline <= 1.0 and r.n_pairs == 10 and r.n_split_seeds == 2


def test_additive_noise_pairs_are_found_and_near_linear_gaussian_ones_are_not(table):
    # Seeded data and splits: fixed numbers, not chance events.
    nonprivate = table[~np.isfinite(table["epsilon"]) & (table["rule"] == "fixed")].set_index("family")
    assert nonprivate.loc["AN", "accuracy"] > nonprivate.loc["AN", "majority_baseline"]
    assert nonprivate.loc["SIM-G", "accuracy"] < nonprivate.loc["AN", "accuracy"]
    private = table[np.isfinite(table["epsilon"]) & (table["rule"] == "fixed")].set_index("family")
    assert private.loc["AN", "accuracy"] < nonprivate.loc["AN", "accuracy"]


def test_long_pairs_are_subsampled_reproducibly():
    pair = LabelledPair("p", np.arange(50.0), np.arange(50.0) * 2, "x->y")
    short = subsample(pair, 20, seed=3)
    assert short.x.size == 20 and np.array_equal(short.y, 2 * short.x)
    assert np.array_equal(short.x, subsample(pair, 20, seed=3).x)
    assert subsample(pair, 100, seed=3) is pair
