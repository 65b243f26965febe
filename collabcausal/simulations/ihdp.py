"""IHDP benchmark (Hill 2011; IHDP-100 in the IHDP-npci format): sqrt(PEHE) and ATE error per learner.

Data: any folder of ``ihdp_npci_<k>.csv`` replications (the bundled one holds replications 1-5,
see SOURCE.md beside them), with the header ``treatment, y_factual, y_cfactual, mu0, mu1,
x1..x25`` or without a header in that column order (the CEVAE distribution). x14 is coded 1/2 in
the source; it is recoded to 0/1 (as the CEVAE loader does). True CATE per unit is mu1 - mu0.
Metrics are within-sample, as usual for IHDP: sqrt(PEHE) over the units and |mean(tau^) - mean(tau)|.

Learners: non-private S, T, X, DR, R (gradient boosting base learners, logistic propensity); paper
000's DP-EBM DR, R, S learners; paper 004's DP-CATE R-learner (functional release evaluated at the
units, and the linear second stage released at the units as finite queries). Beside every row:
the constant-ATE baselines and the EconML learner of the same kind on the same data
(:mod:`collabcausal.simulations.cate_baselines`), over replications x seeds.

Bounds are declared, never read off the data. Covariates: the IHDP-npci format ships x1-x6
standardised, declared in [-continuous_bound, continuous_bound] (default 6 standard deviations),
binary ones in [0, 1]. Outcomes: IHDP outcomes have no range known in advance, so the private
learners need ``outcome_bounds`` declared by the user; the DP-EBM second stage's target range is
declared as +-(hi - lo)/2. What the bounds clip is counted per cell and warned about above 5%.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np
import pandas as pd
from numpy.typing import NDArray
from sklearn.linear_model import LogisticRegression

from collabcausal.errors import InputError
from collabcausal.estimators.dp.clipping import ClippingWarning
from collabcausal.estimators.dp.dp_cate import DPCATE
from collabcausal.estimators.dp.meta_algorithm import DPCATELearner
from collabcausal.estimators.metalearners import DRLearner, RLearner, SLearner, TLearner, XLearner
from collabcausal.estimators.metrics import pehe
from collabcausal.randomness import child_rng
from collabcausal.simulations.cate_baselines import (
    constant_ate_pehe,
    econml_effect,
    gradient_boosting,
    peer_of,
)

COVARIATES = tuple(f"x{i}" for i in range(1, 26))
NPCI_COLUMNS = ("treatment", "y_factual", "y_cfactual", "mu0", "mu1", *COVARIATES)
CONTINUOUS = 6
NON_PRIVATE = ("S", "T", "X", "DR", "R")
PRIVATE = ("DP-EBM DR", "DP-EBM R", "DP-EBM S", "DP-CATE R functional", "DP-CATE R linear")
DEFAULT_LEARNERS = NON_PRIVATE + PRIVATE[:4]
DELTA = 1e-5
FILE_NAME = re.compile(r"ihdp_npci_(\d+)\.csv")


@dataclass(frozen=True, eq=False)
class IHDPReplication:
    """One IHDP replication."""

    X: NDArray[np.float64]
    T: NDArray[np.int8]
    Y: NDArray[np.float64]
    tau: NDArray[np.float64]
    replication: int


def bundled_dir() -> Path:
    """The folder of the bundled replications 1-5."""
    return Path(str(resources.files("collabcausal.simulations") / "data" / "ihdp"))


def replications_in(data_dir: str | Path) -> tuple[int, ...]:
    """Replication numbers k of the ``ihdp_npci_<k>.csv`` files in ``data_dir``, sorted."""
    folder = Path(data_dir)
    if not folder.is_dir():
        raise InputError(f"IHDP folder {folder} does not exist", "pass --data-dir a folder of ihdp_npci_<k>.csv files")
    found = sorted(int(m.group(1)) for p in folder.iterdir() if (m := FILE_NAME.fullmatch(p.name)))
    if not found:
        raise InputError(f"no ihdp_npci_<k>.csv file in {folder}", "pass --data-dir a folder of IHDP-npci replications")
    return tuple(found)


def _read_npci(path: Path) -> pd.DataFrame:
    with path.open() as fh:
        first = fh.readline()
    has_header = "treatment" in first
    try:
        frame = pd.read_csv(path, header=0 if has_header else None)
    except (pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise InputError(f"{path.name} is not a CSV file ({exc})", "pass IHDP-npci CSV replications") from exc
    if frame.shape[1] != len(NPCI_COLUMNS):
        raise InputError(
            f"{path.name} has {frame.shape[1]} columns; the IHDP-npci format has {len(NPCI_COLUMNS)} "
            "(treatment, y_factual, y_cfactual, mu0, mu1, x1..x25)",
            "pass files in the IHDP-npci format",
        )
    if has_header:
        missing = [c for c in NPCI_COLUMNS if c not in frame.columns]
        if missing:
            raise InputError(f"{path.name} lacks the columns {missing}", "use the IHDP-npci header names")
        return frame[list(NPCI_COLUMNS)]
    frame.columns = list(NPCI_COLUMNS)
    return frame


def load_ihdp(replication: int, data_dir: str | Path | None = None) -> IHDPReplication:
    """Read and check ``<data_dir>/ihdp_npci_<replication>.csv`` (default: the bundled folder)."""
    folder = bundled_dir() if data_dir is None else Path(data_dir)
    path = folder / f"ihdp_npci_{replication}.csv"
    if not path.is_file():
        where = "bundled" if data_dir is None else f"in {folder}"
        raise InputError(f"IHDP replication {replication!r} is not {where}",
                         f"use one of {list(replications_in(folder))} or pass --data-dir")
    frame = _read_npci(path)
    values = frame.apply(pd.to_numeric, errors="coerce")
    bad = [c for c in NPCI_COLUMNS if not np.isfinite(values[c].to_numpy(float)).all()]
    if bad:
        raise InputError(f"{path.name}: missing or non-numeric values in column {bad[0]!r}", "fix or drop the file")
    T = values["treatment"].to_numpy(float)
    if not np.isin(T, (0.0, 1.0)).all() or T.min() == T.max():
        raise InputError(f"{path.name}: treatment must be 0/1 with both arms present", "fix the treatment column")
    X = values[list(COVARIATES)].to_numpy(float)
    x14 = COVARIATES.index("x14")
    if np.isin(X[:, x14], (1.0, 2.0)).all():
        X[:, x14] -= 1.0
    return IHDPReplication(X, T.astype(np.int8), values["y_factual"].to_numpy(float),
                           (values["mu1"] - values["mu0"]).to_numpy(float), replication)


def feature_bounds(continuous_bound: float = 6.0, n_covariates: int = len(COVARIATES)) -> list[tuple[float, float]]:
    """Declared covariate bounds: standardised x1-x6 in +-``continuous_bound``, the binary rest in [0, 1]."""
    return [(-continuous_bound, continuous_bound)] * CONTINUOUS + [(0.0, 1.0)] * (n_covariates - CONTINUOUS)


def _non_private(name: str, seed: int):
    logit = LogisticRegression(max_iter=1000)
    gb = gradient_boosting(seed)
    return {
        "S": lambda: SLearner(gb),
        "T": lambda: TLearner(gb),
        "X": lambda: XLearner(gb, propensity_model=logit),
        "DR": lambda: DRLearner(logit, gb, gradient_boosting(seed), random_state=seed),
        "R": lambda: RLearner(gb, logit, gradient_boosting(seed), random_state=seed),
    }[name]()


@dataclass(frozen=True)
class Estimate:
    """tau^ of one learner on one replication, with what the declared bounds clipped (share of Y; NaN if none)."""

    tau_hat: NDArray[np.float64]
    clipped_outcomes: float = np.nan


def estimate(
    name: str,
    data: IHDPReplication,
    epsilon: float | None,
    seed: int,
    *,
    outcome_bounds: tuple[float, float] | None = None,
    continuous_bound: float = 6.0,
) -> Estimate:
    """tau^ at the replication's units from learner ``name`` (``epsilon`` and bounds for the private ones)."""
    if name in NON_PRIVATE:
        return Estimate(_non_private(name, seed).fit(data.Y, data.T, X=data.X).effect(data.X))
    if name not in PRIVATE:
        raise InputError(f"unknown IHDP learner {name!r}", f"use one of {', '.join(NON_PRIVATE + PRIVATE)}")
    if epsilon is None:
        raise InputError(f"learner {name!r} is private and needs epsilon", "pass epsilon > 0")
    if outcome_bounds is None:
        raise InputError(
            f"learner {name!r} needs declared public outcome bounds: IHDP outcomes have no range known in advance",
            "declare them: outcome_bounds=(low, high), or --outcome-bounds LOW HIGH",
        )
    common = {"epsilon": epsilon, "delta": DELTA, "feature_bounds": feature_bounds(continuous_bound, data.X.shape[1]),
              "outcome_bounds": outcome_bounds, "random_state": child_rng(seed, name, data.replication)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ClippingWarning)  # counted below and summarised by the table
        if name.startswith("DP-EBM"):
            half = 0.5 * (outcome_bounds[1] - outcome_bounds[0])
            model = DPCATELearner(name.split()[-1].lower(), pseudo_outcome_bounds=(-half, half), **common)
            tau_hat = model.fit(data.Y, data.T, X=data.X).effect(data.X)
        else:
            stage = name.split()[-1]
            model = DPCATE("r", stage, **common).fit(data.Y, data.T, X=data.X)
            if stage == "functional":
                tau_hat = model.release_function()(data.X)
            else:
                tau_hat = model.release(data.X).estimates
    return Estimate(tau_hat, model.clipping_[0].share)


