"""The discovery benchmark: accuracy with spreads and the majority baseline beside it."""

import importlib.util
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from collabcausal.simulations.anm_pairs import LabelledPair
from collabcausal.simulations.discovery_benchmark import (
    full_protection_accuracy,
    reference_gaps,
    run_benchmark,
    subsample,
)
from collabcausal.simulations.pair_families import family_pairs


@pytest.fixture(scope="module")
def table():
    return run_benchmark(
        families=("AN", "SIM-G"), n_pairs=10, n_rows=300, max_rows=200, split_seeds=(0, 1), scores=("hsic",),
        epsilons=(10.0,), rules=("fixed", "loo", "loo+median"),
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


def test_reference_gaps_flag_a_family_more_than_three_points_below_its_published_figure():
    table = pd.DataFrame({"family": ["SIM", "SIM-c", "SIM-G", "SIM"], "rule": ["gp", "gp", "gp", "fixed"],
                          "score": ["hsic"] * 4, "epsilon": [np.inf] * 4, "accuracy": [0.70, 0.60, 0.5, 0.1]})
    gaps = reference_gaps(table, {"SIM": 0.72, "SIM-c": 0.65}).set_index("family")
    assert gaps.loc["SIM", "ok"] and gaps.loc["SIM", "gap"] == pytest.approx(-0.02)
    assert not gaps.loc["SIM-c", "ok"]
    assert gaps.loc["SIM-G", "ok"] and np.isnan(gaps.loc["SIM-G", "reference"])  # nothing to compare with


def load_script():
    path = Path(__file__).resolve().parents[2] / "scripts" / "discovery_benchmark.py"
    spec = importlib.util.spec_from_file_location("discovery_benchmark_script", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_quick_script_prints_the_families_beside_the_references_and_exits_1_when_below(tmp_path, capsys):
    script = load_script()
    argv = ["--quick", "--families", "SIM-G", "--out", str(tmp_path)]  # seeded: 0.50 on the quick SIM-G pairs
    assert script.main([*argv, "--reference", "SIM-G=0.52"]) == 0
    assert "SIM-G: 0.50 (published 0.52, gap -0.02)" in capsys.readouterr().out
    assert script.main([*argv, "--reference", "SIM-G=0.54"]) == 1
    assert "MORE THAN 3 POINTS BELOW" in capsys.readouterr().out
    assert (tmp_path / "summary.csv").is_file() and (tmp_path / "reference.csv").is_file()


def test_script_refuses_a_malformed_reference():
    with pytest.raises(SystemExit, match="expected FAMILY=ACCURACY"):
        load_script().parse_references(["SIM:0.7"])


def test_full_protection_accuracy_rises_towards_the_non_private_accuracy():
    pairs = family_pairs("SIM-ln", 4, 120)
    table = full_protection_accuracy(pairs, epsilons=(1.0, 1000.0), residual_widths=(0.1,))
    acc = table.set_index("epsilon")["accuracy"]
    assert 0.45 < acc[1.0] < 0.55  # chance at eps = 1 with every row protected at n = 60
    assert abs(acc[1000.0] - acc[np.inf]) < 0.1


@pytest.mark.slow
def test_private_hsic_keeps_the_non_private_accuracy_at_eps_10_on_every_family():
    """The fixed-rule figures of docs/causal-discovery.md (50 pairs of 1000 rows subsampled to 400, two splits)."""
    table = run_benchmark(n_pairs=50, n_rows=1000, max_rows=400, split_seeds=(0, 1), rules=("fixed",),
                          scores=("hsic",), epsilons=(1.0, 10.0)).set_index(["family", "epsilon"])
    for family in ("AN", "SIM", "SIM-ln", "SIM-G", "SIM-c"):
        exact = table.loc[(family, np.inf), "accuracy"]
        assert table.loc[(family, 10.0), "accuracy"] >= exact - 0.03, family
    for family in ("AN", "SIM", "SIM-ln"):  # where the ANM works, privacy at eps = 1 keeps a clear edge
        assert table.loc[(family, np.inf), "accuracy"] > table.loc[(family, np.inf), "majority_baseline"] + 0.15
        assert table.loc[(family, 1.0), "accuracy"] > 0.6, family
