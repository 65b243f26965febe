"""``collabcausal simulate adum|cate|discovery``: a study kind end to end through ``analyst serve``'s code."""

from __future__ import annotations

import json

import pytest

from collabcausal.cli import main
from collabcausal.estimators.dp.zcdp import zcdp_rho
from collabcausal.simulations.datasets import make_dcqe_synthetic

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def _report(out) -> dict:
    assert (out / "report.html").stat().st_size > 1000
    return json.loads((out / "report.json").read_text())


def test_simulate_adum_on_lalonde_split_by_rows_reports_each_partys_spend(tmp_path, capsys):
    out = tmp_path / "adum"
    args = ["simulate", "adum", "--rows", "4", "--epsilon", "2", "--partition-columns", "age,re74", "--cells", "3,3"]
    assert main([*args, "--outcome-range", "0", "60", "--out", str(out)]) == 0
    report = _report(out)
    assert report["kind"] == "adum" and report["partition"]["n_cells"] == [3, 3]
    assert report["privacy"] == {p: {"epsilon": 2.0, "delta": 0.0} for p in ("p11", "p21", "p31", "p41")}
    assert "ATT eps-adum:" in capsys.readouterr().out
    assert any("observed ranges" in w for w in report["warnings"])


def test_simulate_discovery_on_a_csv(tmp_path, capsys):
    make_dcqe_synthetic(600, 0).frame.to_csv(tmp_path / "d.csv", index=False)
    out = tmp_path / "disc"
    args = ["simulate", "discovery", "--data", str(tmp_path / "d.csv"), "--covariates", "x1,x2,x3", "--treatment",
            "treat", "--outcome", "y", "--rows", "3", "--pairs", "x1,x2;x2,x3", "--epsilon", "0.5"]
    assert main([*args, "--out", str(out)]) == 0
    report = _report(out)
    assert set(report["estimates"]) == {"x1~x2", "x2~x3"}
    assert {row["method"] for row in report["estimates"].values()} == {"dp-anm-hsic-margin"}  # the default release
    assert report["privacy"] == {p: {"epsilon": 1.0, "delta": 0.0} for p in ("p11", "p21", "p31")}
    assert "DIRECTION x1~x2:" in capsys.readouterr().out


def test_simulate_cate_on_the_dcqe_grid_charges_the_analysts_ledger_only(tmp_path):
    out = tmp_path / "cate"
    args = ["simulate", "cate", "--dataset", "dcqe-synthetic", "--epsilon", "5", "--outcome-range", "-8", "8"]
    assert main([*args, "--feature-bound", "0.001", "--out", str(out)]) == 0  # a bound far inside X^'s spread
    report = _report(out)
    assert any("covariate rows" in w and "outside" in w for w in report["warnings"])  # clipping is reported
    assert report["privacy"].pop("analyst study ledger (rows of X^)") == {"epsilon": 5.0, "delta": 1e-5}
    assert report["privacy"] == {p: {"epsilon": None, "delta": None} for p in ("p11", "p12", "p21", "p22")}
    assert report["estimates"]["dp-cate-r"]["noise_scale"] > 0


BAD = [
    (["adum", "--epsilon", "-1"], "[adum] epsilon = -1.0 is invalid"),
    (["adum", "--partition-columns", "bmi"], "'bmi', which has no public range"),
    (["adum", "--cells", "0"], "[adum] cells[0] = 0 is invalid"),
    (["discovery", "--pairs", "age"], "[discovery] pairs[0]"),
    (["discovery", "--pairs", "age,age"], "two different covariates"),
    (["discovery", "--pairs", ","], "names no column"),
    (["cate", "--feature-bound", "0"], "[cate] feature_bound = 0.0 is invalid"),
    (["--epsilon", "1"], "--epsilon is not an option of simulate dcqe"),
    (["adum", "--pairs", "age,re74"], "--pairs is not an option of simulate adum; fix: use it with simulate discovery"),
    (["--balance-epsilon", "0"], "[balance] epsilon = 0.0 is invalid"),
    (["--balance-epsilon", "1", "--balance-delta", "1"], "[balance] delta = 1.0 is invalid"),
    (["--balance-delta", "1e-6"], "--balance-delta needs --balance-epsilon"),
    (["adum", "--balance-epsilon", "1"], "--balance-epsilon is not an option of simulate adum"),
    (["--balance-epsilon", "1", "--settings", "W,CA"], "--settings is not used with --balance-epsilon"),
]


