"""The HTML report in a real headless browser: it loads without console messages and lays out its plots."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from collabcausal.cli import main
from collabcausal.reporting.browser import find_chromium, load, screenshot

CHROMIUM = find_chromium()
pytestmark = pytest.mark.skipif(
    CHROMIUM is None,
    reason="Chromium is not installed, so the HTML report is not checked in a browser "
    "(.ci/run installs it with `apt-get install -y chromium`)",
)


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    out = tmp_path_factory.mktemp("report")
    argv = ["-q", "simulate", "--dataset", "dcqe-synthetic", "--settings", "L-IA,W,CA", "--bootstrap", "8"]
    assert main([*argv, "--out", str(out)]) == 0
    return out / "report.html"


def test_report_loads_with_no_console_messages_and_lays_out_every_figure(report) -> None:
    page = load(report)
    assert page.console == [], page.console
    body = page.dom[page.dom.index("<body") : page.dom.index(">", page.dom.index("<body"))]
    figures = int(body.split('data-figures="')[1].split('"')[0])
    shown = int(body.split('data-figures-shown="')[1].split('"')[0])
    # Love plots for PSM and IPW, propensity overlap, bootstrap distributions
    assert figures == 4
    assert shown == figures
    for heading in ("Estimates", "Covariate balance: PSM", "Propensity overlap", "Bootstrap distributions"):
        assert heading in page.dom


def test_screenshot_is_not_blank(report, tmp_path) -> None:
    png = screenshot(report, tmp_path / "shot.png", width=1000, height=1400)
    pixels = np.asarray(Image.open(png).convert("L"), dtype=float)
    assert pixels.shape == (1400, 1000)
    assert pixels.std() > 10, "the page rendered as a blank image"


def test_the_console_check_catches_a_script_error(tmp_path) -> None:
    page = tmp_path / "broken.html"
    page.write_text("<html><body><p>x</p><script>notDefined();</script></body></html>")
    console = load(page).console
    assert len(console) == 1 and "notDefined" in console[0]
