"""Every report figure is titled, has labelled axes with units, and a legend."""

from __future__ import annotations

import pytest

from collabcausal.reporting.document import overlap_histogram
from collabcausal.reporting.figures import love_plot, overlap_plot


def _check(fig) -> None:
    axes = [ax for ax in fig.axes if ax.get_visible()]
    assert axes
    for ax in axes:
        assert ax.get_title() or fig._suptitle is not None
        assert ax.get_xlabel() and ax.get_ylabel()
        assert ax.get_legend() is not None


def test_love_plot() -> None:
    fig = love_plot(["age", "bmi"], [0.8, -0.3], {"W-clb PSM": [0.05, 0.02]}, title="balance")
    _check(fig)
    assert "unitless" in fig.axes[0].get_xlabel()
    assert [t.get_text() for t in fig.axes[0].get_legend().get_texts()][:2] == ["unweighted", "W-clb PSM"]


def test_overlap_plot() -> None:
    fig = overlap_plot({"CA": overlap_histogram([0.1, 0.2, 0.8], [0, 0, 1])}, title="overlap")
    _check(fig)
    assert fig.axes[0].get_xlim() == (0.0, 1.0)


def test_love_plot_draws_the_dp_noise_sd_as_error_bars_and_none_for_exact_moments() -> None:
    from matplotlib.container import ErrorbarContainer

    exact = love_plot(["age", "bmi"], [0.8, -0.3], {"W-clb PSM": [0.05, 0.02]}, title="balance")
    assert not [c for c in exact.axes[0].containers if isinstance(c, ErrorbarContainer)]
    fig = love_plot(["age", "bmi"], [0.8, -0.3], {"W-clb PSM": [0.05, 0.02]}, title="balance",
                    unweighted_sd=[0.04, 0.05], weighted_sd={"W-clb PSM": [0.2, 0.3]})
    _check(fig)
    bars = [c for c in fig.axes[0].containers if isinstance(c, ErrorbarContainer)]
    assert len(bars) == 2  # one per sample: unweighted and W-clb PSM
    segments = bars[1].lines[2][0].get_segments()  # the PSM bars: |SMD| +- sd
    assert [tuple(s[:, 0]) for s in segments] == [pytest.approx((-0.15, 0.25)), pytest.approx((-0.28, 0.32))]