@pytest.mark.parametrize(("args", "message"), BAD)
def test_bad_kind_options_exit_nonzero_with_one_line_and_write_nothing(tmp_path, capsys, args, message):
    out = tmp_path / "out"
    assert main(["simulate", *args, "--out", str(out)]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0] and "fix:" in err[0]
    assert not out.exists()


def test_simulate_adum_over_grpc_reports_what_it_reports_in_process(tmp_path):
    # eps 1e6 per party, outcome range [0, 60]: Laplace noise on each cell sum of scale 2 * 60 / (eps / 2)
    # = 2.4e-4 per party, so the four parties' summed noise exceeds 4 * 30 * 2.4e-4 = 0.029 with probability
    # < 4 e^-30 per cell; counts are exact (discrete Laplace of scale 4e-6) and at least min_count = 1 where
    # used, so each arm mean moves by < 0.029, the ATT by < 0.058, and two runs differ by < 0.116.
    common = ["simulate", "adum", "--rows", "4", "--epsilon", "1e6", "--outcome-range", "0", "60"]
    assert main([*common, "--out", str(tmp_path / "local")]) == 0
    assert main([*common, "--transport", "grpc", "--out", str(tmp_path / "grpc")]) == 0
    local, remote = _report(tmp_path / "local"), _report(tmp_path / "grpc")
    assert local["privacy"] == remote["privacy"] and local["cells"][0].keys() == remote["cells"][0].keys()
    est = [r["estimates"]["eps-adum"]["estimate"] for r in (local, remote)]
    assert est[0] == pytest.approx(est[1], abs=0.116)


def test_simulate_dcqe_with_balance_epsilon_runs_the_study_with_dp_moments_charged_to_each_party(tmp_path, capsys):
    out = tmp_path / "balance"
    args = ["simulate", "--dataset", "dcqe-synthetic", "--balance-epsilon", "2", "--balance-delta", "1e-6"]
    grid = ["--columns", "x1,x2;x3,x4,x5,x6", "--party-components", "1"]
    assert main([*args, *grid, "--bootstrap", "0", "--interval", "analytic", "--out", str(out)]) == 0
    report = _report(out)
    assert list(report["smd_unweighted"]) == ["p11:x1", "p11:x2", "p12:x3", "p12:x4", "p12:x5", "p12:x6"]
    # psm and ipw weights plus the unweighted sample: 3 dp_weighted_moments requests per party, (2, 1e-6) each
    for party in ("p11", "p12", "p21", "p22"):
        assert report["privacy"][party] == pytest.approx({"epsilon": 6.0, "delta": 3e-6})
    assert report["smd_noise_sd"]["ipw"].keys() == report["smd"]["ipw"].keys()
    assert any("-DP per request" in w for w in report["warnings"])
    # plain DC-QE beside DP moments: the policy opts out explicitly and the report says so (issue 22, item 6)
    assert any("allow_plain_with_dp = true) and its guarantee is none" in w for w in report["warnings"])
    assert "ATE psm:" in capsys.readouterr().out


