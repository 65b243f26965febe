"""study.toml: roster, plan, and one-line errors naming the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from collabcausal.analyst.config import load_study_config
from collabcausal.errors import ConfigError

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "lalonde-2x2" / "study.toml"


def _write(tmp_path, text):
    path = tmp_path / "study.toml"
    path.write_text(text)
    return path


def test_example_study_gives_roster_and_plan():
    config = load_study_config(EXAMPLE)
    assert config.roster == ("p11", "p12", "p21", "p22") and config.study == "lalonde-2x2"
    plan = config.plan()
    assert plan.row_groups == (("p11", "p12"), ("p21", "p22")) and plan.estimand == "att"
    assert plan.n_anchors == 2675 and plan.seed == 0 and plan.study == "lalonde-2x2"
    assert config.server.ca == EXAMPLE.parent / "certs" / "ca.pem" and config.on_missing_party == "fail"


def test_plan_without_a_missing_party_drops_it_and_groups_without_their_label_holder():
    plan = load_study_config(EXAMPLE).plan(["p11", "p21", "p22"])
    assert plan.row_groups == (("p11",), ("p21", "p22"))
    plan = load_study_config(EXAMPLE).plan(["p12", "p21", "p22"])
    assert plan.row_groups == (("p21", "p22"),)


@pytest.mark.parametrize(
    ("old", "new", "match"),
    [
        ('on_missing_party = "fail"', 'on_missing_party = "maybe"', "on_missing_party"),
        ('id = "lalonde-2x2"', "", r"\[study\] id is missing"),
        ('key = "certs/analyst.key"', "", r"\[server\] key is missing"),
        ('parties = ["p21", "p22"]', 'parties = ["p21", "p11"]', "two row groups"),
        ('parties = ["p21", "p22"]', 'parties = ["p21"]\nlabel_holder = "zz"', "label_holder 'zz'"),
        ("[anchor_ranges]", "[anchor_rangez]", r"\[anchor_ranges\] is missing"),
    ],
)
def test_bad_study_is_one_config_error(tmp_path, old, new, match):
    text = EXAMPLE.read_text()
    assert old in text
    with pytest.raises(ConfigError, match=match):
        load_study_config(_write(tmp_path, text.replace(old, new)))


@pytest.mark.parametrize(
    ("old", "new", "match"),
    [
        ('estimators = ["psm", "ipw"]', 'estimator = ["psm"]', r"unknown key \[study\] estimator; fix: did you mean"),
        ('estimators = ["psm", "ipw"]', 'estimators = ["psn"]', r"\[study\] estimators = \['psn'\] is invalid"),
        ("n_anchors = 2675", "n_anchors = 0", r"\[study\] n_anchors = 0 is invalid"),
        ("seed = 0", "seed = -1", r"\[study\] seed = -1 is invalid"),
        ("party_components = 3", "party_components = 0", "party_components"),
        ("task_timeout = 600", 'task_timeout = "600"', r"\[study\] task_timeout = '600' is invalid"),
        ("age = [17.0, 55.0]", "age = [55.0, 17.0]", "range of 'age' must be"),
        ('parties = ["p21", "p22"]', "parties = []", r"\[row_groups\[1\]\] parties = \[\] is invalid"),
        ('estimand = "att"', 'estimand = "atc"', r"\[study\] estimand = 'atc' is invalid"),
    ],
)
def test_typos_and_out_of_range_values_are_refused_in_one_line(tmp_path, old, new, match):
    text = EXAMPLE.read_text()
    assert old in text
    with pytest.raises(ConfigError, match=match) as info:
        load_study_config(_write(tmp_path, text.replace(old, new, 1)))
    assert "\n" not in str(info.value)


def test_example_study_ships_an_interval_valid_for_each_of_its_estimators():
    """The shipped example follows the project's advice: no estimator gets an interval caveat."""
    from collabcausal.estimators.intervals import interval_caveat

    config = load_study_config(EXAMPLE)
    estimators = config.plan().estimators
    assert "psm" in estimators
    assert [interval_caveat(name, config.interval) for name in estimators] == [None] * len(estimators)
