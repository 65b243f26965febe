"""scripts/projection_nuisance_drift.py: the projection's drift under noisy nuisance models, its parts, and a small
run."""

import numpy as np
from benchmark_scripts import load_script

from collabcausal.estimators.dp.effects.design import FeatureMap
from collabcausal.estimators.dp.effects.nuisances import NuisanceModel
from collabcausal.estimators.dp.effects.statistics import ArmStatistics, fold_statistics
from collabcausal.simulations.cate_benchmark import simulate_cate_sites, study_spec


def test_without_noise_every_noisy_fit_is_the_exact_fit_and_nothing_moves():
    script = load_script("projection_nuisance_drift")
    sites = simulate_cate_sites(1500, "continuous", np.random.default_rng(3))
    d = script.drift(sites, "continuous", 1 / 3, 2.0, 2, 2, np.random.default_rng(4), noise_factor=0.0)
    assert d.exact.shape == d.unridged.shape == (3,) and d.noisy.shape == (2, 3) and d.moves.shape == (4, 3)
    assert not np.array_equal(d.unridged, d.exact)  # the study's ridge is its noise sd's, whatever is drawn
    for field in ("noisy", "propensity_only", "outcome_only", "independent"):
        np.testing.assert_array_equal(getattr(d, field), np.vstack([d.exact, d.exact]))
    np.testing.assert_array_equal(d.moves, 0.0)
    np.testing.assert_array_equal(d.predicted, 0.0)


def test_the_cross_term_is_the_copies_mean_of_d_mu_times_the_other_arms_gram_times_d_e():
    script = load_script("projection_nuisance_drift")
    spec = study_spec("continuous", 1.0)
    feature_map = FeatureMap(spec.bounds, spec.outcome_range, 4)
    rng = np.random.default_rng(5)
    design = feature_map.design(rng.uniform(-1, 1, (400, len(spec.bounds))), 2)
    t = rng.integers(0, 2, 400)
    statistics = fold_statistics(design, t, rng.uniform(-2, 2, 400), feature_map.outcome_width)
    dim = feature_map.dim

    def model() -> NuisanceModel:
        return NuisanceModel(rng.normal(size=dim), (rng.normal(size=dim), rng.normal(size=dim)))

    at, copies = model(), [model() for _ in range(3)]
    gram = ArmStatistics.unpack(statistics, dim).gram
    expected = np.mean([sum((c.outcome_coef[a] - at.outcome_coef[a]) @ gram[1 - a]
                            @ (c.propensity_coef - at.propensity_coef) for a in (0, 1)) for c in copies])
    got = script.cross_term(statistics, at, copies, feature_map)
    np.testing.assert_allclose(got, [feature_map.outcome_width * expected / 400, 0.0, 0.0], rtol=1e-12)


def test_with_the_studys_noise_the_fits_move_and_a_small_run_prints_every_row(capsys):
    script = load_script("projection_nuisance_drift")
    sites = simulate_cate_sites(1500, "binary", np.random.default_rng(3))
    d = script.drift(sites, "binary", None, 1.0, 2, 1, np.random.default_rng(4))
    for field in ("noisy", "propensity_only", "outcome_only", "independent"):
        assert np.all(np.abs(getattr(d, field) - d.exact) > 0), field
    assert np.all(np.abs(d.moves) > 0) and np.all(d.predicted[:, 0] != 0) and np.all(d.predicted[:, 1:] == 0)
    assert script.main(["--outcome", "binary", "--n", "1500", "--datasets", "1", "--draws", "2", "--copies", "1"]) == 0
    out = capsys.readouterr().out.splitlines()
    rows = [line for line in out if line.startswith("  ")]
    assert [r[:54].strip() for r in rows] == [
        "true projection", "models from the exact statistics, no ridge", "models from the exact statistics",
        "ridge: exact minus no ridge, paired", "models from noisy statistics",
        "drift: noisy minus exact, paired", "noisy propensity alone", "noisy outcome models alone",
        "both noisy, from independent draws", "cross term predicted from the release",
        "copies' mean move around the noisy fit"]