def test_simulate_cate_with_balance_epsilon_charges_the_parties_only_for_their_dp_moments(tmp_path):
    out = tmp_path / "cate-balance"
    args = ["simulate", "cate", "--dataset", "dcqe-synthetic", "--epsilon", "5", "--outcome-range", "-8", "8"]
    assert main([*args, "--balance-epsilon", "50", "--out", str(out)]) == 0
    report = _report(out)
    assert report["privacy"].pop("analyst study ledger (rows of X^)") == {"epsilon": 5.0, "delta": 1e-5}
    # DC-QE's balance moments: psm, ipw and the unweighted sample, (50, 1e-6) per request
    spend = pytest.approx({"epsilon": 150.0, "delta": 3e-6})
    assert report["privacy"] == dict.fromkeys(("p11", "p12", "p21", "p22"), spend)
    assert report["smd_unweighted_noise_sd"].keys() == report["smd_unweighted"].keys()


@pytest.mark.slow
def test_simulate_dcqe_with_balance_over_grpc_charges_the_party_processes_as_in_process(tmp_path):
    common = ["simulate", "--dataset", "dcqe-synthetic", "--balance-epsilon", "20", "--bootstrap", "0",
              "--interval", "analytic"]
    assert main([*common, "--out", str(tmp_path / "local")]) == 0
    assert main([*common, "--transport", "grpc", "--out", str(tmp_path / "grpc")]) == 0
    local, remote = _report(tmp_path / "local"), _report(tmp_path / "grpc")
    spend = {"epsilon": 60.0, "delta": 3e-06}
    assert remote["privacy"] == local["privacy"] == {p: spend for p in ("p11", "p12", "p21", "p22")}
    # the DC-QE part is seeded: the same estimates bit for bit; the moments' noise (and MASMD) is not (OS entropy)
    for name, row in local["estimates"].items():
        assert (row["estimate"], row["se"]) == (remote["estimates"][name]["estimate"], remote["estimates"][name]["se"])
    assert remote["smd_noise_sd"].keys() == local["smd_noise_sd"].keys() == {"psm", "ipw"}


# flag -> (kind and other options it needs, study.toml section, key, a TOML value); the CLI is given the
# TOML value in its one grammar: a list as comma-separated items (a list of lists: lists separated by ';')
FLAG_KEYS = {
    "--epsilon": ("adum", [], "adum", "epsilon", 0.5),
    "--outcome-range": ("cate", [], "cate", "outcome_range", [0.0, 60.0]),
    "--partition-columns": ("adum", ["--cells", "4,4"], "adum", "columns", ["age", "education"]),
    "--cells": ("adum", ["--partition-columns", "age,education"], "adum", "cells", [4, 4]),
    "--kmeans": ("adum", [], "adum", "kmeans_clusters", 8),
    "--delta": ("cate", [], "cate", "delta", 1e-6),
    "--learner": ("cate", [], "cate", "learner", "dr"),
    "--feature-bound": ("cate", [], "cate", "feature_bound", 0.3),
    "--pairs": ("discovery", [], "discovery", "pairs", [["age", "re74"], ["education", "re75"]]),
    "--release": ("discovery", [], "discovery", "release", "vote"),
    "--group-size": ("discovery", [], "discovery", "group_size", 50),
    "--rule": ("discovery", [], "discovery", "rule", "krr"),
    "--balance-epsilon": ("dcqe", [], "balance", "epsilon", 2.0),
    "--balance-delta": ("dcqe", ["--balance-epsilon", "1"], "balance", "delta", 1e-7),
    "--estimators": ("dcqe", ["--balance-epsilon", "1"], "study", "estimators", ["psm", "ipw"]),
    "--estimand": ("dcqe", ["--balance-epsilon", "1"], "study", "estimand", "ate"),
    "--party-components": ("dcqe", ["--balance-epsilon", "1"], "study", "party_components", 2),
    "--anchors": ("dcqe", ["--balance-epsilon", "1"], "study", "n_anchors", 500),
    "--bootstrap": ("dcqe", ["--balance-epsilon", "1"], "study", "bootstrap", 5),
    "--interval": ("dcqe", ["--balance-epsilon", "1"], "study", "interval", "analytic"),
    "--seed": ("dcqe", ["--balance-epsilon", "1"], "study", "seed", 3),
    "--trim": ("dp_effects", [], "dp_effects", "trim", 0.05),
    "--nuisance": ("dp_effects", [], "dp_effects", "nuisance", "site"),
    "--modifiers": ("dp_effects", [], "dp_effects", "modifiers", ["age", "re74"]),
    "--subgroups": ("dp_effects", [], "dp_effects", "subgroups", {"age": [17.0, 30.0, 55.0], "black": [0.0, 0.5, 1.0]}),
    "--simultaneous": ("dp_effects", [], "dp_effects", "simultaneous", "bonferroni"),
    "--projection-clip": ("dp_effects", [], "dp_effects", "projection_clip", 2.0),
    "--projection-centre": ("dp_effects", [], "dp_effects", "projection_centre", 1.0),
    "--residual-clip": ("dp_effects", [], "dp_effects", "residual_clip", 0.25),
    "--clip-compensation": ("dp_effects", ["--projection-clip", "2"], "dp_effects", "clip_compensation", 0.1),
    "--cross-weight": ("dp_effects", [], "dp_effects", "cross_weight", 2.0),
    "--replicate-step": ("dp_effects", [], "dp_effects", "replicate_step", 3.0),
}
# switches (no value): flag -> (kind, section, key, the value the flag sets)
SWITCH_KEYS = {
    "--secure-aggregation": ("dp_effects", "dp_effects", "secure_aggregation", True),
    "--no-secure-aggregation": ("dp_effects", "dp_effects", "secure_aggregation", False),
}
NOT_STUDY_KEYS = {
    "--dataset", "--data", "--covariates", "--treatment", "--outcome", "--benchmark",  # the data set simulated
    "--rows", "--row-rule", "--columns",  # the grid the data set is split into (study.toml lists its parties)
    "--settings", "--components", "--jobs",  # paper 003's table of settings, not a study
    "--transport", "--quiet", "--out", "--help",  # how the simulation runs and where it writes
}


