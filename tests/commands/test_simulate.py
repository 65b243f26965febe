"""``collabcausal simulate``: outputs, and bad input refused with nothing written."""

from __future__ import annotations

import json
import re

import pandas as pd
import pytest

from collabcausal.cli import main
from collabcausal.simulations.datasets import make_dcqe_synthetic


def test_simulate_writes_table_json_and_figure(tmp_path, capsys) -> None:
    out = tmp_path / "res"
    code = main(
        ["simulate", "--dataset", "lalonde", "--bootstrap", "5", "--settings", "W,CA", "--quiet", "--out", str(out)]
    )
    assert code == 0
    assert re.search(r"DC-QE\(PSM\)\s+W-clb\s+-?\d", capsys.readouterr().out)
    rows = json.loads((out / "results.json").read_text())["rows"]
    keys = {"setting", "estimator", "estimand", "estimate", "se", "ci_low", "ci_high", "gap"}
    assert keys | {"inconsistency_true", "inconsistency_ca", "masmd"} <= set(rows[0])
    assert rows[0]["inconsistency_true"] is None and rows[0]["estimand"] == "att"
    assert len(pd.read_csv(out / "table.csv")) == 6
    assert (out / "bootstrap.png").stat().st_size > 1000


def test_simulate_on_a_csv_with_three_row_groups(tmp_path, capsys) -> None:
    make_dcqe_synthetic(300, 0).frame.to_csv(tmp_path / "d.csv", index=False)
    args = ["simulate", "--data", str(tmp_path / "d.csv"), "--covariates", "x1,x2,x3,x4", "--treatment", "treat"]
    args += ["--outcome", "y", "--rows", "3", "--columns", "x1,x2;x3,x4", "--bootstrap", "3", "--quiet"]
    assert main([*args, "--out", str(tmp_path / "o")]) == 0
    assert "W-clb" in capsys.readouterr().out


BAD = [
    (["--data", "{tmp}/missing.csv", "--covariates", "x1", "--treatment", "treat", "--outcome", "y"], "no such file"),
    (
        ["--data", "{tmp}/d.csv", "--covariates", "x1,zz", "--treatment", "treat", "--outcome", "y"],
        "unknown column 'zz'",
    ),
    (["--data", "{tmp}/d.csv", "--covariates", "x1"], "--data needs --treatment, --outcome"),
    (["--data", "{tmp}/nan.csv", "--covariates", "x1,x2", "--treatment", "treat", "--outcome", "y"], "NaN or infinite"),
    (["--data", "{tmp}/arm.csv", "--covariates", "x1,x2", "--treatment", "treat", "--outcome", "y"], "coded 0/1"),
    (["--settings", "Z"], "unknown setting 'Z'"),
    (["--party-components", "many"], "is neither a count"),
    (["--components", "W-clb=x"], "is not SETTING=K"),
    (["--components", "W-clb=20", "--settings", "W"], "m^ = 20"),
]


@pytest.mark.parametrize(("args", "message"), BAD)
def test_bad_input_exits_nonzero_with_one_line_and_writes_nothing(tmp_path, capsys, args, message) -> None:
    d = make_dcqe_synthetic(100, 0).frame
    d.to_csv(tmp_path / "d.csv", index=False)
    d.assign(x2=d["x2"].where(d.index != 3)).to_csv(tmp_path / "nan.csv", index=False)
    d.assign(treat=d["treat"].replace({1: 2})).to_csv(tmp_path / "arm.csv", index=False)
    out = tmp_path / "out"
    argv = ["simulate", *[a.format(tmp=tmp_path) for a in args], "--bootstrap", "2", "--quiet", "--out", str(out)]
    code = main(argv)
    err = capsys.readouterr().err.strip().splitlines()
    assert code != 0
    assert len(err) == 1 and message in err[0] and "fix:" in err[0]
    assert not out.exists()


