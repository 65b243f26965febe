"""The cohort design of the small-study benchmark: examples/cohort's equations, any n, known truth."""

from __future__ import annotations

import numpy as np
import pytest

from collabcausal.errors import InputError
from collabcausal.simulations.cohort_design import COHORT_DESIGN, cohort_sites, cohort_true_ate


def test_sites_split_n_subjects_and_carry_their_true_nuisances():
    sites = cohort_sites(1001, np.random.default_rng(0))
    assert [len(s.T) for s in sites] == [251, 250, 250, 250]
    for s in sites:
        assert s.X.shape == (len(s.T), len(COHORT_DESIGN.bounds))
        assert set(np.unique(s.Y)) <= {0.0, 1.0} and set(np.unique(s.T)) <= {0, 1}
        assert (s.mean_treated < s.mean_control).all()  # statin lowers every subject's risk
        box = np.array(COHORT_DESIGN.bounds)
        assert ((s.X >= box[:, 0]) & (s.X <= box[:, 1])).all()  # the public ranges hold every value


def test_the_treated_share_follows_the_true_propensity():
    sites = cohort_sites(200_000, np.random.default_rng(1), n_sites=1)
    e, t = sites[0].propensity, sites[0].T
    # mean of 200,000 Bernoulli draws: SE below 0.0011, so 0.006 is more than 5 SEs
    assert t.mean() == pytest.approx(e.mean(), abs=0.006)


def test_the_true_ate_is_the_mean_risk_difference_of_a_large_sample():
    truth = cohort_true_ate()
    sites = cohort_sites(400_000, np.random.default_rng(7), n_sites=1)
    sample = float(np.mean(sites[0].mean_treated - sites[0].mean_control))
    assert -0.06 < truth < -0.03
    assert sample == pytest.approx(truth, abs=5e-4)  # the risk difference's sd is below 0.05: SE < 1e-4


def test_too_few_subjects_for_the_sites_are_refused():
    with pytest.raises(InputError, match="cannot make 4 sites"):
        cohort_sites(7, np.random.default_rng(0))