def _cli_text(value) -> str:
    if isinstance(value, dict):
        return ";".join(f"{k}={_cli_text(v)}" for k, v in value.items())
    if isinstance(value, list):
        return ";".join(map(_cli_text, value)) if value and isinstance(value[0], list) else ",".join(map(str, value))
    return str(value)


def test_every_simulate_flag_is_a_study_toml_key_or_declared_otherwise():
    from collabcausal.cli import build_parser

    parser = build_parser("simulate")._subparsers._group_actions[0].choices["simulate"]
    flags = {s for a in parser._actions for s in a.option_strings if s.startswith("--")}
    assert flags == set(FLAG_KEYS) | set(SWITCH_KEYS) | NOT_STUDY_KEYS


def _simulated_doc(kind: str, argv: list[str]) -> dict:
    import argparse
    from pathlib import Path

    from collabcausal.analyst.config import StudyFile
    from collabcausal.cli import build_parser
    from collabcausal.commands.simulate import _dataset
    from collabcausal.commands.simulate_kinds import kind_options, simulated_study
    from collabcausal.commands.simulate_options import column_groups
    from collabcausal.simulations.partition import partition_grid

    args: argparse.Namespace = build_parser("simulate").parse_args(["simulate", kind, *argv])
    args = kind_options(args)
    dataset = _dataset(args)
    columns = column_groups(args) if kind in ("dcqe", "cate") else [dataset.covariates]
    partition = partition_grid(dataset, args.rows, column_groups=columns, seed=args.seed)
    doc = simulated_study(args, dataset, partition, ledger=Path("ledger.sqlite"))
    StudyFile.model_validate(doc)
    return doc


@pytest.mark.parametrize("flag", sorted(SWITCH_KEYS))
def test_a_simulate_switch_sets_its_study_toml_key(flag):
    kind, section, key, value = SWITCH_KEYS[flag]
    assert _simulated_doc(kind, [flag])[section][key] is value


