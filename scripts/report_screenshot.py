"""Render the LaLonde 2x2 simulation's report.html in headless Chromium and save docs/report-screenshot.png.

    .venv/bin/python scripts/report_screenshot.py [--bootstrap 200] [--height 2300]

Runs ``collabcausal simulate --dataset lalonde`` into a temporary folder (about 15 s with
B = 200), then screenshots the top of its report (needs Chromium: ``apt-get install chromium``).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from collabcausal.cli import main as collabcausal
from collabcausal.reporting.browser import find_chromium, screenshot

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", type=int, default=200)
    parser.add_argument("--height", type=int, default=2300, help="pixels of the page to capture (default 2300)")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "report-screenshot.png")
    args = parser.parse_args()
    if find_chromium() is None:
        print("no Chromium found; install it with `apt-get install chromium`", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        argv = ["-q", "simulate", "--dataset", "lalonde", "--bootstrap", str(args.bootstrap), "--out", tmp]
        if collabcausal(argv) != 0:
            return 1
        screenshot(Path(tmp) / "report.html", args.out, width=1280, height=args.height)
    print(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
