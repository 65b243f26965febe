import numpy as np
import pytest
from scipy import stats

from collabcausal.errors import InputError, NumericalError
from collabcausal.estimators import LogisticPropensity, ipw
from collabcausal.estimators.intervals import bca_interval, check_interval, interval_estimate


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_bca_equals_scipy_bootstrap_on_the_same_replicates(seed):
    # for a mean, scipy's jackknife differences (n-1)(mean_jack - theta_i) are exactly x_i - mean(x)
    x = np.random.default_rng(seed).exponential(size=60)
    res = stats.bootstrap((x,), np.mean, method="BCa", n_resamples=999, rng=np.random.default_rng(seed))
    lo, hi = bca_interval(res.bootstrap_distribution, x.mean(), x - x.mean(), alpha=0.05)
    assert lo == pytest.approx(res.confidence_interval.low, rel=1e-12)
    assert hi == pytest.approx(res.confidence_interval.high, rel=1e-12)


def test_bca_refuses_replicates_all_on_one_side():
    with pytest.raises(NumericalError, match="one side"):
        bca_interval([2.0, 3.0, 4.0], 1.0, [1.0, -1.0])


def _ipw_point():
    rng = np.random.default_rng(5)
    X = rng.normal(size=(300, 2))
    t = (rng.random(300) < 0.5).astype(np.int8)
    y = X[:, 0] + t + rng.normal(size=300)
    e = LogisticPropensity().fit(X, t).predict_propensity(X)
    return ipw(y, t, e, X_propensity=X)


def test_interval_estimate_reports_the_full_sample_estimate_with_each_interval():
    point = _ipw_point()
    reps = point.estimate + np.random.default_rng(1).normal(scale=point.se, size=400) + 0.05
    reps[:3] = np.nan
    analytic = interval_estimate(point, reps, "analytic")
    assert (analytic.estimate, analytic.se, analytic.ci_low) == (point.estimate, point.se, point.ci_low)
    assert analytic.boot_mean == pytest.approx(np.nanmean(reps)) and analytic.n_failed == 3
    pct = interval_estimate(point, reps, "percentile")
    assert pct.estimate == point.estimate  # never the bootstrap mean
    assert pct.se == pytest.approx(np.nanstd(reps, ddof=1))
    assert pct.ci_low == pytest.approx(np.nanquantile(reps, 0.025))
    bca = interval_estimate(point, reps, "BCa")
    assert bca.interval == "bca" and bca.ci_low < point.estimate < bca.ci_high
    assert bca.to_dict()["n_boot"] == 400


def test_interval_estimate_refuses_bootstrap_kinds_without_replicates():
    with pytest.raises(InputError, match="needs bootstrap replicates"):
        interval_estimate(_ipw_point(), None, "percentile")
    with pytest.raises(InputError, match="unknown interval"):
        check_interval("studentized")


def test_psm_bootstrap_intervals_carry_a_caveat_and_analytic_ones_do_not():
    from collabcausal.estimators.intervals import interval_caveat

    assert "not valid for nearest-neighbour matching" in interval_caveat("psm", "percentile")
    assert "Abadie & Imbens 2008" in interval_caveat("PSM", "bca")
    assert interval_caveat("psm", "analytic") is None
    assert interval_caveat("ipw", "bca") is None
