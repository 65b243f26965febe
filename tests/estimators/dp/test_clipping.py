"""Declared bounds: what they clip is counted, reported on the fitted learner and warned about above 5%."""

import warnings

import numpy as np
import pytest

from collabcausal.estimators.dp.clipping import ClippingWarning, clipping_warnings, count_outside
from collabcausal.estimators.dp.dp_cate import DPCATE
from collabcausal.estimators.dp.meta_algorithm import DPCATELearner


def test_count_outside_counts_values_and_rows_with_any_clipped_column():
    assert count_outside([-2.0, 0.0, 0.5, 3.0], (-1.0, 1.0), "outcomes").clipped == 2
    X = np.array([[0.0, 0.0], [2.0, 0.0], [2.0, -5.0], [0.5, 0.5]])
    rows = count_outside(X, [(0.0, 1.0), (-1.0, 1.0)], "covariate rows")
    assert (rows.n, rows.clipped, rows.share) == (4, 2, 0.5)
    assert count_outside([1.0, -1.0], (-1.0, 1.0), "outcomes").clipped == 0  # the bounds are inside


def test_warnings_only_above_five_percent_and_they_name_the_share_and_the_fix():
    five = count_outside(np.r_[np.zeros(95), np.full(5, 9.0)], (0.0, 1.0), "outcomes")
    six = count_outside(np.r_[np.zeros(94), np.full(6, 9.0)], (0.0, 1.0), "outcomes")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert clipping_warnings([five]) == ()
    with pytest.warns(ClippingWarning, match=r"6\.0% of the outcomes \(6 of 100\).*declare wider"):
        (message,) = clipping_warnings([five, six])
    assert "\n" not in message


def _data(scale: float, n: int = 400):
    rng = np.random.default_rng(0)
    X = rng.uniform(size=(n, 2))
    T = rng.binomial(1, 0.5, n)
    return scale * (X[:, 0] + T + rng.normal(size=n)), T, X


@pytest.mark.parametrize("make", [
    lambda: DPCATELearner("dr", epsilon=1.0, feature_bounds=[(0, 1)] * 2, outcome_bounds=(-1, 1), random_state=0),
    lambda: DPCATE("r", "functional", epsilon=1.0, feature_bounds=[(0, 1)] * 2, outcome_bounds=(-1, 1),
                   random_state=0),
], ids=["DPCATELearner", "DPCATE"])
def test_dp_learners_report_the_share_of_outcomes_their_declared_bounds_clip(make):
    Y, T, X = _data(scale=5.0)  # outcomes spread over about [-15, 20]: most fall outside [-1, 1]
    expected = int(((Y < -1) | (Y > 1)).sum())
    with pytest.warns(ClippingWarning, match="outcomes"):
        model = make().fit(Y, T, X=X)
    outcomes = model.clipping_[0]
    assert (outcomes.what, outcomes.n, outcomes.clipped) == ("outcomes", 400, expected)
    assert any("outcomes" in w for w in model.warnings_)
    assert model.clipping_[1].clipped == 0
