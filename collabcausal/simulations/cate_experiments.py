"""Reproductions of paper 000 (DP-EBM CATE learners, section 5) and paper 004 (DP-CATE, section 5.1).

Paper 000: for each (setup, n, eps, learner), train twice on two independent training sets, compute
MSE_1, MSE_2 and MSE_avg (of the averaged prediction) on a fixed test set, then
MSE = (MSE_1 + MSE_2)/2, Bias^2 = 2 MSE_avg - MSE and Var = MSE - Bias^2 = 2 (MSE - MSE_avg)
(section 5.1.3; the paper prints "Var = 2 MSE - Bias", a typo: MSE_avg = Bias^2 + Var/2 and
MSE = Bias^2 + Var give ours), averaged over repetitions.

Paper 004: PEHE on the test split of dataset 2 (3000 samples, 90/10) for DP-CATE with finite
queries (kernel ridge and linear second stage) and the functional release, against the same
learner without privacy (non-private gradient-boosting nuisances, no output noise).

Beside every cell (``peers=True``): the constant-ATE baselines (the true ATE everywhere: MSE
Var(tau), sqrt(PEHE) sd(tau); the learner's own ATE everywhere) and EconML's non-private learner
of the same kind on the same training data (:mod:`collabcausal.simulations.cate_baselines`).
``*_rows`` return one row per repetition (for means, spreads and win counts), ``*_sweep`` the
means per cell.

Sweeps run in parallel with joblib; given a Dask scheduler address they run on that cluster.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from joblib import Parallel, delayed, parallel_backend
from sklearn.ensemble import GradientBoostingClassifier, GradientBoostingRegressor

from collabcausal.estimators.dp.dp_cate import DPCATE
from collabcausal.estimators.dp.meta_algorithm import DPCATELearner
from collabcausal.estimators.metrics import pehe
from collabcausal.randomness import child_rng
from collabcausal.simulations.cate_baselines import constant_ate_pehe, econml_learner
from collabcausal.simulations.cate_setups import paper000_setup, paper004_dataset

PAPER000_NS = (500, 1000, 2000, 4000, 8000, 16000, 32000)
PAPER000_EPS = (1.0, 2.0, 4.0, 8.0, 16.0)
PAPER004_EPS = (0.5, 1.0, 2.0, 5.0, 10.0, 50.0, 100.0)
DELTA = 1e-5


def bias_variance(mse_1: float, mse_2: float, mse_avg: float) -> tuple[float, float, float]:
    """(MSE, integrated squared bias, integrated variance) from two training sets (paper 000, 5.1.3)."""
    mse = 0.5 * (mse_1 + mse_2)
    bias2 = 2.0 * mse_avg - mse
    return mse, bias2, mse - bias2


def _fit_predict(setup: str, n: int, eps: float, learner: str, seed_path: tuple, X_test, peers: bool):
    """The DP-EBM learner's predictions at ``X_test`` and, with ``peers``, EconML's on the same training set."""
    data = paper000_setup(setup, n, child_rng(*seed_path))
    half_span = 0.5 * (data.outcome_bounds[1] - data.outcome_bounds[0])
    model = DPCATELearner(learner, epsilon=eps, delta=DELTA, feature_bounds=data.feature_bounds,
                          outcome_bounds=data.outcome_bounds, pseudo_outcome_bounds=(-half_span, half_span),
                          random_state=child_rng(*seed_path, "split"),
                          noise_seed=int(child_rng(*seed_path, "noise").integers(2**31 - 4)))
    private = model.fit(data.Y, data.T, X=data.X).effect(X_test)
    if not peers:
        return private, None
    peer = econml_learner(learner.upper(), seed_path[-2]).fit(data.Y, data.T, X=data.X)
    return private, np.asarray(peer.effect(X_test), dtype=float).ravel()


def _mse(pred, tau) -> float:
    return float(np.mean((pred - tau) ** 2))


def paper000_cell(setup: str, n: int, eps: float, learner: str, rep: int, seed: int, n_test: int,
                  peers: bool = False) -> dict:
    """One repetition of one (setup, n, eps, learner) cell: both training sets and the three MSEs.

    With ``peers``: EconML's learner of the same kind on the same two training sets (``econml_mse``,
    the mean of its two MSEs) and the MSE of the learner's own ATE used as a constant
    (``const_own_mse``); the true ATE as a constant scores ``var_tau``.
    """
    test = paper000_setup(setup, n_test, child_rng(seed, "test", setup))
    fits = [_fit_predict(setup, n, eps, learner, (seed, setup, n, eps, learner, rep, k), test.X, peers)
            for k in (1, 2)]
    preds = [f[0] for f in fits]
    mses = [_mse(p, test.tau) for p in preds]
    mse_avg = _mse(0.5 * (preds[0] + preds[1]), test.tau)
    mse, bias2, var = bias_variance(mses[0], mses[1], mse_avg)
    row = {"setup": setup, "n": n, "epsilon": eps, "learner": learner, "rep": rep, "mse": mse, "bias2": bias2,
           "variance": var, "var_tau": float(np.var(test.tau))}
    if peers:
        row |= {"const_true_mse": row["var_tau"],
                "const_own_mse": float(np.mean([_mse(np.full_like(test.tau, p.mean()), test.tau) for p in preds])),
                "econml_mse": float(np.mean([_mse(f[1], test.tau) for f in fits]))}
    return row


def _run(tasks: list, n_jobs: int, scheduler: str | None) -> list:
    if scheduler is None:
        return Parallel(n_jobs=n_jobs)(tasks)
    from dask.distributed import Client

    with Client(scheduler), parallel_backend("dask"):
        return Parallel(n_jobs=n_jobs)(tasks)


def paper000_rows(
    setups: Sequence[str] = ("A",),
    ns: Sequence[int] = PAPER000_NS,
    epsilons: Sequence[float] = PAPER000_EPS,
    learners: Sequence[str] = ("dr", "r", "s"),
    reps: int = 5,
    *,
    seed: int = 0,
    n_test: int = 250_000,
    n_jobs: int = 1,
    scheduler: str | None = None,
    peers: bool = False,
) -> pd.DataFrame:
    """Paper 000's grid (section 5.1.3); one row per cell and repetition."""
    tasks = [delayed(paper000_cell)(s, n, e, lr, r, seed, n_test, peers)
             for s in setups for n in ns for e in epsilons for lr in learners for r in range(reps)]
    return pd.DataFrame(_run(tasks, n_jobs, scheduler))


