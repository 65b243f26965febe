"""The report page: self-contained, escaped, one figure per section with data."""

from __future__ import annotations

import re

from collabcausal.reporting.html import render_html, write_html
from collabcausal.simulations.report import simulation_document


def test_page_needs_no_network_and_shows_every_section(small_result, tmp_path) -> None:
    doc = simulation_document(small_result, {"n_boot": 6, "seed": 0})
    path = write_html(doc, tmp_path / "report.html")
    page = path.read_text()
    assert list(tmp_path.iterdir()) == [path], "no temporary file left behind"
    # nothing fetched: no external scripts, styles, images, fonts or imports
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)|<link\b|@import|url\(\s*["']?https?:""", page)
    assert 'data-figures="4"' in page and page.count("<figure>") == 4
    for section in ("Estimates", "Covariate balance: PSM", "Covariate balance: IPW", "Propensity overlap",
                    "Bootstrap distributions", "Privacy spend per party", "Configuration", "Software"):
        assert f"<h2>{section}</h2>" in page
    assert "W-clb propensities differ from CA" in page and "numpy" in page  # m~ = 2 of 3: a true warning


def test_text_from_the_data_is_escaped(small_result) -> None:
    doc = simulation_document(small_result, {"note": "<script>alert(1)</script>"})
    doc["warnings"] = ["column <b>x</b> clipped & rescaled"]
    page = render_html(doc)
    assert "<script>alert(1)</script>" not in page and "&lt;script&gt;" in page
    assert "column &lt;b&gt;x&lt;/b&gt; clipped &amp; rescaled" in page and "Warnings (1)" in page
