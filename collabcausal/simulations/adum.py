"""Reproduction of paper 001's synthetic experiments (section 3.1, Figures 1 and 2).

Data (section 3.1.1): ``X ~ U(-1, 1)``, ``T ~ Bernoulli(0.5)``, ``f_C = 0``, ``f_T = sin``,
``Y = T sin(X) + N(0, sigma^2)``, so the true uplift is ``sin(x)``. Each split draws ``n`` fresh
points, holds out ``test_fraction`` for the test PEHE, and tunes each method's hyper-parameter
(eps-ADUM: number of groups p of a regular cut; eps-TM and AdaSSP-TM: polynomial degree) on a
validation part of the training rows, never on the test rows; the chosen value is refitted on all
training rows. Tuning uses the true uplift of the validation rows, as a synthetic study can, and
is not itself privacy-accounted (as in the paper).

Methods (all epsilon-DP for the whole model; AdaSSP (epsilon, delta)-DP):

* ``eps-ADUM``: :class:`~collabcausal.estimators.dp.adum.EpsADUM` on a regular cut;
* ``eps-TM``: two functional-mechanism regressions on polynomial features (the paper's);
* ``AdaSSP-TM``: two AdaSSP regressions on polynomial features (a stronger modern baseline).

Outcomes are declared in ``[-(1 + 3 sigma), 1 + 3 sigma]`` for every method. Noise is drawn with
seeded numpy Generators (:mod:`collabcausal.estimators.dp.mechanisms`' reproducible, insecure
mode) so a seed reproduces every number.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from joblib import Parallel, delayed
from numpy.typing import NDArray

from collabcausal.errors import InputError
from collabcausal.estimators.dp.adum import EpsADUM
from collabcausal.estimators.dp.linear_baselines import AdaSSPRegression, DPTwoModel, FunctionalMechanismRegression
from collabcausal.estimators.dp.partitions import regular_cut
from collabcausal.estimators.metrics import pehe
from collabcausal.randomness import child_rng

EPSILONS: tuple[float, ...] = (0.1, 0.5, 1.0, 2.0, 5.0, 10.0, 50.0, 100.0)
FIGURE2_EPSILONS: tuple[float, ...] = (0.1, 1.0, 5.0, 50.0, 100.0)
P_GRID: tuple[int, ...] = (1, 2, 3, 4, 5, 6, 8, 10, 12, 15, 20, 25, 30, 40, 50, 60, 80, 100, 150, 200)
DEGREES: tuple[int, ...] = (1, 2, 3, 4, 5)
METHODS: tuple[str, ...] = ("eps-ADUM", "eps-TM", "AdaSSP-TM")
ADASSP_DELTA = 1e-6


@dataclass(frozen=True)
class UpliftData:
    """A synthetic RCT sample: covariate (n, 1), treatment, outcome and true uplift."""

    x: NDArray[np.float64]
    t: NDArray[np.int8]
    y: NDArray[np.float64]
    tau: NDArray[np.float64]

    def rows(self, index: NDArray[np.int64]) -> UpliftData:
        """The subset of rows ``index``."""
        return UpliftData(self.x[index], self.t[index], self.y[index], self.tau[index])


def synthetic_uplift(n: int, sigma: float, rng: np.random.Generator) -> UpliftData:
    """Paper 001, section 3.1.1: ``Y = T sin(X) + xi``, ``X ~ U(-1, 1)``, ``xi ~ N(0, sigma^2)``."""
    x = rng.uniform(-1.0, 1.0, size=(n, 1))
    t = rng.binomial(1, 0.5, size=n).astype(np.int8)
    tau = np.sin(x[:, 0])
    return UpliftData(x, t, t * tau + rng.normal(0.0, sigma, size=n), tau)


def outcome_bounds(sigma: float) -> tuple[float, float]:
    """Declared outcome range ``±(1 + 3 sigma)`` (clips ~0.3% of outcomes)."""
    half = 1.0 + 3.0 * float(sigma)
    return -half, half


def fit_predict(
    method: str,
    hyper: int,
    epsilon: float,
    train: UpliftData,
    x_eval: NDArray[np.float64],
    *,
    sigma: float,
    rng: np.random.Generator,
) -> NDArray[np.float64]:
    """Fit ``method`` with hyper-parameter ``hyper`` (p or degree) on ``train``; uplift at ``x_eval``."""
    bounds = outcome_bounds(sigma)
    if method == "eps-ADUM":
        model = EpsADUM(regular_cut("x", (-1.0, 1.0), hyper), epsilon, bounds, rng=rng).fit(train.x, train.t, train.y)
        return model.predict(x_eval)
    if method == "eps-TM":
        make = lambda: FunctionalMechanismRegression(epsilon, rng=rng)  # noqa: E731
    elif method == "AdaSSP-TM":
        make = lambda: AdaSSPRegression(epsilon, ADASSP_DELTA, rng=rng)  # noqa: E731
    else:
        raise InputError(f"unknown method {method!r}", f"use one of {METHODS}")
    return DPTwoModel(make, hyper, [(-1.0, 1.0)], bounds).fit(train.x, train.t, train.y).predict(x_eval)


def _split(n: int, sigma: float, seed: int, split: int, test_fraction: float) -> tuple[UpliftData, UpliftData]:
    data = synthetic_uplift(n, sigma, child_rng(seed, "data", split))
    order = child_rng(seed, "split", split).permutation(n)
    n_test = round(test_fraction * n)
    return data.rows(order[n_test:]), data.rows(order[:n_test])


def _figure1_split(
    split: int,
    *,
    n: int,
    sigma: float,
    epsilons: Sequence[float],
    grids: dict[str, Sequence[int]],
    seed: int,
    test_fraction: float,
    validation_fraction: float,
) -> list[dict]:
    train, test = _split(n, sigma, seed, split, test_fraction)
    n_val = round(validation_fraction * train.tau.size)
    fit_part, val_part = train.rows(np.arange(n_val, train.tau.size)), train.rows(np.arange(n_val))
    rows = []
    for eps in epsilons:
        for method in METHODS:
            scores = [
                pehe(
                    val_part.tau,
                    fit_predict(
                        method,
                        h,
                        eps,
                        fit_part,
                        val_part.x,
                        sigma=sigma,
                        rng=child_rng(seed, "tune", split, eps, method, h),
                    ),
                )
                for h in grids[method]
            ]
            best = grids[method][int(np.argmin(scores))]
            rng = child_rng(seed, "test", split, eps, method)
            pred = fit_predict(method, best, eps, train, test.x, sigma=sigma, rng=rng)
            rows.append({"epsilon": eps, "method": method, "split": split, "hyper": best, "pehe": pehe(test.tau, pred)})
    return rows


def figure1(
    *,
    n: int = 20000,
    n_splits: int = 20,
    sigma: float = 1.0,
    epsilons: Sequence[float] = EPSILONS,
    p_grid: Sequence[int] = P_GRID,
    degrees: Sequence[int] = DEGREES,
    seed: int = 0,
    test_fraction: float = 0.3,
    validation_fraction: float = 0.25,
    n_jobs: int = 1,
) -> pd.DataFrame:
    """Test PEHE per (epsilon, method, split) with tuned hyper-parameters (paper 001, Figure 1).

    Returns a frame with columns ``epsilon, method, split, hyper, pehe``.
    """
    grids = {"eps-ADUM": tuple(p_grid), "eps-TM": tuple(degrees), "AdaSSP-TM": tuple(degrees)}
    runs = Parallel(n_jobs=n_jobs)(
        delayed(_figure1_split)(
            s,
            n=n,
            sigma=sigma,
            epsilons=epsilons,
            grids=grids,
            seed=seed,
            test_fraction=test_fraction,
            validation_fraction=validation_fraction,
        )
        for s in range(n_splits)
    )
    return pd.DataFrame([row for rows in runs for row in rows])


def _figure2_split(
    split: int,
    *,
    n: int,
    sigma: float,
    epsilons: Sequence[float],
    p_grid: Sequence[int],
    seed: int,
    test_fraction: float,
) -> list[dict]:
    train, test = _split(n, sigma, seed, split, test_fraction)
    return [
        {
            "epsilon": eps,
            "p": p,
            "split": split,
            "pehe": pehe(
                test.tau,
                fit_predict("eps-ADUM", p, eps, train, test.x, sigma=sigma, rng=child_rng(seed, "fig2", split, eps, p)),
            ),
        }
        for eps in epsilons
        for p in p_grid
    ]


def figure2(
    *,
    n: int = 20000,
    n_splits: int = 20,
    sigma: float = 0.1,
    epsilons: Sequence[float] = FIGURE2_EPSILONS,
    p_grid: Sequence[int] = P_GRID,
    seed: int = 0,
    test_fraction: float = 0.3,
    n_jobs: int = 1,
) -> pd.DataFrame:
    """Test PEHE of eps-ADUM per (epsilon, p, split) (paper 001, Figure 2). Columns ``epsilon, p, split, pehe``."""
    runs = Parallel(n_jobs=n_jobs)(
        delayed(_figure2_split)(
            s, n=n, sigma=sigma, epsilons=epsilons, p_grid=p_grid, seed=seed, test_fraction=test_fraction
        )
        for s in range(n_splits)
    )
    return pd.DataFrame([row for rows in runs for row in rows])


def summarize(frame: pd.DataFrame, by: Sequence[str]) -> pd.DataFrame:
    """Mean and SD of test PEHE (and the most frequent hyper-parameter, if any) per group."""
    agg = {"pehe_mean": ("pehe", "mean"), "pehe_sd": ("pehe", "std")}
    if "hyper" in frame:
        agg["hyper_mode"] = ("hyper", lambda h: int(h.mode().iloc[0]))
    return frame.groupby(list(by), sort=True).agg(**agg).reset_index()


def best_p(frame2: pd.DataFrame) -> pd.Series:
    """The p minimising mean test PEHE, per epsilon (Figure 2's minima)."""
    means = frame2.groupby(["epsilon", "p"])["pehe"].mean().reset_index()
    return means.loc[means.groupby("epsilon")["pehe"].idxmin()].set_index("epsilon")["p"]


def quick(seed: int = 0) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A fast version of both figures (n = 6000, 3 splits, fewer epsilons) for the test-suite."""
    fig1 = figure1(n=6000, n_splits=3, epsilons=(0.1, 1.0, 100.0), p_grid=(1, 2, 4, 8, 16, 32), seed=seed)
    fig2 = figure2(n=6000, n_splits=3, epsilons=(0.1, 100.0), p_grid=(1, 2, 4, 8, 16, 32, 64, 128), seed=seed)
    return fig1, fig2
