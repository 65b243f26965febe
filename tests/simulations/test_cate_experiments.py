"""Reproductions of papers 000 and 004: the estimator arithmetic, the findings, and the Dask path."""

from functools import partial

import numpy as np
import pytest

from collabcausal.estimators.dp import dp_cate as dp_cate_module
from collabcausal.estimators.dp.meta_algorithm import DPEBMClassifier, DPEBMRegressor
from collabcausal.simulations.cate_experiments import (
    Paper004Config,
    bias_variance,
    paper000_cell,
    paper000_sweep,
    paper004_quick,
    paper004_rows,
    paper004_sweep,
)

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::DeprecationWarning")


def test_two_training_set_estimator_recovers_bias_and_variance_exactly():
    # two predictions with squared bias b2 and independent errors of variance v: MSE_avg = b2 + v/2.
    b2, v = 0.3, 0.8
    mse, bias2, var = bias_variance(b2 + v, b2 + v, b2 + v / 2)
    assert (mse, bias2, var) == pytest.approx((b2 + v, b2, v))


def test_small_sample_dr_mse_rises_as_epsilon_falls_and_s_learner_stays_near_var_tau():
    res = paper000_sweep(("A",), (500,), (1.0, 16.0), ("dr", "s"), 1, seed=1, n_test=5000)
    dr = res[res.learner == "dr"].set_index("epsilon")
    s = res[res.learner == "s"].set_index("epsilon")
    # The sweep seeds DP-EBM's noise (noise_seed, experiments only), so this test is deterministic:
    # with seed 1 the DR ratio is 4.9 (bound 2) and the S MSE 1.5 Var(tau) (bound 6).
    assert dr.loc[1.0, "mse"] > 2 * dr.loc[16.0, "mse"]
    assert s.loc[16.0, "mse"] < 6 * s.loc[16.0, "var_tau"]


@pytest.mark.slow
def test_paper000_findings_on_setup_a():
    """S flat near Var(tau) (except n=500, eps=1, as in the paper); DR/R MSE rise as eps falls, far
    more at small n; at small n the variance grows much more than the squared bias."""
    res = paper000_sweep(("A",), (500, 8000), (1.0, 16.0), ("dr", "r", "s"), 4, seed=0, n_test=20_000,
                         n_jobs=2).set_index(["n", "epsilon", "learner"])
    var_tau = float(res["var_tau"].iloc[0])
    for cell in ((500, 16.0), (8000, 1.0), (8000, 16.0)):
        assert res.loc[(*cell, "s"), "mse"] < 3 * var_tau
    for lr in ("dr", "r"):
        rise = {n: res.loc[(n, 1.0, lr), "mse"] - res.loc[(n, 16.0, lr), "mse"] for n in (500, 8000)}
        assert rise[500] > 0 and rise[8000] > 0
        assert rise[500] > 2 * rise[8000]
        small = res.loc[(500, 1.0, lr)], res.loc[(500, 16.0, lr)]
        assert small[0]["variance"] - small[1]["variance"] > 3 * abs(small[0]["bias2"] - small[1]["bias2"])


@pytest.fixture
def seeded_nuisances(monkeypatch):
    """interpret's DP-EBM noise in DPCATE's nuisances, seeded (the sweep seeds the data, the splits and the release
    noise, not the nuisances): the PEHEs become reproducible, so the test is checked at one seed (functional 5.90 at
    eps 1, 1.046 at eps 1000 against 1.3 x 0.884; linear 131.9, 0.883 against 1.3 x 0.893). Fresh nuisance noise
    has no computed rate: over 831 fits the functional PEHE at eps 1 (mean 6.2) had skew -1.5 and a left tail
    falling a decade per 0.8-1.4 (1% quantile 4.10, 0.1% 3.34, minimum 3.20) towards the eps 1000 PEHE (1.08 at
    most). Seeded noise is not DP; no ledger is involved."""
    monkeypatch.setattr(dp_cate_module, "DPEBMClassifier", partial(DPEBMClassifier, noise_seed=1))
    monkeypatch.setattr(dp_cate_module, "DPEBMRegressor", partial(DPEBMRegressor, noise_seed=2))


def test_paper004_pehe_falls_with_epsilon_and_approaches_the_non_private_learner(seeded_nuisances):
    res = paper004_quick(seed=0).set_index(["variant", "epsilon"])["pehe"]
    for variant in ("linear", "functional"):
        assert res[(variant, 1.0)] > res[(variant, 1000.0)]
        assert res[(variant, 1000.0)] < 1.3 * res[(variant, np.inf)]


def test_sweep_runs_on_a_dask_cluster():
    distributed = pytest.importorskip("dask.distributed")
    cfg = Paper004Config(dataset=1, n=300, epsilons=(2.0,), variants=("linear",), reps=1)
    with distributed.LocalCluster(n_workers=1, processes=False, dashboard_address=None) as cluster:
        on_dask = paper004_sweep(cfg, seed=3, scheduler=cluster.scheduler_address)
    local = paper004_sweep(cfg, seed=3)
    # the non-private learner is seeded, so it must agree; DP-EBM nuisance noise is not seeded.
    assert list(on_dask["epsilon"]) == [2.0, np.inf]
    assert on_dask["pehe"].iloc[1] == pytest.approx(local["pehe"].iloc[1])


def test_paper_cells_carry_the_constant_and_econml_baselines_on_the_same_data():
    cell = paper000_cell("A", 500, 16.0, "s", 0, 0, 2000, peers=True)
    assert cell["const_true_mse"] == cell["var_tau"]
    assert cell["const_own_mse"] >= cell["var_tau"]  # no constant beats the true ATE
    assert np.isfinite(cell["econml_mse"]) and cell["econml_mse"] > 0
    cfg = Paper004Config(dataset=1, n=300, epsilons=(2.0,), variants=("linear",), reps=1)
    rows = paper004_rows(cfg, seed=0, peers=True)
    assert list(rows["epsilon"]) == [2.0, np.inf]
    assert rows["const_true_pehe"].nunique() == 1 and rows["econml_pehe"].nunique() == 1
    assert (rows["const_own_pehe"] >= rows["const_true_pehe"]).all()
