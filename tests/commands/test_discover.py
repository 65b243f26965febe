"""``collabcausal discover``: local private ANM on a file, charged to a ledger next to it."""

import json

import numpy as np
import pandas as pd
import pytest

from collabcausal.cli import main
from collabcausal.party.ledger import PrivacyLedger


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


def test_issue_example_runs_and_charges_the_default_ledger(capsys, data):
    code, out, _ = run(
        capsys,
        "discover",
        "--data",
        str(data),
        "--x",
        "dose",
        "--y",
        "resp",
        "--score",
        "hsic",
        "--epsilon",
        "1",
        "--budget",
        "3",
    )
    assert code == 0
    assert out.startswith("direction: ") and "test split's rows only" in out and "budget left: epsilon=2" in out
    ledger = PrivacyLedger.from_file(data.with_name("pairs.csv.ledger.sqlite"), "pairs.csv")
    assert ledger.spent() == (1.0, 0.0)


def test_repeated_runs_add_up_until_the_budget_refuses(capsys, data):
    argv = ["discover", "--data", str(data), "--x", "dose", "--y", "resp", "--epsilon", "1", "--json"]
    assert run(capsys, *argv, "--budget", "2")[0] == 0
    code, out, _ = run(capsys, *argv)  # stored budget reused
    assert code == 0 and json.loads(out)["remaining_budget"] == [0.0, 0.0]
    code, _, err = run(capsys, *argv)
    assert code == 5 and "has epsilon=0, delta=0 left" in err


def test_json_output_has_scores_and_protection(capsys, data, tmp_path):
    ledger = tmp_path / "my.sqlite"
    code, out, _ = run(
        capsys,
        "discover",
        "--data",
        str(data),
        "--x",
        "dose",
        "--y",
        "resp",
        "--score",
        "kendall",
        "--epsilon",
        "2",
        "--ledger",
        str(ledger),
        "--budget",
        "5",
        "--json",
    )
    reply = json.loads(out)
    assert code == 0 and ledger.is_file()
    assert reply["score"] == "kendall" and reply["protect"] == "test" and reply["m_test"] == 200
    assert reply["direction"] in ("x->y", "y->x") and reply["noise_scale"] == pytest.approx(2 * 4 / 200 / 2)


def test_both_splits_protected_with_public_bounds(capsys, data):
    code, out, _ = run(
        capsys,
        "discover",
        "--data",
        str(data),
        "--x",
        "dose",
        "--y",
        "resp",
        "--protect",
        "both",
        "--x-bounds",
        "-4",
        "4",
        "--y-bounds",
        "-2",
        "2",
        "--regularization",
        "1",
        "--epsilon",
        "1",
        "--budget",
        "1",
        "--json",
    )
    assert code == 0 and json.loads(out)["protect"] == "both"


def test_propose_test_release_refusal_exits_with_no_answer(capsys, data):
    code, _, err = run(
        capsys,
        "discover",
        "--data",
        str(data),
        "--x",
        "dose",
        "--y",
        "resp",
        "--score",
        "iqr",
        "--epsilon",
        "0.5",
        "--delta",
        "1e-6",
        "--budget",
        "1",
        "--budget-delta",
        "1e-5",
    )
    assert code == 10 and "declined to answer" in err


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--x", "dose", "--y", "flat", "--epsilon", "1"], "'flat' is constant"),
        (["--x", "dose", "--y", "nope", "--epsilon", "1"], "unknown column 'nope'"),
        (["--x", "dose", "--y", "resp", "--epsilon", "0"], "epsilon must be a finite number > 0"),
        (["--x", "dose", "--y", "resp", "--epsilon", "-1"], "epsilon must be a finite number > 0"),
        (["--x", "dose", "--y", "resp", "--epsilon", "1", "--protect", "both"], "needs public bounds"),
        (["--x", "dose", "--y", "resp", "--epsilon", "1", "--score", "iqr"], "needs delta > 0"),
        (["--x", "dose", "--y", "resp", "--epsilon", "1", "--test-size", "0.02"], "fewer than the minimum 10"),
    ],
)
def test_bad_input_gives_a_one_line_error_and_exit_code_2(capsys, data, extra, message):
    code, _, err = run(capsys, "discover", "--data", str(data), "--budget", "5", *extra)
    assert code == 2 and message in err and err.count("\n") == 1


def test_non_finite_values_are_refused(capsys, tmp_path):
    path = tmp_path / "bad.csv"
    pd.DataFrame({"a": [1.0, np.inf, *range(20)], "b": np.arange(22.0)}).to_csv(path, index=False)
    code, _, err = run(
        capsys, "discover", "--data", str(path), "--x", "a", "--y", "b", "--epsilon", "1", "--budget", "1"
    )
    assert code == 2 and "NaN or infinite" in err


def test_missing_budget_and_ledger_is_explained(capsys, data):
    code, _, err = run(capsys, "discover", "--data", str(data), "--x", "dose", "--y", "resp", "--epsilon", "1")
    assert code == 2 and "--budget" in err
