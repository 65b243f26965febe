"""``collabcausal discover`` says "undecided" when the evidence does not name a direction."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from collabcausal.cli import main
from collabcausal.estimators.discovery.decision import release_probability

COHORT = Path(__file__).resolve().parents[2] / "examples" / "cohort" / "cohort.csv"
INDEPENDENT = ["--x", "age", "--y", "dose", "--x-bounds", "40", "80", "--y-bounds", "0", "100"]
ANM = ["--x", "dose", "--y", "response", "--x-bounds", "0", "100", "--y-bounds", "-5", "5"]


def _json(capsys, *argv, data: Path = COHORT) -> dict:
    assert main(["discover", "--data", str(data), *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_a_private_release_inside_its_noise_is_undecided_with_its_probability(capsys, tmp_path) -> None:
    reply = _json(capsys, *INDEPENDENT, "--regularization", "1", "--epsilon", "1", "--budget", "1",
                  "--ledger", str(tmp_path / "l.sqlite"))
    # the DP noise is OpenDP's (not seeded): check the rule, not one draw's outcome
    margin = reply["score_yx"] - reply["score_xy"]
    assert reply["probability"] == pytest.approx(release_probability(margin, reply["noise_scale"]))
    assert (reply["decision"] == "undecided") == (reply["probability"] < 0.95)
    assert reply["direction"] in ("x->y", "y->x")  # the released (favoured) side, as before


def test_the_exact_test_names_the_cause_and_no_direction_for_independent_columns(capsys, tmp_path) -> None:
    data = tmp_path / "cohort.csv"
    shutil.copy(COHORT, data)
    exact = _json(capsys, *ANM, "--epsilon", "1", "--protect", "none", data=data)
    assert exact["decision"] == "x->y" and exact["p_xy"] > 0.05 >= exact["p_yx"] and exact["charged"] is False
    assert _json(capsys, *INDEPENDENT, "--epsilon", "1", "--protect", "none", data=data)["decision"] == "undecided"
    assert main(["discover", "--data", str(data), *INDEPENDENT, "--epsilon", "1", "--protect", "none"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("direction: undecided (") and "NOT private" in out and "nothing charged" in out
    assert [p.name for p in tmp_path.iterdir()] == ["cohort.csv"]  # no ledger: nothing charged


def test_the_exact_test_is_refused_through_a_party(capsys, tmp_path) -> None:
    config = tmp_path / "party.toml"
    config.write_text("")
    code = main(["discover", "--config", str(config), *ANM, "--epsilon", "1", "--protect", "none"])
    assert code == 2 and "--protect none does not go with --config" in capsys.readouterr().err


def test_the_text_report_names_the_decision_given_the_dp_noise(capsys, tmp_path) -> None:
    argv = ["discover", "--data", str(COHORT), *INDEPENDENT, "--regularization", "1", "--epsilon", "1"]
    assert main([*argv, "--budget", "1", "--ledger", str(tmp_path / "l.sqlite")]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith("direction: ") and "probability " in first and first.endswith("(given the DP noise)")
