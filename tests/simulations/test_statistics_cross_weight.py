"""scripts/statistics_cross_weight.py: the noise law of a weighted statistics release, and a small run."""

import math

import numpy as np
from benchmark_scripts import load_script

from collabcausal.estimators.dp.effects.design import FeatureMap


def test_the_weight_moves_noise_from_the_cross_sums_to_the_gram_entries_by_the_sensitivity_s_growth():
    script = load_script("statistics_cross_weight")
    fm = FeatureMap(((0.0, 1.0),) * 3, (0.0, 1.0), n_sites=2)
    dim, b2 = fm.dim, fm.squared_norm_bound  # 5 and 4: B^4 + 2 B^2 = 24 unweighted
    np.testing.assert_allclose(script.weighted_noise_sd(3.0, fm, 1.0), 3.0)  # w = 1 is the release as it stands
    sd = script.weighted_noise_sd(3.0, fm, 2.0)
    grown = 3.0 * math.sqrt((b2 * b2 + b2 + 4 * b2) / (b2 * b2 + 2 * b2))
    assert sd.shape == (dim * (dim + 1) + 2 * dim,)
    np.testing.assert_allclose(sd[: dim * (dim + 1)], grown)  # both Gram triangles
    np.testing.assert_allclose(sd[dim * (dim + 1):], grown / 2.0)  # b_0 and b_1, divided by w


def test_a_small_run_prints_one_row_per_weight(capsys):
    script = load_script("statistics_cross_weight")
    assert script.main(["--n", "400", "--draws", "2", "--weights", "1,2", "--outcome", "binary"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| 1 |") or
            line.startswith("| 2 |")]
    assert len(rows) == 2
    assert all(np.isfinite(float(v)) for row in rows for v in row.split("|")[2].split("/"))


def test_without_noise_every_weight_gives_the_same_models_and_shifts(monkeypatch, capsys):
    # With no noise the fitted models are the exact statistics' ridge fits: the weight changes only the noise.
    script = load_script("statistics_cross_weight")
    monkeypatch.setattr(script, "weighted_noise_sd", lambda sigma, fm, w: np.zeros(fm.dim * (fm.dim + 1) + 2 * fm.dim))
    assert script.main(["--n", "400", "--draws", "2", "--weights", "1,2", "--outcome", "continuous"]) == 0
    rows = [line.split("|")[3] for line in capsys.readouterr().out.splitlines() if line.startswith("| ")
            and line[2] in "12"]
    assert len(rows) == 2 and rows[0] == rows[1]
