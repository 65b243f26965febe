"""scripts/projection_variance_parts.py: one study's parts, or their means over a range of data seeds."""


import pytest
from benchmark_scripts import load_script


def test_a_seed_range_is_inclusive_and_a_malformed_one_is_refused():
    script = load_script("projection_variance_parts")
    assert script.seed_range("1000-1059") == range(1000, 1060)
    assert script.seed_range("7") == range(7, 8)
    with pytest.raises(SystemExit, match="expected FIRST-LAST"):
        script.seed_range("a-b")


def test_a_setting_is_typed_and_a_malformed_one_is_refused():
    script = load_script("projection_variance_parts")
    assert script.setting("nuisance_replicates=4") == ("nuisance_replicates", 4)
    assert script.setting("replicate_step=1.5") == ("replicate_step", 1.5)
    assert script.setting("modifier_clip=none") == ("modifier_clip", None)
    assert script.setting("projection_allocation=equal") == ("projection_allocation", "equal")
    with pytest.raises(SystemExit, match="expected NAME=VALUE"):
        script.setting("replicate_step")


def test_the_means_over_seeds_name_every_interval_beside_its_error_variance(capsys):
    script = load_script("projection_variance_parts")
    assert script.main(["--outcome", "binary", "--projection-clip", "5", "--setting", "replicate_step=3",
                        "--seeds", "3-4", "--n", "1500"]) == 0
    out = capsys.readouterr().out
    assert "replicate_step 3" in out.splitlines()[0]
    assert "means over data seeds 3-4 (2 studies)" in out
    for name in ("intercept", "x0", "x8", "x0 in [-3.5, -0.5)", "x0 in [0.5, 3.5]"):
        line = next(line for line in out.splitlines() if line.strip().startswith(f"{name}:"))
        assert "error variance about the truth" in line and "floored at 0 in" in line
        assert "SE spread" in line and "interval's coverage" in line


def test_the_noise_free_studies_keep_the_statistics_rho_and_drop_the_rest():
    script = load_script("projection_variance_parts")
    from collabcausal.simulations.cate_benchmark import study_spec

    spec = study_spec("binary", 1.0)
    with_statistics_noise, without_noise = script.noise_free(spec)
    (rho_n, delta_n), (rho_s, _) = spec.budgets
    (kept_n, kept_delta), (scores_rho, _) = with_statistics_noise.budgets
    assert kept_n == pytest.approx(rho_n, rel=1e-12) and kept_delta == delta_n
    assert scores_rho > 1e3 * rho_s  # the scores' noise sd is sqrt(1e3) times smaller, at least
    assert without_noise.budgets[0][0] > 1e3 * rho_n and without_noise.budgets[1][0] > 1e3 * rho_s


def test_measured_prints_the_truths_under_every_interval(capsys):
    script = load_script("projection_variance_parts")
    assert script.main(["--outcome", "binary", "--projection-clip", "5", "--seeds", "3-4", "--n", "1500",
                        "--measured"]) == 0
    lines = capsys.readouterr().out.splitlines()
    named = [i for i, line in enumerate(lines) if "error variance about the truth" in line]
    assert len(named) == 7
    for i in named:
        assert lines[i + 1].strip().startswith("measured: sampling") and "its drift" in lines[i + 1]


def test_measured_without_a_seed_range_is_refused(capsys):
    script = load_script("projection_variance_parts")
    with pytest.raises(SystemExit) as exit_info:
        script.main(["--outcome", "binary", "--measured"])
    assert exit_info.value.code == 2 and "--measured needs --seeds" in capsys.readouterr().err
