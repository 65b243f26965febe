"""One study, three commands: ``simulate``, ``simulate cate`` and ``analyst serve`` give the same W-clb ATT.

They used to give 0.498, 0.669 and 0.434 for LaLonde 2x2 PSM: three anchors (study ids
"simulation:W-clb", "simulate-cate-lalonde", "lalonde-2x2"; the example's own random key). Now
every simulation uses the study id "lalonde-2x2", the defaults come from one module, and each
command prints the configuration line that decides the numbers.
"""

from __future__ import annotations

import json
import runpy
import shutil
import sys
from pathlib import Path

import pytest

from collabcausal.analyst.config import load_study_config
from collabcausal.cli import main
from collabcausal.commands.analyst import run_study
from collabcausal.party.config import load_party_config
from collabcausal.protocol.inprocess import InProcessGrid

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "lalonde-2x2"
PARTIES = ("p11", "p12", "p21", "p22")


def _example_study(tmp_path: Path, monkeypatch, *, simulation_key: bool) -> dict:
    """Run the LaLonde 2x2 example's study in process (analytic interval, no bootstrap); return its report."""
    folder = tmp_path / "lalonde-2x2"
    shutil.copytree(EXAMPLE, folder)
    monkeypatch.setattr(sys, "argv", ["prepare.py", *(["--simulation-key"] if simulation_key else [])])
    runpy.run_path(str(folder / "prepare.py"))
    study = folder / "study.toml"
    text = study.read_text().replace('interval = "percentile"', 'interval = "analytic"')
    study.write_text(text.replace("bootstrap = 200", "bootstrap = 0"))
    parties = [load_party_config(folder / name / "party.toml").build_party() for name in PARTIES]
    for party in parties:
        party.audit = None
    return run_study(InProcessGrid(parties), load_study_config(study))


def _simulate_table(tmp_path: Path, capsys) -> tuple[dict[str, float], str]:
    """``simulate --dataset lalonde --settings W`` (analytic, no bootstrap): W-clb estimates, configuration line."""
    argv = ["simulate", "--dataset", "lalonde", "--settings", "W", "--bootstrap", "0", "--interval", "analytic"]
    assert main([*argv, "--quiet", "--out", str(tmp_path / "table")]) == 0
    printed = capsys.readouterr().out
    rows = json.loads((tmp_path / "table" / "results.json").read_text())["rows"]
    line = next(text for text in printed.splitlines() if text.startswith("DC-QE configuration:"))
    return {row["estimator"]: row["estimate"] for row in rows if row["setting"] == "W-clb"}, line


def test_simulate_and_the_example_on_the_simulation_key_give_the_same_w_clb_att(tmp_path, capsys, monkeypatch):
    table, line = _simulate_table(tmp_path, capsys)
    served = _example_study(tmp_path, monkeypatch, simulation_key=True)
    for name in ("psm", "ipw"):
        assert served["estimates"][name]["estimate"] == pytest.approx(table[f"DC-QE({name.upper()})"], rel=1e-9)
    assert "study 'lalonde-2x2', anchor key: simulation key of seed 0, r 2675" in line
    assert served["configuration"] == line


@pytest.mark.slow
def test_simulate_cate_gives_simulate_s_w_clb_att(tmp_path, capsys):
    table, line = _simulate_table(tmp_path, capsys)
    argv = ["simulate", "cate", "--epsilon", "1", "--outcome-range", "0", "60", "--out", str(tmp_path / "cate")]
    assert main(argv) == 0
    cate = json.loads((tmp_path / "cate" / "report.json").read_text())
    for name in ("psm", "ipw"):
        expected = pytest.approx(table[f"DC-QE({name.upper()})"], rel=1e-9)
        assert cate["estimates"][f"{name} (DC-QE)"]["estimate"] == expected
    assert cate["configuration"] == line


def test_the_example_with_its_own_key_says_its_anchor_is_not_a_simulation_s(tmp_path, monkeypatch):
    served = _example_study(tmp_path, monkeypatch, simulation_key=False)
    assert "anchor key: the parties' own (fingerprint" in served["configuration"]
    assert "a simulation's anchor differs" in served["configuration"]
