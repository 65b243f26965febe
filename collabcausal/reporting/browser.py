"""Open a report in headless Chromium: its DOM after scripts ran, console messages, a screenshot.

Used by the browser test of the HTML report and by ``scripts/report_screenshot.py``. Chromium
runs with a fresh profile, no sandbox (CI containers run as root), no GPU and no background
networking, and logs the page's console to stderr, where every ``CONSOLE`` line is collected.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--hide-scrollbars",
    "--enable-logging=stderr",
    "--v=0",
)


@dataclass(frozen=True)
class PageLoad:
    """What Chromium saw: the serialized DOM and the page's console messages."""

    dom: str
    console: list[str]


def find_chromium() -> str | None:
    """The path of an installed Chromium or Chrome, or None."""
    return next((path for path in map(shutil.which, CANDIDATES) if path), None)


def _run(page: Path, *args: str, timeout: float) -> subprocess.CompletedProcess:
    browser = find_chromium()
    if browser is None:
        raise FileNotFoundError("no Chromium found; install it with `apt-get install chromium`")
    with tempfile.TemporaryDirectory(prefix="collabcausal-chromium-") as profile:
        command = [browser, *FLAGS, f"--user-data-dir={profile}", *args, Path(page).resolve().as_uri()]
        return subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=True)


def load(page: Path, *, timeout: float = 120.0) -> PageLoad:
    """Load ``page``; return its DOM after scripts ran and every console message it produced."""
    done = _run(page, "--dump-dom", timeout=timeout)
    return PageLoad(done.stdout, [line for line in done.stderr.splitlines() if ":CONSOLE" in line])


def screenshot(page: Path, png: Path, *, width: int = 1280, height: int = 2000, timeout: float = 120.0) -> Path:
    """Save the top ``width`` x ``height`` pixels of ``page`` as a PNG."""
    _run(page, f"--screenshot={Path(png).resolve()}", f"--window-size={width},{height}", timeout=timeout)
    return Path(png)
