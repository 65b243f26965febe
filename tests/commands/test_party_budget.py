"""`collabcausal party budget`."""

from __future__ import annotations

import json

import pytest

from collabcausal.cli import main
from collabcausal.errors import BudgetExceededError
from collabcausal.estimators.dp.zcdp import zcdp_epsilon, zcdp_rho
from collabcausal.ledger import PrivacyLedger


@pytest.fixture()
def ledger_path(tmp_path):
    path = tmp_path / "budget.sqlite"
    ledger = PrivacyLedger(path, epsilon=2.0, delta=1e-6, dataset="hospital.csv")
    charge = ledger.charge("dp_histogram", 0.5, study="s1", details={"columns": ["age"]})
    ledger.annotate(charge.id, {"n_clipped": {"age": 2}})
    ledger.charge("dp_count", 0.25, study="s2", partition="splits", subset="a")
    return path


def test_budget_shows_spent_remaining_and_the_audit_trail(ledger_path, capsys):
    assert main(["party", "budget", "--ledger", str(ledger_path)]) == 0
    out = capsys.readouterr().out
    assert "dataset hospital.csv" in out
    assert "spent      epsilon=0.75" in out
    assert "remaining  epsilon=1.25" in out
    assert "dp_histogram" in out and "study=s1" in out and '"n_clipped"' in out
    assert "parallel splits/a" in out


def test_budget_shows_zcdp_charges_by_their_rho_and_their_composed_cost(tmp_path, capsys):
    path = tmp_path / "budget.sqlite"
    ledger = PrivacyLedger(path, epsilon=1.0, delta=1e-6, dataset="hospital.csv")
    rho = zcdp_rho(1.0, 1e-6)
    for op in ("dp_effects_statistics", "dp_effects_scores"):
        ledger.charge_zcdp(op, rho / 2, 5e-7, study="s")
    assert main(["party", "budget", "--ledger", str(path)]) == 0
    out = capsys.readouterr().out
    assert f"spent      epsilon={zcdp_epsilon(rho, 1e-6):.6g}" in out  # 1, not the two charges' 0.714 each
    assert out.count(f"zCDP rho={rho / 2:.6g} (alone epsilon={zcdp_epsilon(rho / 2, 5e-7):.6g}") == 2
    assert main(["party", "budget", "--ledger", str(path), "--json"]) == 0
    charges = json.loads(capsys.readouterr().out)[0]["charges"]
    assert [c["rho"] for c in charges] == [rho / 2, rho / 2]


def test_budget_json_and_config_file(ledger_path, tmp_path, capsys):
    config = tmp_path / "party.toml"
    config.write_text('[privacy]\nepsilon = 2.0\ndelta = 1e-6\nledger = "budget.sqlite"\n')
    assert main(["party", "budget", "--config", str(config), "--json"]) == 0
    (report,) = json.loads(capsys.readouterr().out)
    assert report["remaining"]["epsilon"] == pytest.approx(1.25)
    assert [c["operation"] for c in report["charges"]] == ["dp_histogram", "dp_count"]


@pytest.mark.parametrize(
    ("setup", "code", "message"),
    [
        (lambda p: ["--ledger", str(p / "missing.sqlite")], 2, "does not exist"),
        (lambda p: (p / "bad.sqlite").write_bytes(b"x" * 2048) and ["--ledger", str(p / "bad.sqlite")], 3, "corrupt"),
        (lambda p: (p / "c.toml").write_text("[privacy]\n") and ["--config", str(p / "c.toml")], 3, "ledger"),
        (lambda p: (p / "d.toml").write_text("not = = toml") and ["--config", str(p / "d.toml")], 3, "TOML"),
    ],
)
def test_budget_errors_are_one_line_with_exit_codes(tmp_path, capsys, setup, code, message):
    assert main(["party", "budget", *setup(tmp_path)]) == code
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_unknown_dataset_is_a_config_error(ledger_path, capsys):
    assert main(["party", "budget", "--ledger", str(ledger_path), "--dataset", "other"]) == 3
    assert "no dataset 'other'" in capsys.readouterr().err


def test_budget_names_the_relation_and_migrates_an_old_ledger_once(tmp_path, capsys, format_1_ledger):
    old = format_1_ledger(tmp_path / "old.sqlite", 3.0, [("dp_histogram", 0.5, None, None)])
    assert main(["party", "budget", "--ledger", str(old)]) == 3
    assert "--migrate" in capsys.readouterr().err
    assert main(["party", "budget", "--ledger", str(old), "--migrate", "--json"]) == 0
    (report,) = json.loads(capsys.readouterr().out)
    assert report["relation"] == "substitute-one"
    assert report["spent"]["epsilon"] == pytest.approx(1.0)