@pytest.mark.parametrize("flag", sorted(FLAG_KEYS))
def test_a_simulate_flag_takes_the_value_its_study_toml_key_takes(flag):
    """One grammar (issue 22, item 4): the CLI accepts the TOML value, written with comma-separated lists."""
    import tomllib

    kind, extra, section, key, value = FLAG_KEYS[flag]
    text = ("{" + ", ".join(f"{k} = {json.dumps(v)}" for k, v in value.items()) + "}" if isinstance(value, dict)
            else json.dumps(value))  # a TOML inline table for a mapping
    assert tomllib.loads(f"[{section}]\n{key} = {text}")[section][key] == value  # a study.toml line
    assert _simulated_doc(kind, [*extra, flag, _cli_text(value)])[section][key] == value


def test_simulate_dp_effects_over_grpc_gives_the_in_process_numbers(tmp_path):
    """Secure aggregation in both: throwaway identities in process, the mutual-TLS certificates over gRPC.

    The DP noise is fresh in each run (OS entropy): estimates must agree within 8 sds of the difference of
    their stated noise (two-sided tail 1e-15; the statistics' noise, at half the study's zCDP rho, moves the
    nuisances by far less). The two releases compose in zCDP to the study's (epsilon, delta) per party.
    """
    common = ["simulate", "dp_effects", "--dataset", "dcqe-synthetic", "--rows", "2", "--epsilon", "1e4",
              "--estimand", "att"]
    assert main([*common, "--out", str(tmp_path / "local")]) == 0
    assert main([*common, "--transport", "grpc", "--out", str(tmp_path / "grpc")]) == 0
    local, remote = _report(tmp_path / "local"), _report(tmp_path / "grpc")
    stated = {"epsilon": 1e4, "delta": 1e-6, "rho": zcdp_rho(1e4, 1e-6)}
    assert local["privacy"] == remote["privacy"] == {p: pytest.approx(stated, rel=1e-9) for p in ("p11", "p21")}
    assert all(p["epsilon"] <= 1e4 for p in local["privacy"].values())
    assert set(local["estimates"]) == set(remote["estimates"]) == {"aipw-att"}  # the default estimator: AIPW
    assert local["row_groups"] == [["p11"], ["p21"]] and "column_groups" not in local["dp_effects"]  # horizontal
    a, b = local["estimates"]["aipw-att"], remote["estimates"]["aipw-att"]
    assert abs(a["estimate"] - b["estimate"]) < 8 * (a["noise_var"] + b["noise_var"]) ** 0.5
    assert local["dp_effects"]["secure_aggregation"] is remote["dp_effects"]["secure_aggregation"] is True
    assert local["per_party"] == remote["per_party"] == {}


# what each run reads besides the data set, --rows, --row-rule, --seed, --transport and --out (issue 38, item 2)
_DCQE_STUDY = {"--columns", "--estimand", "--estimators", "--party-components", "--anchors", "--bootstrap",
               "--interval", "--balance-epsilon", "--balance-delta"}
READS = {
    "dcqe": _DCQE_STUDY | {"--settings", "--components", "--jobs", "--benchmark"},
    "adum": {"--estimand", "--epsilon", "--outcome-range", "--partition-columns", "--cells", "--kmeans"},
    "cate": {"--columns", "--estimand", "--party-components", "--anchors", "--epsilon", "--delta", "--outcome-range",
             "--learner", "--feature-bound", "--balance-epsilon", "--balance-delta"},
    "discovery": {"--epsilon", "--pairs", "--release", "--group-size", "--rule"},
    "dp_effects": {"--columns", "--estimand", "--epsilon", "--delta", "--outcome-range", "--trim", "--nuisance",
                   "--secure-aggregation", "--no-secure-aggregation", "--modifiers", "--subgroups", "--simultaneous",
                   "--projection-clip", "--projection-centre", "--residual-clip", "--clip-compensation",
                   "--cross-weight", "--replicate-step"},
}
EVERY_KIND = {"--dataset", "--data", "--covariates", "--treatment", "--outcome", "--rows", "--row-rule", "--seed",
              "--transport", "--out", "--quiet", "--help"}