def test_grpc_transport_gives_the_in_process_numbers_bit_for_bit(tmp_path) -> None:
    common = ["simulate", "--dataset", "lalonde", "--settings", "W,CA", "--bootstrap", "2", "--quiet"]
    assert main([*common, "--out", str(tmp_path / "local")]) == 0
    assert main([*common, "--transport", "grpc", "--out", str(tmp_path / "grpc")]) == 0
    local = json.loads((tmp_path / "local" / "results.json").read_text())["rows"]
    remote = json.loads((tmp_path / "grpc" / "results.json").read_text())["rows"]
    assert local == remote


@pytest.mark.parametrize("kind", [[], ["adum", "--epsilon", "1"], ["--balance-epsilon", "1"]], ids=str)
def test_an_out_that_is_a_file_is_refused_before_any_analysis(tmp_path, capsys, monkeypatch, kind) -> None:
    """The check came only after the whole analysis had run."""

    def no_analysis(*args, **kwargs):
        raise AssertionError("the analysis ran before --out was checked")

    monkeypatch.setattr("collabcausal.simulations.partition.partition_grid", no_analysis)
    monkeypatch.setattr("collabcausal.simulations.datasets.load_lalonde", no_analysis)
    afile = tmp_path / "afile"
    afile.write_text("keep me")
    assert main(["simulate", *kind, "--bootstrap", "2", "--quiet", "--out", str(afile)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert f"--out {afile} is a file, not a folder" in err and "fix:" in err
    assert afile.read_text() == "keep me"


def test_too_many_row_groups_name_the_cause_in_cli_terms(tmp_path, capsys) -> None:
    """`--rows 100` on LaLonde: a covariate is constant in a row group of a few subjects."""
    out = tmp_path / "o"
    assert main(["simulate", "--rows", "100", "--settings", "W", "--bootstrap", "2", "--quiet", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert re.search(r"covariate '\w+' is constant in row group \d+ of 100 \(\d+ subjects\)", err), err
    assert "use fewer --rows" in err and "--covariates" in err
    assert "on_constant" not in err and "=" not in err.split("fix:")[1]
    assert not out.exists()


PYTHON_NAMES = ("n_boot", "n_jobs", "n_components", "n_anchors", "on_constant", "max_iter")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--bootstrap", "-1"], "--bootstrap -1"),
        (["--bootstrap", "0"], "--bootstrap 0"),
        (["--jobs", "0"], "--jobs 0"),
        (["--anchors", "0"], "--anchors 0"),
        (["--party-components", "0"], "--party-components 0"),
        (["--party-components", "1.5"], "--party-components 1.5"),
        (["--components", "W-clb=0", "--settings", "W"], "--components W-clb=0"),
        (["--anchors", "1", "--settings", "W"], "--anchors"),
    ],
)
def test_errors_name_the_option_not_the_python_keyword(tmp_path, capsys, args, message) -> None:
    """`n_boot`, `n_jobs`, `fix n_components` leaked from the library into the command's messages."""
    out = tmp_path / "o"
    # the last --bootstrap counts
    assert main(["simulate", "--bootstrap", "2", *args, "--quiet", "--out", str(out)]) != 0
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err, err
    plain = err.replace("[study] n_components", "").replace("[study] n_anchors", "")  # study.toml keys
    assert not any(name in plain for name in PYTHON_NAMES), err
    assert not out.exists()


def test_row_groups_of_one_arm_name_the_cause_in_cli_terms(tmp_path, capsys) -> None:
    """Issue 38, item 7: `--rows 200` on 600 subjects leaves row groups of 3 subjects, some in one arm."""
    make_dcqe_synthetic(600, 0).frame.to_csv(tmp_path / "d.csv", index=False)
    args = ["simulate", "--data", str(tmp_path / "d.csv"), "--covariates", "x1,x2,x3,x4", "--treatment", "treat"]
    args += ["--outcome", "y", "--rows", "200", "--settings", "W", "--bootstrap", "2", "--quiet"]
    assert main([*args, "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert re.search(r"row group \d+ of 200 \(3 subjects\) has only one treatment arm", err), err
    assert err.endswith("fix: use fewer --rows")
    assert not (tmp_path / "o").exists()
