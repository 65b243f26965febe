"""scripts/projection_variance_parts.py: one study's parts, or their means over a range of data seeds."""


import pytest
from benchmark_scripts import load_script


def test_a_seed_range_is_inclusive_and_a_malformed_one_is_refused():
    script = load_script("projection_variance_parts")
    assert script.seed_range("1000-1059") == range(1000, 1060)
    assert script.seed_range("7") == range(7, 8)
    with pytest.raises(SystemExit, match="expected FIRST-LAST"):
        script.seed_range("a-b")


def test_the_means_over_seeds_name_every_coefficient_beside_its_error_variance(capsys):
    script = load_script("projection_variance_parts")
    assert script.main(["--outcome", "binary", "--projection-clip", "5", "--seeds", "3-4", "--n", "1500"]) == 0
    out = capsys.readouterr().out
    assert "means over data seeds 3-4 (2 studies)" in out
    for name in ("intercept", "x0", "x8"):
        line = next(line for line in out.splitlines() if line.strip().startswith(f"{name}:"))
        assert "error variance about the truth" in line and "floored at 0 in" in line