def paper000_means(rows: pd.DataFrame) -> pd.DataFrame:
    """Means over repetitions per (setup, n, eps, learner), with the sd of the MSE (``mse_sd``)."""
    keys = ["setup", "n", "epsilon", "learner"]
    metrics = [c for c in rows.columns if c not in (*keys, "rep")]
    out = rows.groupby(keys, as_index=False)[metrics].mean()
    return out.merge(rows.groupby(keys, as_index=False)["mse"].std().rename(columns={"mse": "mse_sd"}), on=keys)


def paper000_sweep(*args, **kwargs) -> pd.DataFrame:
    """:func:`paper000_rows` averaged over repetitions (:func:`paper000_means`)."""
    return paper000_means(paper000_rows(*args, **kwargs))


def paper000_quick(seed: int = 0, n_jobs: int = 1, reps: int = 2, peers: bool = False) -> pd.DataFrame:
    """CI grid, one row per repetition: setup A, n in {500, 8000}, eps in {1, 16}, all three learners."""
    return paper000_rows(("A",), (500, 8000), (1.0, 16.0), ("dr", "r", "s"), reps, seed=seed, n_test=20_000,
                         n_jobs=n_jobs, peers=peers)


@dataclass(frozen=True)
class Paper004Config:
    """Settings of the paper-004 PEHE study (dataset 2, supplement G.1)."""

    dataset: int = 2
    n: int = 3000
    epsilons: tuple[float, ...] = PAPER004_EPS
    variants: tuple[str, ...] = ("krr", "linear", "functional")
    reps: int = 10
    ridge: float = 1e-2


