"""What report.html and report.json of ``simulate KIND`` say (issue 38, items 6 and 8), read as text."""

from __future__ import annotations

import html
import json
import re

import pytest

from collabcausal.cli import main

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

COHORT = ["--data", "examples/cohort/cohort.csv", "--covariates", "age,sex,bmi,sbp", "--treatment", "statin",
          "--outcome", "event"]


def _page_text(folder) -> str:
    """report.html as a reader sees it: tags dropped, entities decoded, spaces collapsed."""
    page = (folder / "report.html").read_text()
    page = re.sub(r"<(script|style)\b.*?</\1>", " ", page, flags=re.S)
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", page)).split())


def _strict(folder) -> dict:
    return json.loads((folder / "report.json").read_text(), parse_constant=lambda name: pytest.fail(name))


@pytest.fixture(scope="module")
def dp_effects_run(tmp_path_factory):
    """The README's dp_effects quickstart."""
    out = tmp_path_factory.mktemp("dp_effects") / "out"
    argv = ["simulate", "dp_effects", *COHORT, "--rows", "4", "--epsilon", "4", "--outcome-range", "0,1",
            "--estimand", "ate", "--out", str(out)]
    assert main(argv) == 0
    return out


def test_the_dp_effects_explanation_is_a_note_not_a_warning(dp_effects_run):
    report, text = _strict(dp_effects_run), _page_text(dp_effects_run)
    assert any(n.startswith("dp_effects: each party released two Gaussian") for n in report["notes"])
    assert not any("dp_effects: each party released" in w for w in report["warnings"])
    assert f"Warnings ({len(report['warnings'])})" in text  # the simulation's range warning only
    notes = text[text.index("Notes"):text.index("Estimates")]
    assert "dp_effects: each party released two Gaussian" in notes


def test_the_page_names_the_intervals_the_rows_have(dp_effects_run):
    report, text = _strict(dp_effects_run), _page_text(dp_effects_run)
    kinds = {row["interval"] for row in report["estimates"].values() if row["ci_low"] is not None}
    assert kinds == {"analytic"}
    assert "Intervals: 95% analytic." in text and "bootstrap percentile" not in text


def test_a_simulated_study_is_named_by_its_file_not_its_path(dp_effects_run):
    assert _strict(dp_effects_run)["study"] == "cohort-4x1"
    assert "Study cohort-4x1" in _page_text(dp_effects_run) and "examples/cohort/cohort.csv-" not in \
        _page_text(dp_effects_run)


def test_no_bootstrap_bar_without_replicates(tmp_path, capsys):
    out = tmp_path / "out"
    argv = ["simulate", "--balance-epsilon", "10", "--bootstrap", "0", "--interval", "analytic", "--out", str(out)]
    assert main(argv) == 0
    assert "bootstrap" not in capsys.readouterr().err.replace("--bootstrap", "")
    assert "Intervals: 95% analytic." in _page_text(out)


def test_the_adum_estimate_shows_its_interval_or_why_none_and_what_the_cells_adjust_for(tmp_path, capsys):
    out = tmp_path / "out"
    argv = ["simulate", "adum", "--rows", "4", "--epsilon", "1", "--partition-columns", "age,re74", "--cells", "4,4",
            "--outcome-range", "0", "60", "--out", str(out)]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    row = _strict(out)["estimates"]["eps-adum"]
    line = next(line for line in printed.splitlines() if line.startswith("ATT eps-adum:"))
    if row["ci_low"] is None:  # the release's noise decides (OpenDP, unseeded): either way it is said
        assert f"no interval: {row['no_interval']}" in line and row["no_interval"]
    else:
        assert "95% analytic CI" in line
    assert "cell-adjusted for age, re74 only" in line and "the unadjusted difference from the same release" in line
    # LaLonde's PSID controls differ from the NSW treated within any 4 x 4 cells of age and re74
    assert "cell-level adjustment is not enough" in line
    assert max(abs(v) for v in row["within_cell_smd"].values()) > 0.1
    text = _page_text(out)
    assert "eps-ADUM: the cell uplifts and the ATT are post-processing" in text and "the ATE are" not in text
    assert row["adjustment"] in text and (row["no_interval"] is None or row["no_interval"] in text)


def test_each_party_logs_what_it_clipped_and_releases_none_of_it(tmp_path, capsys):
    """Issue 38 item 5: outcomes outside the declared range were clipped silently."""
    import pandas as pd

    out = tmp_path / "out"
    argv = ["simulate", "dp_effects", *COHORT, "--rows", "2", "--epsilon", "4", "--outcome-range", "0,0.5",
            "--estimand", "ate", "--out", str(out)]
    assert main(argv) == 0
    err = capsys.readouterr().err
    events = pd.read_csv("examples/cohort/cohort.csv")["event"]
    lines = [line for line in err.splitlines() if "values clipped to the study's declared ranges" in line]
    assert len(lines) == 4  # two parties, two releases each
    counts = sorted({int(line.split("outcome ")[1].split(" of")[0]) for line in lines})
    assert sum(counts) == int((events > 0.5).sum())  # each party counts its own rows; together all of them
    for written in ("report.json", "report.html"):  # the diagnostic stays with the party's operator
        text = (out / written).read_text()
        assert "declared ranges (this party's diagnostic" not in text and f"outcome {counts[0]} of" not in text
