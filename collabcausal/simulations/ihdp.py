"""IHDP benchmark (Hill 2011; replications 1-5 of IHDP-100): sqrt(PEHE) and ATE error per learner.

Data: ``collabcausal/simulations/data/ihdp/ihdp_npci_{1..5}.csv`` (see SOURCE.md beside them).
x14 is coded 1/2 in the source; we recode it to 0/1 (as the CEVAE loader does). True CATE per unit
is mu1 - mu0. Metrics are within-sample, as usual for IHDP: sqrt(PEHE) over the 747 units and
|mean(tau^) - mean(tau)|.

Learners: non-private S, T, X, DR, R (gradient boosting base learners, logistic propensity); paper
000's DP-EBM DR, R, S learners; paper 004's DP-CATE R-learner (linear second stage released at the
747 units as finite queries, and the functional release evaluated there). The declared public
bounds (ours, not estimated from the data): continuous covariates x1-x6 in [-6, 6], binary ones in
[0, 1], outcome in [-3, 20].
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources

import numpy as np
import pandas as pd
from numpy.typing import NDArray
from sklearn.ensemble import GradientBoostingRegressor
from sklearn.linear_model import LogisticRegression

from collabcausal.errors import InputError
from collabcausal.estimators.dp.dp_cate import DPCATE
from collabcausal.estimators.dp.meta_algorithm import DPCATELearner
from collabcausal.estimators.metalearners import DRLearner, RLearner, SLearner, TLearner, XLearner
from collabcausal.estimators.metrics import pehe
from collabcausal.randomness import child_rng

REPLICATIONS = (1, 2, 3, 4, 5)
COVARIATES = tuple(f"x{i}" for i in range(1, 26))
CONTINUOUS = 6
FEATURE_BOUNDS = ((-6.0, 6.0),) * CONTINUOUS + ((0.0, 1.0),) * (len(COVARIATES) - CONTINUOUS)
OUTCOME_BOUNDS = (-3.0, 20.0)
NON_PRIVATE = ("S", "T", "X", "DR", "R")
PRIVATE = ("DP-EBM DR", "DP-EBM R", "DP-EBM S", "DP-CATE R linear", "DP-CATE R functional")


@dataclass(frozen=True, eq=False)
class IHDPReplication:
    """One IHDP replication."""

    X: NDArray[np.float64]
    T: NDArray[np.int8]
    Y: NDArray[np.float64]
    tau: NDArray[np.float64]
    replication: int


def load_ihdp(replication: int) -> IHDPReplication:
    """Read ``ihdp_npci_{replication}.csv`` (x14 recoded from 1/2 to 0/1)."""
    if replication not in REPLICATIONS:
        raise InputError(f"IHDP replication {replication!r} is not bundled", "use 1, 2, 3, 4 or 5")
    path = resources.files("collabcausal.simulations") / "data" / "ihdp" / f"ihdp_npci_{replication}.csv"
    with resources.as_file(path) as p:
        frame = pd.read_csv(p)
    X = frame[list(COVARIATES)].to_numpy(dtype=float)
    X[:, COVARIATES.index("x14")] -= 1.0
    return IHDPReplication(X, frame["treatment"].to_numpy(np.int8), frame["y_factual"].to_numpy(float),
                           (frame["mu1"] - frame["mu0"]).to_numpy(float), replication)


def _gb() -> GradientBoostingRegressor:
    return GradientBoostingRegressor(n_estimators=100, max_depth=3, random_state=0)


def _non_private(name: str, seed: int):
    logit = LogisticRegression(max_iter=1000)
    return {
        "S": lambda: SLearner(_gb()),
        "T": lambda: TLearner(_gb()),
        "X": lambda: XLearner(_gb(), propensity_model=logit),
        "DR": lambda: DRLearner(logit, _gb(), _gb(), random_state=seed),
        "R": lambda: RLearner(_gb(), logit, _gb(), random_state=seed),
    }[name]()


def estimate(name: str, data: IHDPReplication, epsilon: float | None, seed: int) -> NDArray[np.float64]:
    """tau^ at the replication's units from learner ``name`` (``epsilon`` for the private ones)."""
    if name in NON_PRIVATE:
        return _non_private(name, seed).fit(data.Y, data.T, X=data.X).effect(data.X)
    if epsilon is None:
        raise InputError(f"learner {name!r} is private and needs epsilon", "pass epsilon > 0")
    common = {"epsilon": epsilon, "feature_bounds": FEATURE_BOUNDS, "outcome_bounds": OUTCOME_BOUNDS}
    if name.startswith("DP-EBM"):
        kind = name.split()[-1].lower()
        span = 0.5 * (OUTCOME_BOUNDS[1] - OUTCOME_BOUNDS[0])
        model = DPCATELearner(kind, pseudo_outcome_bounds=(-span, span), random_state=child_rng(seed, name), **common)
        return model.fit(data.Y, data.T, X=data.X).effect(data.X)
    stage = name.split()[-1]
    model = DPCATE("r", stage, random_state=child_rng(seed, name), **common).fit(data.Y, data.T, X=data.X)
    if stage == "functional":
        return model.release_function()(data.X)
    return model.release(data.X).estimates


def ihdp_table(
    replications: Sequence[int] = REPLICATIONS,
    learners: Sequence[str] = NON_PRIVATE + PRIVATE,
    epsilons: Sequence[float] = (1.0, 8.0),
    *,
    seed: int = 0,
) -> pd.DataFrame:
    """sqrt(PEHE) and ATE error for every learner (private ones at each epsilon), per replication."""
    rows = []
    for rep in replications:
        data = load_ihdp(rep)
        for name in learners:
            for eps in (None,) if name in NON_PRIVATE else tuple(epsilons):
                tau_hat = estimate(name, data, eps, seed)
                rows.append({"replication": rep, "learner": name, "epsilon": np.inf if eps is None else eps,
                             "sqrt_pehe": pehe(data.tau, tau_hat),
                             "ate_error": abs(float(np.mean(tau_hat) - np.mean(data.tau)))})
    return pd.DataFrame(rows)


def ihdp_quick(seed: int = 0) -> pd.DataFrame:
    """CI version: replication 1; S and DR non-private, DP-EBM S at eps = 8."""
    return ihdp_table((1,), ("S", "DR", "DP-EBM S"), (8.0,), seed=seed)