def _baseline_models():
    return (GradientBoostingClassifier(max_depth=3, random_state=0),
            GradientBoostingRegressor(max_depth=3, random_state=0))


def paper004_cell(cfg: Paper004Config, variant: str, eps: float | None, rep: int, seed: int) -> dict:
    """PEHE of one run; ``eps=None`` is the non-private learner."""
    data = paper004_dataset(cfg.dataset, cfg.n, child_rng(seed, "data", rep))
    cut = int(0.9 * cfg.n)
    extra = {}
    if eps is None:
        prop, out = _baseline_models()
        extra = {"model_propensity": prop, "model_outcome": out}
    model = DPCATE("r", variant, epsilon=1.0 if eps is None else eps, delta=DELTA, feature_bounds=data.feature_bounds,
                   outcome_bounds=data.outcome_bounds, ridge=cfg.ridge, random_state=child_rng(seed, "split", rep),
                   noise_rng=child_rng(seed, "noise", variant, eps or 0, rep), **extra)
    model.fit(data.Y[:cut], data.T[:cut], X=data.X[:cut])
    Xq = data.X[cut:]
    if eps is None:
        est = model.effect(Xq)
    elif variant == "functional":
        est = model.release_function()(Xq)
    else:
        est = model.release(Xq, allow_noise_above_range=True).estimates  # the paper's settings, reported as is
    return {"variant": variant, "epsilon": np.inf if eps is None else eps, "rep": rep,
            "pehe": pehe(data.tau[cut:], est), "private": eps is not None,
            "const_own_pehe": constant_ate_pehe(data.tau[cut:], float(np.mean(est)))}


def paper004_peer(cfg: Paper004Config, rep: int, seed: int) -> dict:
    """EconML's R-learner (``NonParamDML``) and the true-ATE constant on repetition ``rep``'s data."""
    data = paper004_dataset(cfg.dataset, cfg.n, child_rng(seed, "data", rep))
    cut = int(0.9 * cfg.n)
    peer = econml_learner("R", seed).fit(data.Y[:cut], data.T[:cut], X=data.X[:cut])
    tau = data.tau[cut:]
    return {"rep": rep, "econml_pehe": pehe(tau, np.asarray(peer.effect(data.X[cut:]), dtype=float).ravel()),
            "const_true_pehe": constant_ate_pehe(tau), "true_ate": float(np.mean(tau))}


def paper004_rows(cfg: Paper004Config = Paper004Config(), *, seed: int = 0, n_jobs: int = 1,
                  scheduler: str | None = None, peers: bool = False) -> pd.DataFrame:
    """One row per (variant, eps, repetition); eps = inf is the non-private learner."""
    tasks = [delayed(paper004_cell)(cfg, v, e, r, seed)
             for v in cfg.variants for e in (*cfg.epsilons, None) for r in range(cfg.reps)]
    rows = pd.DataFrame(_run(tasks, n_jobs, scheduler))
    if not peers:
        return rows
    peer = pd.DataFrame(_run([delayed(paper004_peer)(cfg, r, seed) for r in range(cfg.reps)], n_jobs, scheduler))
    return rows.merge(peer, on="rep")


def paper004_sweep(cfg: Paper004Config = Paper004Config(), *, seed: int = 0, n_jobs: int = 1,
                   scheduler: str | None = None) -> pd.DataFrame:
    """PEHE vs eps per variant plus the non-private learner (eps = inf), averaged over reps."""
    rows = paper004_rows(cfg, seed=seed, n_jobs=n_jobs, scheduler=scheduler)
    out = rows.groupby(["variant", "epsilon"], as_index=False)["pehe"].agg(["mean", "std"])
    return out.rename(columns={"mean": "pehe", "std": "pehe_sd"})


def paper004_quick(seed: int = 0, n_jobs: int = 1) -> pd.DataFrame:
    """CI version: dataset 1 with 600 samples, eps in {1, 1000}, linear and functional, one repetition."""
    cfg = Paper004Config(dataset=1, n=600, epsilons=(1.0, 1000.0), variants=("linear", "functional"), reps=1)
    return paper004_sweep(cfg, seed=seed, n_jobs=n_jobs)
