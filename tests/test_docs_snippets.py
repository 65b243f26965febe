"""The documentation's runnable code blocks run as written.

A fenced block whose info string is ``python runnable`` or ``bash runnable`` (in README.md and
docs/*.md) is a test: it runs in a fresh temporary folder, Python blocks with this package's
interpreter, shell blocks under ``bash -euo pipefail`` with the interpreter's folder (``.venv/bin``)
first on PATH. A block that fails, or runs longer than ``TIMEOUT`` seconds, fails its test. Blocks
without the marker (deployments that need other machines or fixed ports) are not run.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCUMENTS = (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")))
FENCE = re.compile(r"^```(\w+) runnable[ \t]*\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)
LANGUAGES = ("python", "bash")
TIMEOUT = 120


def runnable_blocks(text: str) -> list[tuple[str, str, int]]:
    """``(language, code, line)`` of every block marked runnable in a Markdown text."""
    return [(m.group(1), m.group(2), text.count("\n", 0, m.start()) + 1) for m in FENCE.finditer(text)]


BLOCKS = [
    pytest.param(language, code, id=f"{path.relative_to(ROOT)}:{line}")
    for path in DOCUMENTS
    for language, code, line in runnable_blocks(path.read_text())
]


def test_the_marker_is_found() -> None:
    text = "a\n```python runnable\nprint(1)\n```\n```python\nnot run\n```\n```bash runnable\necho hi\n```\n"
    assert runnable_blocks(text) == [("python", "print(1)\n", 2), ("bash", "echo hi\n", 8)]
    assert len(BLOCKS) >= 4, "README.md's quickstart snippets should be marked runnable"


@pytest.mark.parametrize(("language", "code"), BLOCKS)
def test_snippet_runs(language: str, code: str, tmp_path: Path) -> None:
    assert language in LANGUAGES, f"runnable blocks are {' or '.join(LANGUAGES)}, not {language}"
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    env["MPLBACKEND"] = "Agg"
    command = [sys.executable, "-c", code] if language == "python" else ["bash", "-euo", "pipefail", "-c", code]
    done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=TIMEOUT)
    output = f"{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    assert done.returncode == 0, f"snippet failed (exit {done.returncode}):\n{output}"
