"""What the README, the examples and the Makefile tell a newcomer to run (issue 38, item 9)."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

from collabcausal.cli import build_parser
from collabcausal.commands.simulate_kinds import kind_options
from collabcausal.estimators.intervals import interval_caveat

ROOT = Path(__file__).resolve().parents[1]


def _commands(text: str, program: str) -> list[list[str]]:
    """Every ``program ...`` command of the text's bash blocks, continuation lines joined, comments dropped."""
    blocks = re.findall(r"```bash\n(.*?)```", text, flags=re.S)
    lines = "\n".join(blocks).replace("\\\n", " ").splitlines()
    return [shlex.split(line.split(program, 1)[1], comments=True) for line in lines if program in line]


def _demo_argv() -> list[str]:
    recipe = re.search(r"^demo:.*\n\t(.*)$", (ROOT / "Makefile").read_text(), flags=re.M).group(1)
    return shlex.split(recipe.split("collabcausal", 1)[1])


def test_every_readme_simulation_writes_its_own_folder_not_make_demos():
    argvs = [argv for argv in _commands((ROOT / "README.md").read_text(), "collabcausal ") if argv[0] == "simulate"]
    assert len(argvs) >= 5
    outs = [argv[argv.index("--out") + 1] if "--out" in argv else None for argv in argvs]
    demo = _demo_argv()
    assert None not in outs, argvs[outs.index(None)]
    assert len(set(outs)) == len(outs) and demo[demo.index("--out") + 1] not in outs


def test_make_demo_prints_intervals_valid_for_every_estimator_it_runs():
    args = kind_options(build_parser("simulate").parse_args(_demo_argv()))
    assert [e for e in args.estimators.split(",") if interval_caveat(e, args.interval)] == []
    assert args.bootstrap > 0  # the replicates still give the bootstrap mean and figure


def test_no_doc_installs_the_package_from_an_index_it_is_not_on():
    docs = [ROOT / "README.md", *ROOT.glob("docs/*.md"), *ROOT.glob("examples/*/README.md")]
    assert [str(d) for d in docs if 'pip install "collabcausal[' in d.read_text()] == []


def test_the_omop_walkthrough_names_every_file_holding_the_url_and_how_to_start_postgresql():
    folder = ROOT / "examples" / "omop-postgres"
    readme = (folder / "README.md").read_text()
    holders = sorted(str(p.relative_to(folder)) for p in folder.rglob("*.toml") if "url = " in p.read_text())
    sentence = " ".join(readme.split("change the `url` in", 1)[1].split(").", 1)[0].split())
    assert len(holders) == 4 and all(f"`{h}`" in sentence for h in holders)
    assert "service postgresql start" in readme
    quoted = readme.split("ATE psm:", 1)[1].split("## ", 1)[0]
    assert "anchor key" in quoted and "scripts/anchor_draws.py" in quoted  # a random key moves PSM


def test_prepare_says_it_wrote_the_anchor_key(tmp_path):
    import shutil

    copy = tmp_path / "study"
    shutil.copytree(ROOT / "examples" / "lalonde-2x2", copy)
    out = subprocess.run([sys.executable, "prepare.py"], cwd=copy, capture_output=True, text=True, check=True).stdout
    assert (copy / "anchor.key").is_file()
    assert "anchor.key: a new random anchor key" in out and "the analyst never gets it" in out
    again = subprocess.run([sys.executable, "prepare.py"], cwd=copy, capture_output=True, text=True, check=True)
    assert "anchor.key: kept" in again.stdout
