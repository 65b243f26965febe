"""The discovery benchmark: accuracy with spreads and the majority baseline beside it."""


import numpy as np
import pandas as pd
import pytest
from benchmark_scripts import load_script

from collabcausal.simulations.anm_pairs import LabelledPair
from collabcausal.simulations.discovery_benchmark import (
    binomial_summary,
    full_protection_accuracy,
    peer_records,
    peer_targets,
    pooled_summary,
    private_records,
    private_targets,
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


def test_additive_noise_pairs_are_found_and_private_hsic_at_eps_10_stays_close(table):
    # Seeded data and splits: fixed numbers, not chance events (measured: AN 0.90 / 0.95 non-private for
    # fixed / loo, 0.92 / 0.91 at eps = 10; SIM-G, the published family, 0.75 against its majority 0.60).
    nonprivate = table[~np.isfinite(table["epsilon"])].set_index(["family", "rule"])
    private = table[np.isfinite(table["epsilon"])].set_index(["family", "rule"])
    for family in ("AN", "SIM-G"):
        assert nonprivate.loc[(family, "fixed"), "accuracy"] > nonprivate.loc[(family, "fixed"), "majority_baseline"]
    for rule in ("fixed", "loo"):
        assert abs(private.loc[("AN", rule), "accuracy"] - nonprivate.loc[("AN", rule), "accuracy"]) < 0.05


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


def test_quick_script_prints_the_families_beside_the_references_and_exits_1_when_below(tmp_path, capsys):
    script = load_script("discovery_benchmark")
    argv = ["--quick", "--families", "SIM-G", "--out", str(tmp_path)]  # seeded: 0.83 on the quick SIM-G pairs
    assert script.main([*argv, "--reference", "SIM-G=0.85"]) == 0
    assert "SIM-G: 0.83 (published 0.85, gap -0.02)" in capsys.readouterr().out
    assert script.main([*argv, "--reference", "SIM-G=0.87"]) == 1
    assert "MORE THAN 3 POINTS BELOW" in capsys.readouterr().out
    assert (tmp_path / "summary.csv").is_file() and (tmp_path / "reference.csv").is_file()


def test_script_refuses_a_malformed_reference():
    with pytest.raises(SystemExit, match="expected FAMILY=ACCURACY"):
        load_script("discovery_benchmark").parse_references(["SIM:0.7"])


def test_full_protection_accuracy_rises_towards_the_non_private_accuracy():
    pairs = family_pairs("SIM-ln", 4, 120)
    table = full_protection_accuracy(pairs, epsilons=(1.0, 1000.0), residual_widths=(0.1,))
    acc = table.set_index("epsilon")["accuracy"]
    assert 0.45 < acc[1.0] < 0.55  # chance at eps = 1 with every row protected at n = 60
    assert abs(acc[1000.0] - acc[np.inf]) < 0.1


@pytest.mark.slow
def test_private_hsic_keeps_the_non_private_accuracy_at_eps_10_on_every_family():
    """The setup of docs/causal-discovery.md's first table (50 pairs of 1000 rows subsampled to 400, two splits).

    Measured on the published families (issue 40): non-private / eps = 1 / eps = 10, AN 0.98 / 0.83 / 0.98,
    SIM 0.65 / 0.59 / 0.66, SIM-ln 0.81 / 0.67 / 0.80, SIM-G 0.67 / 0.60 / 0.68, SIM-c 0.69 / 0.58 / 0.67.
    """
    table = run_benchmark(n_pairs=50, n_rows=1000, max_rows=400, split_seeds=(0, 1), rules=("fixed",),
                          scores=("hsic",), epsilons=(1.0, 10.0)).set_index(["family", "epsilon"])
    for family in ("AN", "SIM", "SIM-ln", "SIM-G", "SIM-c"):
        exact = table.loc[(family, np.inf), "accuracy"]
        assert table.loc[(family, 10.0), "accuracy"] >= exact - 0.03, family
    for family in ("AN", "SIM-ln"):  # where the ANM works best, privacy at eps = 1 keeps a clear edge
        assert table.loc[(family, np.inf), "accuracy"] > table.loc[(family, np.inf), "majority_baseline"] + 0.15
        assert table.loc[(family, 1.0), "accuracy"] > 0.6, family


@pytest.mark.parametrize("family", ["LS-s", "MN-U"])
def test_location_scale_rule_turns_the_reversed_heteroscedastic_families_around(family):
    # seeded pairs (seed 5, not a reported seed): the ANM reverses most, the location-scale likelihood none
    pairs = family_pairs(family, 10, 200, seed=5)
    correct = peer_records(pairs, rules=("fixed", "ls"), scores=("hsic", "likelihood", "likelihood_kde_in"),
                           peers=()).groupby("method")["correct"].sum()
    assert correct["fixed/hsic"] <= 2 and correct["ls/likelihood"] == 10 and correct["ls/likelihood_kde_in"] >= 9


def test_binomial_summary_counts_each_pair_once_with_its_exact_interval():
    pairs = [LabelledPair(f"p{k}", np.zeros(3), np.zeros(3), "x->y" if k < 7 else "y->x") for k in range(10)]
    records = pd.DataFrame({"pair": [p.name for p in pairs] * 2, "method": ["a"] * 10 + ["b"] * 10,
                            "correct": [True] * 8 + [False] * 2 + [True] * 5 + [False] * 5,
                            "seconds": [0.1] * 10 + [1.0] * 10})
    table = binomial_summary(records, pairs).set_index("method")
    assert table.loc["a", "correct"] == 8 and table.loc["a", "accuracy"] == pytest.approx(0.8)
    # Clopper-Pearson 95% for 8/10: [0.444, 0.975]
    assert table.loc["a", "ci_low"] == pytest.approx(0.4439, abs=1e-3)
    assert table.loc["a", "ci_high"] == pytest.approx(0.9748, abs=1e-3)
    assert table.loc["b", "seconds_per_pair"] == pytest.approx(1.0)
    assert table.loc["a", "majority_baseline"] == pytest.approx(0.7)


def test_peer_targets_compare_with_the_better_peer_and_flag_each_missed_target():
    rows = [("F", "ours", 0.60, 0.80, 0.1), ("F", "p1", 0.75, 0.9, 1.0), ("F", "p2", 0.70, 0.9, 0.5),
            ("G", "ours", 0.90, 0.97, 2.0), ("G", "p1", 0.50, 0.7, 1.0), ("G", "p2", 0.60, 0.8, 3.0)]
    table = pd.DataFrame(rows, columns=["family", "method", "accuracy", "ci_high", "seconds_per_pair"])
    table["majority_baseline"] = [0.65] * 3 + [0.5] * 3
    targets = peer_targets(table, "ours", ["p1", "p2"]).set_index("family")
    assert targets.loc["F", "best_peer"] == "p1" and targets.loc["F", "not_below_peer"]  # 0.75 <= 0.80
    assert not targets.loc["F", "above_majority"] and not targets.loc["F", "ok"]
    assert targets.loc["G", "best_peer"] == "p2" and targets.loc["G", "time_ratio"] == pytest.approx(2 / 3)
    assert targets.loc["G", "ok"]


def test_pooled_summary_adds_the_runs_pairs_and_recomputes_the_exact_interval():
    columns = ["method", "correct", "n_pairs", "seconds_per_pair", "majority_baseline", "family"]
    run0 = pd.DataFrame([("ours", 7, 10, 1.0, 0.6, "F"), ("peer", 9, 10, 3.0, 0.6, "F")], columns=columns)
    run1 = pd.DataFrame([("ours", 28, 30, 2.0, 0.8, "F"), ("peer", 21, 30, 2.0, 0.8, "F")], columns=columns)
    pooled = pooled_summary([run0, run1]).set_index("method")
    assert pooled.loc["ours", "correct"] == 35 and pooled.loc["ours", "n_pairs"] == 40
    assert pooled.loc["ours", "accuracy"] == pytest.approx(35 / 40)
    assert pooled.loc["ours", "ci_low"] == pytest.approx(0.7320, abs=1e-3)  # Clopper-Pearson, 35 of 40
    assert pooled.loc["ours", "ci_high"] == pytest.approx(0.9581, abs=1e-3)
    assert pooled.loc["ours", "seconds_per_pair"] == pytest.approx(1.75)  # (10 x 1 + 30 x 2) / 40
    assert pooled.loc["peer", "majority_baseline"] == pytest.approx(0.75)  # (10 x 0.6 + 30 x 0.8) / 40
    targets = peer_targets(pooled.reset_index(), "ours", ["peer"]).set_index("family")
    assert targets.loc["F", "peer_accuracy"] == pytest.approx(0.75) and targets.loc["F", "ok"]


def test_quick_peer_run_prints_every_method_with_its_interval_and_time(tmp_path, capsys):
    pytest.importorskip("causallearn", reason="the benchmarks extra is not installed")
    pytest.importorskip("lingam", reason="the benchmarks extra is not installed")
    script = load_script("discovery_benchmark")
    code = script.main(["--quick", "--peers", "causal-learn,lingam", "--families", "AN-s", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    for method in ("fixed/hsic", "gp/hsic_p", "causal-learn", "lingam"):
        assert f"AN-s    {method}" in out
    # seeded pairs: the project's rule and both peers find all six AN-s pairs, and the KRR is faster
    assert "AN-s: 1.00 vs causal-learn 1.00" in out and code == 0
    assert (tmp_path / "peers.csv").is_file() and (tmp_path / "peer_targets.csv").is_file()


def test_private_records_put_the_vote_release_beside_the_test_set_release():
    pairs = family_pairs("AN", 2, 400, seed=1)
    records = private_records(pairs, epsilons=(1.0, 10.0), rule="fixed", group_size=100)
    assert list(records["n_groups_eps=1"]) == [4, 4] and list(records["m"]) == [200, 200]
    # "auto": 8 groups asked at eps 1, capped at 400 // 100 = 4; one group of 400 at eps 10. Two split seeds:
    # each pair's non-private figure is the share of its two splits that decide right.
    auto = private_records(pairs, epsilons=(1.0, 10.0), rule="fixed", split_seeds=(0, 1))
    assert list(auto["n_groups_eps=1"]) == [4, 4] and list(auto["n_groups_eps=10"]) == [1, 1]
    assert list(auto["pair"]) == [p.name for p in pairs] and auto["nonprivate"].isin([0.0, 0.5, 1.0]).all()
    for column in ("test_eps=1", "test_eps=10", "margin_eps=1", "margin_eps=10", "vote_eps=1", "vote_eps=10"):
        assert records[column].between(0.0, 1.0).all()
    # the margin alone carries less noise: nearer than the two scores to the non-private answer, pair by pair
    for eps in (1, 10):
        gap = (records["nonprivate"] - records[f"margin_eps={eps}"]).abs()
        assert (gap <= (records["nonprivate"] - records[f"test_eps={eps}"]).abs() + 1e-12).all()
    targets = private_targets(records.assign(family="AN").groupby("family", as_index=False).mean(numeric_only=True),
                              (1.0, 10.0))
    assert targets.loc[0, "vote_eps"] == 10.0 and set(targets.columns) >= {"test_ok", "margin_ok", "vote_ok"}
