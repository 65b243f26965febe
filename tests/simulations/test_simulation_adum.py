"""Quick reproduction of paper 001's Figures 1 and 2 (small n, 3 splits, loose tolerances)."""

from __future__ import annotations

import numpy as np
import pytest

from collabcausal.simulations.adum import best_p, quick, summarize, synthetic_uplift


@pytest.fixture(scope="module")
def figures():
    return quick(seed=0)


def test_synthetic_data_follow_section_3_1_1():
    data = synthetic_uplift(50000, 1.0, np.random.default_rng(0))
    assert data.x.min() >= -1 and data.x.max() <= 1
    assert data.t.mean() == pytest.approx(0.5, abs=0.01)
    assert np.allclose(data.tau, np.sin(data.x[:, 0]))
    control = data.t == 0
    assert data.y[control].std() == pytest.approx(1.0, abs=0.02)


def test_figure1_quick_pehe_falls_with_epsilon_for_every_method(figures):
    fig1, _ = figures
    means = summarize(fig1, ["epsilon", "method"]).pivot(index="epsilon", columns="method", values="pehe_mean")
    assert set(means.columns) == {"eps-ADUM", "eps-TM", "AdaSSP-TM"}
    for method in means.columns:
        assert means.loc[100.0, method] < means.loc[0.1, method]
    # numbers of the quick run (seed 0), within loose tolerances
    assert means.loc[100.0, "eps-ADUM"] == pytest.approx(0.116, abs=0.03)
    assert means.loc[100.0, "eps-TM"] == pytest.approx(0.047, abs=0.02)
    assert means.loc[100.0, "eps-TM"] < means.loc[100.0, "eps-ADUM"]  # individual access wins at large eps


def test_figure2_quick_curves_are_u_shaped_and_best_p_grows_with_epsilon(figures):
    _, fig2 = figures
    best = best_p(fig2)
    assert best[0.1] < best[100.0]
    means = fig2.groupby(["epsilon", "p"])["pehe"].mean()
    for eps in (0.1, 100.0):
        curve = means.loc[eps]
        assert curve.idxmin() not in (curve.index.min(), curve.index.max())
        assert curve.iloc[0] > 2 * curve.min() and curve.iloc[-1] > 1.2 * curve.min()
