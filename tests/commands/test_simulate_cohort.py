"""The README's ``simulate --data cohort.csv`` example: the shipped cohort, and column groups that drop covariates."""

from __future__ import annotations

import shlex
from pathlib import Path

import pandas as pd
import pytest

from collabcausal.cli import main

ROOT = Path(__file__).resolve().parents[2]
COHORT = ROOT / "examples" / "cohort" / "cohort.csv"


def _readme_command() -> list[str]:
    """The README quickstart's ``simulate --data`` command, as arguments."""
    lines = (ROOT / "README.md").read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if "simulate --data examples/cohort/cohort.csv" in line)
    text = lines[start].rstrip("\\") + lines[start + 1]
    return shlex.split(text.split("#")[0])[1:]


def test_the_shipped_cohort_is_what_its_script_writes() -> None:
    import runpy

    make = runpy.run_path(str(COHORT.parent / "make_cohort.py"))["make_cohort"]
    pd.testing.assert_frame_equal(pd.read_csv(COHORT), make(), check_dtype=False)


def test_the_readme_cohort_command_runs_from_the_repository(tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.chdir(ROOT)
    args = _readme_command()
    assert args[:3] == ["simulate", "--data", "examples/cohort/cohort.csv"]
    assert main([*args, "--bootstrap", "5", "--quiet", "--out", str(tmp_path / "out")]) == 0
    assert "W-clb" in capsys.readouterr().out


def test_column_groups_that_drop_a_covariate_are_refused_naming_it(tmp_path, capsys) -> None:
    args = ["simulate", "--data", str(COHORT), "--covariates", "age,sex,bmi,sbp", "--treatment", "statin"]
    args += ["--outcome", "event", "--columns", "age,sex;bmi", "--settings", "W,CA", "--out", str(tmp_path / "o")]
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "leave out 'sbp'" in err and "'age'" not in err.split("; fix")[0].split("leave out")[1]
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(
    ("columns", "message"),
    [("age,sex;bmi,sbp,sex", "list 'sex' twice"), ("age,sex;bmi,sbp,chol", "name unknown covariate 'chol'")],
)
def test_column_groups_listing_a_covariate_twice_or_an_unknown_one_are_refused(columns, message, tmp_path, capsys):
    args = ["simulate", "--data", str(COHORT), "--covariates", "age,sex,bmi,sbp", "--treatment", "statin"]
    assert main([*args, "--outcome", "event", "--columns", columns, "--out", str(tmp_path / "o")]) == 2
    assert message in capsys.readouterr().err