# a value each flag accepts (a refusal must not be the parser's own)
VALUES = {
    "--columns": ["age,education;re74,re75"], "--estimand": ["ate"], "--estimators": ["psm"],
    "--party-components": ["2"], "--anchors": ["100"], "--bootstrap": ["5"], "--interval": ["analytic"],
    "--settings": ["W,CA"], "--components": ["W-clb=2"], "--jobs": ["1"], "--benchmark": ["1.5"],
    "--epsilon": ["1"], "--delta": ["1e-6"], "--outcome-range": ["0,60"], "--partition-columns": ["age"],
    "--cells": ["4"], "--kmeans": ["4"], "--learner": ["dr"], "--feature-bound": ["0.3"], "--pairs": ["age,re74"],
    "--trim": ["0.05"], "--nuisance": ["site"], "--secure-aggregation": [], "--no-secure-aggregation": [],
    "--balance-epsilon": ["1"], "--balance-delta": ["1e-7"], "--modifiers": ["age"], "--subgroups": ["age=17,30,55"],
    "--simultaneous": ["bonferroni"], "--projection-clip": ["2"], "--projection-centre": ["1"],
    "--residual-clip": ["0.25"], "--clip-compensation": ["0.1"], "--cross-weight": ["2"], "--replicate-step": ["3"],
    "--release": ["vote"],
    "--group-size": ["50"],
    "--rule": ["krr"],
}


def _unread() -> list[tuple[str, str]]:
    return [(kind, flag) for kind, reads in READS.items() for flag in sorted(set(VALUES) - reads)]


def test_every_simulate_flag_is_listed_as_read_by_every_kind_or_by_some():
    from collabcausal.analyst.kinds import KINDS
    from collabcausal.cli import build_parser

    parser = build_parser("simulate")._subparsers._group_actions[0].choices["simulate"]
    flags = {s for a in parser._actions for s in a.option_strings if s.startswith("--")}
    assert set(READS) == set(KINDS)
    assert flags == EVERY_KIND | set(VALUES)


