"""Every JSON file the main commands write parses as strict JSON (no NaN, Infinity or -Infinity)."""

from __future__ import annotations

import json
import runpy
import shutil
from pathlib import Path

import pytest

from collabcausal.cli import main

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "lalonde-2x2"


def _strict_files(folder: Path) -> list[dict]:
    """Parse every .json under ``folder`` strictly (a NaN or Infinity constant fails the test)."""
    files = sorted(folder.rglob("*.json"))
    assert files, f"no JSON written under {folder}"
    return [json.loads(f.read_text(), parse_constant=lambda name, f=f: pytest.fail(f"{name} in {f}")) for f in files]


COMMANDS = {
    "simulate": ["simulate", "--dataset", "lalonde", "--bootstrap", "3", "--settings", "W,CA"],
    "simulate adum": ["simulate", "adum", "--rows", "4", "--epsilon", "1", "--partition-columns", "age", "--cells", "4",
                      "--outcome-range", "0", "60"],
    "simulate discovery": ["simulate", "discovery", "--rows", "2", "--pairs", "age,re74", "--epsilon", "1"],
}


@pytest.mark.parametrize("command", COMMANDS)
def test_simulate_writes_strict_json(command, tmp_path) -> None:
    assert main([*COMMANDS[command], "--quiet", "--out", str(tmp_path / "out")]) == 0
    _strict_files(tmp_path)


def test_the_readme_dp_balance_command_writes_nulls_with_reasons_not_infinity(tmp_path, capsys) -> None:
    argv = ["simulate", "--balance-epsilon", "10", "--bootstrap", "0", "--interval", "analytic"]
    assert main([*argv, "--out", str(tmp_path / "balance")]) == 0
    out = capsys.readouterr().out
    assert "MASMD inf" not in out and "MASMD undefined" in out
    (report,) = _strict_files(tmp_path)
    undefined = report["undefined"]
    assert undefined and all(report["smd"][path.split("/")[1]][path.split("/")[2]] is None
                             for path in undefined if path.startswith("smd/"))
    assert all("noisy spread" in reason or "see smd" in reason for reason in undefined.values())


def test_analyst_writes_strict_json(tmp_path) -> None:
    from collabcausal.analyst.config import load_study_config
    from collabcausal.commands.analyst import publish_report, run_study
    from collabcausal.party.config import load_party_config
    from collabcausal.protocol.inprocess import InProcessGrid

    folder = tmp_path / "lalonde-2x2"
    shutil.copytree(EXAMPLE, folder)
    runpy.run_path(str(folder / "prepare.py"))
    study = folder / "study.toml"
    study.write_text(study.read_text().replace("bootstrap = 200", "bootstrap = 3"))
    parties = [load_party_config(folder / p / "party.toml").build_party() for p in ("p11", "p12", "p21", "p22")]
    config = load_study_config(study)
    report = run_study(InProcessGrid(parties), config)
    publish_report(report, {}, config.out)
    (written,) = _strict_files(config.out)
    assert written["estimates"]["psm"]["estimate"] == report["estimates"]["psm"]["estimate"]
