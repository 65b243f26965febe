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