@pytest.mark.parametrize(("kind", "flag"), _unread())
def test_an_option_the_kind_does_not_read_is_refused_in_one_line_and_writes_nothing(tmp_path, capsys, kind, flag):
    out = tmp_path / "out"
    assert main(["simulate", kind, flag, *VALUES[flag], "--out", str(out)]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    named = flag.replace("--no-", "--")  # the option, however it is switched
    assert len(err) == 1 and f"{named} is not an option of simulate {kind}" in err[0]
    assert "; fix: use it with simulate" in err[0]
    assert not out.exists()


@pytest.mark.parametrize("transport", ["inprocess", pytest.param("grpc", marks=pytest.mark.slow)])  # grpc: three below
def test_dp_effects_with_columns_runs_the_split_it_names(tmp_path, transport):
    """Issue 38 item 2 / issue 36: ``--columns "age,sex;bmi,sbp" --rows 1`` ran one party holding every column; now the
    first column group holds T and Y, the second only its covariates, and the report says who held what."""
    import json

    out = tmp_path / "out"
    argv = ["simulate", "dp_effects", "--data", "examples/cohort/cohort.csv", "--covariates", "age,sex,bmi,sbp",
            "--treatment", "statin", "--outcome", "event", "--columns", "age,sex;bmi,sbp", "--rows", "1",
            "--epsilon", "4", "--transport", transport, "--quiet", "--out", str(out)]
    assert main(argv) == 0
    report = json.loads((out / "report.json").read_text())
    assert report["row_groups"] == [["p11", "p12"]]
    assert report["dp_effects"]["column_groups"] == {"p11": ["age", "sex"], "p12": ["bmi", "sbp"]}
    assert report["dp_effects"]["label_holders"] == ["p11"]
    row = report["estimates"]["aipw-ate"]
    assert row["ci_low"] < row["estimate"] < row["ci_high"] and row["se"] > 0
    assert set(report["privacy"]) == {"p11", "p12"}
    assert all(abs(v["epsilon"] - 4.0) < 1e-6 for v in report["privacy"].values())
    assert "covariates each party holds" in (out / "report.html").read_text()
    assert any("align = false" in w for w in report["warnings"])  # a simulation's rows are aligned by construction


def test_dp_effects_with_three_column_groups_runs_over_grpc(tmp_path):
    """Issue 36: three parties holding different covariates of the cohort's subjects, each its own process behind
    mutual TLS: every party is charged, the report names each one's columns and the sealed ciphertexts relayed."""
    import json

    out = tmp_path / "out"
    argv = ["simulate", "dp_effects", "--data", "examples/cohort/cohort.csv", "--covariates", "age,sex,bmi,sbp",
            "--treatment", "statin", "--outcome", "event", "--columns", "age,sex;bmi;sbp", "--rows", "1",
            "--epsilon", "4", "--transport", "grpc", "--quiet", "--out", str(out)]
    assert main(argv) == 0
    report = json.loads((out / "report.json").read_text())
    assert report["dp_effects"]["column_groups"] == {"p11": ["age", "sex"], "p12": ["bmi"], "p13": ["sbp"]}
    row = report["estimates"]["aipw-ate"]
    assert row["ci_low"] < row["estimate"] < row["ci_high"] and row["se"] > 0
    assert all(abs(v["epsilon"] - 4.0) < 1e-6 for v in report["privacy"].values()) and len(report["privacy"]) == 3
    assert report["dp_effects"]["relayed_bytes"]["scores: sealed parts"] > 0


def test_simulate_dp_effects_refuses_the_600_subject_cohort_at_eps_1_naming_what_would_pass(tmp_path, capsys):
    """issue 38: too small a study for its budget is refused before any charge (exit 3), nothing written."""
    from pathlib import Path

    cohort = Path(__file__).resolve().parents[2] / "examples" / "cohort" / "cohort.csv"
    out = tmp_path / "refused"
    args = ["simulate", "dp_effects", "--data", str(cohort), "--covariates", "age,sex,bmi,sbp", "--treatment",
            "statin", "--outcome", "event", "--rows", "4", "--epsilon", "1", "--outcome-range", "0,1", "--out",
            str(out)]
    assert main(args) == 3
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "too small a study for its budget" in err
    assert "raise [dp_effects] epsilon to" in err and "or give every party" in err
    assert not out.exists()


def test_simulate_dp_effects_prints_the_effect_modification_beside_the_ate(tmp_path, capsys):
    """The projection's coefficients and the subgroup effects reach the terminal, not only report.json; a negative
    outcome range written LO,HI (study.toml's [-2, 8]) is the option's value."""
    from pathlib import Path

    cohort = Path(__file__).resolve().parents[2] / "examples" / "cohort" / "cohort.csv"
    args = ["simulate", "dp_effects", "--data", str(cohort), "--covariates", "age,sex,bmi,sbp", "--treatment",
            "statin", "--outcome", "event", "--rows", "2", "--epsilon", "16", "--outcome-range", "-2,8",
            "--modifiers", "age", "--subgroups", "sex=0,0.5,1", "--out", str(tmp_path / "out")]
    assert main(args) == 0
    out = capsys.readouterr().out
    lines = [line for line in out.splitlines() if line.startswith("effect modification (DP), ")]
    assert [line.split(":")[0] for line in lines] == [
        "effect modification (DP), projection at the midpoints", "effect modification (DP), slope",
        "effect modification (DP), sex in [0, 0.5)", "effect modification (DP), sex in [0.5, 1]"]
    assert all("95% CI [" in line for line in lines)
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["effect_modification"]["modifiers"] == ["age"]