def _row(name, eps, rep, seed, data: IHDPReplication, est: Estimate | None, peer: float, note: str) -> dict:
    tau_hat = None if est is None else est.tau_hat
    own_ate = np.nan if tau_hat is None else float(np.mean(tau_hat))
    return {"replication": rep, "seed": seed, "learner": name, "epsilon": np.inf if eps is None else eps,
            "sqrt_pehe": np.nan if tau_hat is None else pehe(data.tau, tau_hat),
            "ate_error": abs(own_ate - float(np.mean(data.tau))),
            "econml_sqrt_pehe": peer, "const_true_sqrt_pehe": constant_ate_pehe(data.tau),
            "const_own_sqrt_pehe": np.nan if tau_hat is None else constant_ate_pehe(data.tau, own_ate),
            "clipped_outcomes": np.nan if est is None else est.clipped_outcomes, "note": note}


def ihdp_table(
    replications: Sequence[int] | None = None,
    learners: Sequence[str] = DEFAULT_LEARNERS,
    epsilons: Sequence[float] = (1.0, 8.0),
    *,
    seeds: Sequence[int] = (0, 1, 2, 3, 4),
    data_dir: str | Path | None = None,
    outcome_bounds: tuple[float, float] | None = None,
    continuous_bound: float = 6.0,
) -> pd.DataFrame:
    """One row per (replication, seed, learner, epsilon): sqrt(PEHE), ATE error and the baselines.

    A refused private learner (e.g. predicted noise above the outcome range) gets a row with no
    metrics and the one-line reason in ``note``. The EconML peer of each learner is fitted once per
    (replication, seed).
    """
    folder = bundled_dir() if data_dir is None else Path(data_dir)
    reps = replications_in(folder) if replications is None else tuple(replications)
    unknown = [n for n in learners if n not in NON_PRIVATE + PRIVATE]
    if unknown:
        raise InputError(f"unknown IHDP learner(s) {unknown}", f"use {', '.join(NON_PRIVATE + PRIVATE)}")
    if outcome_bounds is None and any(n in PRIVATE for n in learners):
        raise InputError("the private learners need declared public outcome bounds: IHDP outcomes have no range "
                         "known in advance", "declare them (outcome_bounds=(low, high) or --outcome-bounds LOW HIGH)")
    rows = []
    for rep in reps:
        data = load_ihdp(rep, folder)
        for seed in seeds:
            peers = {k: pehe(data.tau, econml_effect(k, data.Y, data.T, data.X, seed))
                     for k in dict.fromkeys(peer_of(n) for n in learners)}
            for name in learners:
                for eps in (None,) if name in NON_PRIVATE else tuple(epsilons):
                    note = ""
                    try:
                        est = estimate(name, data, eps, seed, outcome_bounds=outcome_bounds,
                                       continuous_bound=continuous_bound)
                    except InputError as exc:
                        est, note = None, str(exc)
                    rows.append(_row(name, eps, rep, seed, data, est, peers[peer_of(name)], note))
    return pd.DataFrame(rows)


def clipping_notes(table: pd.DataFrame, threshold: float = 0.05) -> list[str]:
    """One line per (replication, learner, epsilon) whose declared outcome bounds clipped > ``threshold``."""
    over = table[table["clipped_outcomes"] > threshold]
    worst = over.groupby(["replication", "learner", "epsilon"], sort=False)["clipped_outcomes"].max()
    return [f"warning: replication {rep}, {name} (eps {eps:g}): {100 * share:.1f}% of the outcomes lie outside the "
            "declared outcome bounds and were clipped" for (rep, name, eps), share in worst.items()]


def ihdp_quick(seed: int = 0) -> pd.DataFrame:
    """CI version: replication 1, two seeds; S and DR non-private, DP-EBM S at eps = 8, outcome bounds (-5, 25)."""
    return ihdp_table((1,), ("S", "DR", "DP-EBM S"), (8.0,), seeds=(seed, seed + 1), outcome_bounds=(-5.0, 25.0))
