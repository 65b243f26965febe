"""scripts/projection_nuisance_drift.py: the projection's drift under noisy nuisance models, and a small run."""

import numpy as np
from benchmark_scripts import load_script

from collabcausal.simulations.cate_benchmark import simulate_cate_sites


def test_without_noise_the_noisy_fits_are_the_exact_fit_and_the_copies_do_not_move():
    script = load_script("projection_nuisance_drift")
    sites = simulate_cate_sites(1500, "continuous", np.random.default_rng(3))
    unridged, exact, noisy, moves = script.drift(sites, "continuous", 1 / 3, 2.0, 2, 2, np.random.default_rng(4),
                                                 noise_factor=0.0)
    assert exact.shape == unridged.shape == (3,) and noisy.shape == (2, 3) and moves.shape == (4, 3)
    assert not np.array_equal(unridged, exact)  # the study's ridge is its noise sd's, whatever is drawn
    np.testing.assert_array_equal(noisy, np.vstack([exact, exact]))
    np.testing.assert_array_equal(moves, 0.0)


def test_with_the_studys_noise_the_fits_move_and_a_small_run_prints_every_row(capsys):
    script = load_script("projection_nuisance_drift")
    sites = simulate_cate_sites(1500, "binary", np.random.default_rng(3))
    _, exact, noisy, moves = script.drift(sites, "binary", None, 1.0, 2, 1, np.random.default_rng(4))
    assert np.all(np.abs(noisy - exact) > 0) and np.all(np.abs(moves) > 0)
    assert script.main(["--outcome", "binary", "--n", "1500", "--datasets", "1", "--draws", "2", "--copies", "1"]) == 0
    out = capsys.readouterr().out.splitlines()
    rows = [line for line in out if line.startswith("  ")]
    assert [r.split("  ")[1].strip() for r in rows] == [
        "true projection", "models from the exact statistics, no ridge", "models from the exact statistics",
        "ridge: exact minus no ridge, paired", "models from noisy statistics",
        "drift: noisy minus exact, paired", "copies' mean move around the noisy fit"]
