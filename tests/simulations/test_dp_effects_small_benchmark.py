"""benchmarks/bench_dp_effects_small.py: its targets on made-up rows, and its quick mode (slow)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from benchmark_scripts import load_benchmark

ROOT = Path(__file__).resolve().parents[2]


def _bench():
    return load_benchmark("bench_dp_effects_small")


def _row(bench, dp, se, reference, refused=0):
    return bench.Row(np.asarray(dp, float), np.asarray(se, float), np.asarray(reference, float), refused)


def test_targets_pass_an_unbiased_covering_study_with_n_600_refused():
    bench = _bench()
    truth = bench.cohort_true_ate()
    rng = np.random.default_rng(0)
    noise = rng.normal(0.0, 0.01, 400)
    ok = _row(bench, truth + noise, np.full(400, 0.0102), np.full(400, truth))  # covers about 95.4%
    rows = {600: _row(bench, [], [], [], refused=400), 2000: ok, 10_000: ok}
    assert bench.targets(rows) == []


def test_targets_flag_a_study_not_refused_a_bias_a_short_and_a_wide_interval():
    bench = _bench()
    truth = bench.cohort_true_ate()
    noise = np.random.default_rng(1).normal(0.0, 0.01, 400)
    biased = _row(bench, truth + 0.01 + noise, np.full(400, 0.012), np.full(400, truth))  # 0.83 SE of bias
    short = _row(bench, truth + noise, np.full(400, 0.004), truth + noise)  # covers about 56% (|N(0, 0.01)| <= 0.0078)
    wide = _row(bench, truth + noise, np.full(400, 0.02), truth + noise)  # covers about 99.99%
    missed = bench.targets({600: biased, 2000: biased, 10_000: short})
    assert any("not refused" in m for m in missed)
    assert any(m.startswith("n = 2000: DP bias") for m in missed)
    assert any(m.startswith("n = 10000: coverage of the truth") for m in missed)
    wide_missed = bench.targets({600: _row(bench, [], [], [], refused=400), 2000: wide, 10_000: wide})
    assert any(m.startswith("n = 2000: coverage of the truth 1.000 outside") for m in wide_missed)
    assert any(m.startswith("n = 10000: coverage of the non-private AIPW 1.000 outside") for m in wide_missed)


def test_the_replicate_check_prints_both_tables(capsys):
    _bench().check_replicates(1, 0, 1.0, "cohort")
    out = capsys.readouterr().out
    assert "| 2000 | " in out and "| 10000 | " in out
    header = "| n | clip 1/40, noisy | clip 1/20, noisy | clip 1/10, noisy | clip 1/5, noisy | first order, exact |"
    assert header in out
    assert out.count("x (sd ") == 2 * 6  # six ratios per n: four clips, the exact and the noisy first-order term
