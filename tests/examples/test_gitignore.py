"""A copy of an example keeps its generated keys, data and results out of git."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "lalonde-2x2"
GENERATED = (
    "certs/ca.key",
    "certs/ca.pem",
    "certs/p11.key",
    "certs/p11.pem",
    "p11/p11.csv",
    "p11/audit.jsonl",
    "p11/p11.sqlite",
    "p11/anchor.key",
    "alignment.key",
    "hospital-a.csr",
    "report/report.json",
    "report/report.html",
)


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_generated_files_of_a_copied_example_are_ignored(tmp_path) -> None:
    copy = tmp_path / "my-study"
    shutil.copytree(EXAMPLE, copy)
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    for name in GENERATED:
        (copy / name).parent.mkdir(parents=True, exist_ok=True)
        (copy / name).write_text("secret")
    status = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all"], cwd=tmp_path, capture_output=True, text=True
    ).stdout
    listed = {line[3:] for line in status.splitlines()}
    assert not {f"my-study/{name}" for name in GENERATED} & listed
    assert "my-study/prepare.py" in listed, "the example's own files stay visible to git"


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
@pytest.mark.parametrize("example", sorted(p.name for p in EXAMPLE.parent.iterdir() if p.is_dir()))
def test_every_report_folder_a_study_of_the_example_writes_is_ignored(tmp_path, example) -> None:
    """Issue 38 item 9: the OMOP example's .gitignore missed report-dp/, the out of its study-dp.toml."""
    import tomllib

    copy = tmp_path / "copy"
    shutil.copytree(EXAMPLE.parent / example, copy)
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    outs = [tomllib.loads(p.read_text())["study"].get("out") for p in sorted(copy.glob("study*.toml"))]
    written = [copy / out / "report.json" for out in outs if out]
    for path in written:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("{}")
    status = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all"], cwd=tmp_path, capture_output=True, text=True
    ).stdout
    listed = {line[3:] for line in status.splitlines()}
    assert not {str(p.relative_to(tmp_path)) for p in written} & listed
