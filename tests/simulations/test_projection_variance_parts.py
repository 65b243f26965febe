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