PARTY = '[party]\nname = "p11"\n[data]\npath = "p11.csv"\n'


def test_a_party_that_has_spent_nothing_is_told_so(tmp_path, capsys):
    """After a plain study the ledger does not exist yet: not an error, nothing spent."""
    config = tmp_path / "party.toml"
    config.write_text(PARTY + '[privacy]\nepsilon = 1.0\nledger = "ledger.sqlite"\n')
    assert main(["party", "budget", "--config", str(config)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("party p11 has spent nothing: no DP release yet")
    assert "epsilon=1" in out
    assert not (tmp_path / "ledger.sqlite").exists()  # reading the budget creates no ledger
    assert main(["party", "budget", "--config", str(config), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []


def test_a_party_without_a_privacy_section_is_told_it_answers_no_dp_query(tmp_path, capsys):
    config = tmp_path / "party.toml"
    config.write_text(PARTY)
    assert main(["party", "budget", "--config", str(config)]) == 0
    assert capsys.readouterr().out.startswith("party p11 has no [privacy] section: it answers no DP query")


def test_a_party_without_a_privacy_section_shows_the_ledger_discover_charged(tmp_path, capsys):
    """`discover --data p11.csv` charges the ledger beside the data: budget shows it."""
    config = tmp_path / "party.toml"
    config.write_text(PARTY)
    PrivacyLedger(tmp_path / "p11.csv.ledger.sqlite", epsilon=2.0, dataset="p11.csv").charge("discovery", 0.5)
    assert main(["party", "budget", "--config", str(config)]) == 0
    assert "spent      epsilon=0.5" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("operations", "opt_out", "expected"),
    [
        ('["describe", "dp_representation", "dp_weighted_moments"]', "false", "(1, 1e-06)-DP under substitution"),
        ('["describe", "dc_representation", "dp_weighted_moments"]', "true", "none: besides its DP operations"),
    ],
)
def test_budget_prints_the_partys_effective_guarantee(tmp_path, capsys, operations, opt_out, expected):
    """Issue 22, item 6: "none" when the policy answers an exact row-level operation beside DP ones."""
    config = tmp_path / "party.toml"
    policy = f'[policy]\ncolumns = ["a"]\noperations = {operations}\nallow_plain_with_dp = {opt_out}\n'
    config.write_text(PARTY + policy + '[privacy]\nepsilon = 1.0\ndelta = 1e-6\nledger = "ledger.sqlite"\n')
    assert main(["party", "budget", "--config", str(config)]) == 0
    assert f"effective guarantee: {expected}" in capsys.readouterr().out
    PrivacyLedger(tmp_path / "ledger.sqlite", epsilon=1.0, delta=1e-6, dataset="default").charge("dp_count", 0.5)
    assert main(["party", "budget", "--config", str(config), "--json"]) == 0
    (report,) = json.loads(capsys.readouterr().out)
    assert report["guarantee"].startswith(expected)


def test_a_budget_spent_to_its_rounding_residue_shows_0_left_and_the_next_request_what_it_needs(tmp_path, capsys):
    """Issue 38, item 7: zcdp_rho leaves 2.3e-9 of epsilon 4 unspent; that prints as 0, and a refusal says so."""
    path = tmp_path / "budget.sqlite"
    ledger = PrivacyLedger(path, epsilon=4.0, delta=1e-5, dataset="hospital.csv")
    rho = zcdp_rho(4.0, 1e-5)
    for op in ("dp_effects_statistics", "dp_effects_scores"):
        ledger.charge_zcdp(op, rho / 2, 5e-6, study="s")
    residue = 4.0 - ledger.spent()[0]
    assert 0.0 < residue < 4.0 * 1e-9  # what the conversion leaves, within the budget check's tolerance
    assert ledger.remaining() == (0.0, 0.0)
    assert main(["party", "budget", "--ledger", str(path)]) == 0
    assert "remaining  epsilon=0  delta=0\n" in capsys.readouterr().out
    with pytest.raises(BudgetExceededError) as refused:
        ledger.charge("dp_mean", 0.155532, study="s")
    assert refused.value.problem == (
        "privacy budget spent: dataset 'hospital.csv' has epsilon=0, delta=0 left of (4, 1e-05); "
        "'dp_mean' needs epsilon=0.155532, delta=0"
    )
    with pytest.raises(BudgetExceededError, match=r"'dp_mean' needs epsilon=[0-9.]+, delta=5e-07 \(zCDP rho=0\.1"):
        ledger.charge_zcdp("dp_mean", 0.1, 5e-7, study="s")
