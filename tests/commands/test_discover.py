"""``collabcausal discover``: private ANM on a file or through a party, one ledger per dataset."""

import json

import numpy as np
import pandas as pd
import pytest

from collabcausal.cli import main
from collabcausal.ledger import PrivacyLedger
from collabcausal.party.config import load_party_config

BOTH = ["--x", "dose", "--y", "resp", "--x-bounds", "-4", "4", "--y-bounds", "-2", "2", "--regularization", "1"]


@pytest.fixture
def data(tmp_path):
    rng = np.random.default_rng(0)
    x = rng.normal(size=400)
    frame = pd.DataFrame({"dose": x, "resp": np.tanh(2 * x) + 0.2 * rng.normal(size=400), "flat": 1.0})
    path = tmp_path / "pairs.csv"
    frame.to_csv(path, index=False)
    return path


def run(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_every_row_protected_by_default_and_charged_to_the_ledger_next_to_the_data(capsys, data):
    code, out, _ = run(capsys, "discover", "--data", str(data), *BOTH, "--epsilon", "1", "--budget", "3")
    assert code == 0
    assert out.startswith("direction: ") and "every row protected" in out and "budget left: epsilon=2" in out
    ledger = PrivacyLedger.from_file(data.with_name("pairs.csv.ledger.sqlite"), "pairs.csv")
    assert ledger.spent() == (1.0, 0.0)


def test_repeated_runs_add_up_until_the_budget_refuses(capsys, data):
    argv = ["discover", "--data", str(data), *BOTH, "--epsilon", "1", "--json"]
    assert run(capsys, *argv, "--budget", "2")[0] == 0
    code, out, _ = run(capsys, *argv)  # stored budget reused
    assert code == 0 and json.loads(out)["remaining_budget"] == [0.0, 0.0]
    code, _, err = run(capsys, *argv)
    assert code == 5 and "has epsilon=0, delta=0 left" in err


def test_the_margin_release_prints_the_margin_alone_and_its_probability(capsys, data):
    argv = ["discover", "--data", str(data), *BOTH, "--epsilon", "1", "--budget", "3", "--release", "margin"]
    code, out, _ = run(capsys, *argv, "--json")
    reply = json.loads(out)
    assert code == 0 and reply["form"] == "margin" and reply["score_xy"] is None
    # one Lap(b) on the margin: P(favoured right) = 1 - exp(-|margin| / b) / 2
    assert reply["probability"] == pytest.approx(1 - np.exp(-abs(reply["margin"]) / reply["noise_scale"]) / 2)
    assert reply["direction"] == ("x->y" if reply["margin"] > 0 else "y->x")
    code, out, _ = run(capsys, *argv)
    assert code == 0 and "private hsic margin: s(resp->dose) - s(dose->resp) = " in out and "score_xy" not in out
    code, out, _ = run(capsys, *argv, "--score", "kendall", "--protect", "test")  # Laplace on two scores: has one
    assert code == 0 and "private kendall margin" in out and "nothing charged" in out
    code, _, err = run(capsys, *argv, "--score", "iqr", "--protect", "test", "--delta", "1e-6")
    assert code == 2 and "the iqr release protecting 'test' has no margin-only form" in err and err.count("\n") == 1
    ledger = PrivacyLedger.from_file(data.with_name("pairs.csv.ledger.sqlite"), "pairs.csv")
    assert [c.details["release"] for c in ledger.history()] == ["margin", "margin"]


def test_a_split_protected_release_is_labelled_not_dp_and_charges_nothing(capsys, data, tmp_path):
    ledger = tmp_path / "my.sqlite"
    argv = ["discover", "--data", str(data), "--x", "dose", "--y", "resp", "--score", "kendall", "--epsilon", "2"]
    code, out, _ = run(capsys, *argv, "--protect", "test", "--ledger", str(ledger), "--budget", "5", "--json")
    reply = json.loads(out)
    assert code == 0 and not ledger.exists() and not data.with_name("pairs.csv.ledger.sqlite").exists()
    assert reply["charged"] is False and reply["remaining_budget"] is None
    assert reply["score"] == "kendall" and reply["protect"] == "test" and reply["m_test"] == 200
    assert reply["direction"] in ("x->y", "y->x") and reply["noise_scale"] == pytest.approx(2 * 4 / 200 / 2)
    code, out, _ = run(capsys, *argv, "--protect", "test")
    assert code == 0 and "NOT differentially private for the dataset" in out and "nothing charged" in out


def test_propose_test_release_refusal_exits_with_no_answer(capsys, data):
    argv = ["--x", "dose", "--y", "resp", "--score", "iqr", "--protect", "test", "--epsilon", "0.5", "--delta", "1e-6"]
    code, _, err = run(capsys, "discover", "--data", str(data), *argv)
    assert code == 10 and "declined to answer" in err


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--x", "dose", "--y", "flat", "--epsilon", "1", "--protect", "test"], "'flat' is constant"),
        (["--x", "dose", "--y", "nope", "--epsilon", "1", "--protect", "test"], "unknown column 'nope'"),
        (["--x", "dose", "--y", "resp", "--epsilon", "0"], "epsilon must be a finite number > 0"),
        (["--x", "dose", "--y", "resp", "--epsilon", "-1"], "epsilon must be a finite number > 0"),
        (["--x", "dose", "--y", "resp", "--epsilon", "1"], "needs public bounds"),
        (["--x", "dose", "--y", "resp", "--epsilon", "1", "--score", "iqr", "--protect", "test"], "needs --delta > 0"),
        ([*BOTH, "--epsilon", "1", "--test-size", "0.02"], "fewer than the minimum 10"),
    ],
)
def test_bad_input_gives_a_one_line_error_and_exit_code_2(capsys, data, extra, message):
    code, _, err = run(capsys, "discover", "--data", str(data), "--budget", "5", *extra)
    assert code == 2 and message in err and err.count("\n") == 1


