"""Bootstrap inference for CATE learners, as EconML's ``fit(..., inference="bootstrap")``.

The learner is refitted on ``n_bootstrap_samples`` resamples of the subjects drawn with
replacement within each arm (so both arms are always present), and every interval comes from the
replicates of the quantity it is about: ``effect(X)`` per row, or its average for the ATE/ATT.
Three interval types, as in EconML's ``BootstrapInference``:

* ``"pivot"`` (EconML's default, the basic bootstrap): ``(2 est - q_{1-alpha/2}, 2 est - q_{alpha/2})``;
* ``"percentile"``: ``(q_{alpha/2}, q_{1-alpha/2})``;
* ``"normal"``: ``est -/+ z_{1-alpha/2} sd``, sd the replicates' standard deviation (ddof = 1);

where ``q`` are quantiles of the replicates and ``est`` the full-sample estimate.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray
from scipy.special import ndtri
from sklearn.base import clone

from collabcausal.errors import InputError
from collabcausal.estimators.bootstrap import run_replicates, stratified_resample
from collabcausal.randomness import child_rng

BootstrapType = Literal["pivot", "percentile", "normal"]
BOOTSTRAP_TYPES: tuple[str, ...] = ("pivot", "percentile", "normal")


@dataclass(frozen=True)
class BootstrapInference:
    """How to bootstrap a CATE learner; pass it (or ``"bootstrap"``) as ``fit(..., inference=)``.

    Parameters
    ----------
    n_bootstrap_samples : int, default 100
        Number of refits (EconML's default).
    bootstrap_type : {"pivot", "percentile", "normal"}, default "pivot"
        Interval type (module docstring).
    random_state : int, optional
        Seed of the resamples (replicate b uses ``child_rng(random_state, "bootstrap", b)``);
        None draws a fresh seed.
    n_jobs : int, default 1
        Parallel refits (joblib; -1 all cores); the replicates do not depend on it.
    """

    n_bootstrap_samples: int = 100
    bootstrap_type: BootstrapType = "pivot"
    random_state: int | None = None
    n_jobs: int = 1

    @classmethod
    def from_argument(cls, inference: str | BootstrapInference | None) -> BootstrapInference | None:
        """The inference a ``fit(..., inference=...)`` argument asks for (None: no intervals)."""
        if inference is None or isinstance(inference, BootstrapInference):
            return inference
        if inference == "bootstrap":
            return cls()
        raise InputError(f"unknown inference {inference!r}", "pass None, 'bootstrap' or a BootstrapInference(...)")

    def refit(self, learner: Any, y: NDArray, t: NDArray, X: NDArray) -> list[Any]:
        """Unfitted clones of ``learner`` fitted on resamples stratified by arm, in replicate order."""
        if int(self.n_bootstrap_samples) < 2:
            raise InputError(f"n_bootstrap_samples must be >= 2, got {self.n_bootstrap_samples!r}", "pass e.g. 100")
        if self.bootstrap_type not in BOOTSTRAP_TYPES:
            raise InputError(f"unknown bootstrap_type {self.bootstrap_type!r}", f"use one of {BOOTSTRAP_TYPES}")
        seed = np.random.default_rng().integers(2**63) if self.random_state is None else int(self.random_state)
        arms = [np.flatnonzero(t == 0), np.flatnonzero(t == 1)]

        def one(b: int) -> Any:
            picks = stratified_resample([arm.size for arm in arms], child_rng(seed, "bootstrap", b))
            rows = np.concatenate([arm[pick] for arm, pick in zip(arms, picks, strict=True)])
            return clone(learner).fit(y[rows], t[rows], X=X[rows])

        return run_replicates(one, self.n_bootstrap_samples, n_jobs=self.n_jobs, desc="bootstrap refits")

    def interval(self, estimate: NDArray | float, replicates: NDArray, alpha: float) -> tuple[Any, Any]:
        """``(lower, upper)`` of ``estimate`` from ``replicates`` (first axis: the replicates)."""
        if not 0.0 < alpha < 1.0:
            raise InputError(f"alpha must lie in (0, 1), got {alpha!r}", "pass e.g. alpha=0.05 for a 95% interval")
        est = np.asarray(estimate, dtype=float)
        if self.bootstrap_type == "normal":
            half = float(ndtri(1.0 - alpha / 2.0)) * replicates.std(axis=0, ddof=1)
            lower, upper = est - half, est + half
        else:
            q_lo, q_hi = np.quantile(replicates, [alpha / 2.0, 1.0 - alpha / 2.0], axis=0)
            lower, upper = (2.0 * est - q_hi, 2.0 * est - q_lo) if self.bootstrap_type == "pivot" else (q_lo, q_hi)
        return _scalar_or_array(lower), _scalar_or_array(upper)


def replicate(estimators: list[Any], statistic: Callable[[Any], Any]) -> NDArray[np.float64]:
    """``statistic`` of every bootstrap estimator, stacked along a first axis."""
    return np.asarray([statistic(est) for est in estimators], dtype=float)


def _scalar_or_array(value: NDArray) -> float | NDArray[np.float64]:
    return float(value) if np.ndim(value) == 0 else np.asarray(value, dtype=float)