def test_non_finite_values_are_refused(capsys, tmp_path):
    path = tmp_path / "bad.csv"
    pd.DataFrame({"a": [1.0, np.inf, *range(20)], "b": np.arange(22.0)}).to_csv(path, index=False)
    argv = ["--x", "a", "--y", "b", "--x-bounds", "0", "20", "--y-bounds", "0", "22", "--epsilon", "1"]
    code, _, err = run(capsys, "discover", "--data", str(path), *argv, "--budget", "1")
    assert code == 2 and "NaN or infinite" in err


def test_missing_budget_and_ledger_is_explained(capsys, data):
    code, _, err = run(capsys, "discover", "--data", str(data), *BOTH, "--epsilon", "1")
    assert code == 2 and "--budget" in err


def _party_toml(tmp_path, data, ledger_line=""):
    config = tmp_path / "party.toml"
    config.write_text(
        f'[party]\nname = "h1"\nstudy = "s1"\n[analyst]\naddress = "localhost:1"\ninsecure = true\n'
        f'[data]\npath = "{data.name}"\n'
        f'[policy]\ncolumns = ["dose", "resp"]\noperations = ["dp_discover"]\nmin_subjects = 10\n'
        f"[privacy]\nepsilon = 3.0\n{ledger_line}"
    )
    return config


def test_the_cli_and_the_party_spend_one_budget_for_the_same_data(capsys, data, tmp_path):
    assert run(capsys, "discover", "--data", str(data), *BOTH, "--epsilon", "1", "--budget", "3")[0] == 0
    config = _party_toml(tmp_path, data)
    party = load_party_config(config).build_party()
    assert party.ledger.spent() == (1.0, 0.0)  # the party sees the CLI's charge
    code, out, _ = run(capsys, "discover", "--config", str(config), *BOTH, "--epsilon", "1.5", "--json")
    assert code == 0 and json.loads(out)["remaining_budget"] == [pytest.approx(0.5), 0.0]
    code, _, err = run(capsys, "discover", "--data", str(data), *BOTH, "--epsilon", "1")
    assert code == 5 and "left" in err
    second = party.ledger.history()[1]
    assert second.study == "s1" and second.details["columns"] == ["dose", "resp"]


def test_through_a_party_its_own_ledger_and_policy_apply(capsys, data, tmp_path):
    config = _party_toml(tmp_path, data, 'ledger = "own.sqlite"\n')
    code, _, err = run(capsys, "discover", "--config", str(config), *BOTH, "--epsilon", "1", "--budget", "2")
    assert code == 2 and "do not go with --config" in err
    code, _, err = run(capsys, "discover", "--config", str(config), *BOTH, "--epsilon", "1", "--protect", "test")
    assert code == 4 and "unprotected" in err
    assert run(capsys, "discover", "--config", str(config), *BOTH, "--epsilon", "1")[0] == 0
    assert PrivacyLedger.from_file(tmp_path / "own.sqlite").spent() == (1.0, 0.0)


def test_the_help_lists_exactly_the_scores_with_a_private_release() -> None:
    from collabcausal.commands.discover import SCORES
    from collabcausal.estimators.discovery.private_scores import PROTECTIONS

    assert set(SCORES) == {score for score, protections in PROTECTIONS.items() if protections}


@pytest.mark.parametrize(
    ("extra", "option"),
    [
        (["--test-size", "1.5"], "--test-size"),
        (["--regularization", "0"], "--regularization"),
        (["--delta", "2"], "--delta"),
        (["--x-bounds", "1", "0", "--y-bounds", "0", "1"], "--x-bounds"),
        (["--protect", "train"], "--protect train"),
        (["--score", "iqr"], "--protect"),
        ([], "--x-bounds"),
    ],
)
def test_errors_name_the_options_not_the_request_keywords(capsys, data, extra, option):
    """`test_size of dp_discover ...; fix: send test_size = ...` named the protocol, not the command."""
    code, _, err = run(capsys, "discover", "--data", str(data), "--budget", "5", "--x", "dose", "--y", "resp",
                       "--epsilon", "1", *extra)
    assert code == 2 and err.count("\n") == 1 and option in err, err
    for keyword in ("test_size", "regularization =", "delta=", "x_bounds", "protect=", "dp_discover", "send "):
        assert keyword not in err, err
