"""Data sets for simulations: bundled LaLonde data, the DC-QE synthetic generator, any CSV.

A :class:`CausalDataset` is one table with declared covariates, treatment, outcome, the estimand
its reproduction targets, a benchmark effect (the truth or an experimental estimate) and, for
synthetic data, the true propensity scores.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from importlib import resources

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from collabcausal.errors import InputError
from collabcausal.party.table import PartyTable, read_table_file
from collabcausal.randomness import as_generator


@dataclass(frozen=True, eq=False)
class CausalDataset:
    """A table ready to be split into a grid of parties.

    Attributes
    ----------
    name : str
    frame : pandas.DataFrame
        Covariates, treatment and outcome columns.
    covariates : tuple of str
    treatment, outcome : str
    estimand : {"ate", "att"}
        The estimand of the reproduction.
    benchmark : float or None
        The true effect (synthetic) or an experimental benchmark (LaLonde: NSW difference).
    true_propensity : ndarray or None
    column_groups : tuple of tuple of str
        The default split of covariates into column groups (parties of one row).
    description : str
    outcome_unit : str
        The outcome's unit, for figure axes and reports (e.g. "$1000"); empty if unknown.
    """

    name: str
    frame: pd.DataFrame
    covariates: tuple[str, ...]
    treatment: str
    outcome: str
    estimand: str = "ate"
    benchmark: float | None = None
    true_propensity: NDArray[np.float64] | None = None
    column_groups: tuple[tuple[str, ...], ...] = field(default=())
    description: str = ""
    outcome_unit: str = ""

    def __post_init__(self) -> None:
        # Validate once, at the door, with the same rules a party applies to its table.
        PartyTable.from_frame(
            self.frame,
            self.covariates,
            treatment=self.treatment,
            outcome=self.outcome,
            source=self.name,
            min_subjects=2,
        )
        if not self.column_groups:
            object.__setattr__(self, "column_groups", (tuple(self.covariates),))
        grouped = [c for g in self.column_groups for c in g]
        if sorted(grouped) != sorted(self.covariates):
            raise InputError(
                f"{self.name}: column groups {self.column_groups} do not partition the covariates",
                "list every covariate in exactly one column group",
            )

    @property
    def n_subjects(self) -> int:
        """Number of rows."""
        return int(self.frame.shape[0])

    def covariate_ranges(self) -> dict[str, tuple[float, float]]:
        """Min and max of every covariate over the whole data set.

        Paper 003 (section 5.1) draws its anchor uniformly on these. They come from all the data,
        so they are a simulation convenience, not private; deployments declare public ranges.
        """
        return {c: (float(self.frame[c].min()), float(self.frame[c].max())) for c in self.covariates}

    @cached_property
    def arrays(self) -> tuple[NDArray[np.float64], NDArray[np.int8], NDArray[np.float64]]:
        """Covariates (in ``covariates`` order), treatment and outcome as arrays, built once."""
        X = self.frame[list(self.covariates)].to_numpy(dtype=np.float64)
        return X, self.frame[self.treatment].to_numpy().astype(np.int8), self.frame[self.outcome].to_numpy(np.float64)


LALONDE_LEFT = ("age", "married", "education", "nodegree")
LALONDE_RIGHT = ("hispanic", "black", "re74", "re75")


def lalonde_experimental_benchmark() -> float:
    """NSW experimental difference in mean re78 (treated - randomized controls), in $1000: 1.794."""
    treated, control = _lalonde_file("nsw_treated.csv"), _lalonde_file("nsw_control.csv")
    return float(treated["re78"].mean() - control["re78"].mean()) / 1000.0


def load_lalonde() -> CausalDataset:
    """NSW treated (185) + PSID-1 controls (2490), outcome re78 in $1000 (paper 003, section 5.3).

    Dehejia & Wahba (1999) RE74 subsample; see ``simulations/data/lalonde/SOURCE.md``. The ATT
    benchmark is the NSW experimental difference, 1.794 ($1000).
    """
    frame = pd.concat([_lalonde_file("nsw_treated.csv"), _lalonde_file("psid_controls.csv")], ignore_index=True)
    frame["re78"] = frame["re78"] / 1000.0
    return CausalDataset(
        name="lalonde",
        frame=frame,
        covariates=LALONDE_LEFT + LALONDE_RIGHT,
        treatment="treat",
        outcome="re78",
        estimand="att",
        benchmark=lalonde_experimental_benchmark(),
        column_groups=(LALONDE_LEFT, LALONDE_RIGHT),
        description="NSW treated + PSID controls (Dehejia-Wahba), re78 in $1000, ATT benchmark 1.794",
        outcome_unit="$1000 of 1978 earnings",
    )


# Experiment I of paper 003 (section 5.2). Its formulas were lost from the text copy; ours are
# documented in docs/dcqe-synthetic.md: X ~ N(0, S) with unit variances and equal correlation
# RHO, logit P(T=1|x) = ALPHA * sum_k x_k, Y = T + BETA * sum_k x_k + N(0, 1), so every covariate
# is positively related to treatment and outcome and the true ATE is 1.
SYNTHETIC_RHO = 0.3
SYNTHETIC_ALPHA = 0.3
SYNTHETIC_BETA = 0.6


def make_dcqe_synthetic(
    n_subjects: int = 1000, seed: int | np.random.Generator | None = 0, *, n_covariates: int = 6
) -> CausalDataset:
    """The DC-QE Experiment I generator: equicorrelated covariates, true ATE 1.

    Parameters
    ----------
    n_subjects : int
        1000 in paper 003 (a 2x2 grid of 500 subjects x 3 covariates).
    seed : int or Generator
    n_covariates : int
        6 in paper 003; the first half form the left column group, the rest the right one.
    """
    if int(n_covariates) < 2:
        raise InputError(f"n_covariates must be at least 2, got {n_covariates}", "use 6 as in paper 003")
    rng = as_generator(seed)
    m = int(n_covariates)
    names = tuple(f"x{k}" for k in range(1, m + 1))
    cov = np.full((m, m), SYNTHETIC_RHO) + (1 - SYNTHETIC_RHO) * np.eye(m)
    X = rng.multivariate_normal(np.zeros(m), cov, size=n_subjects, method="cholesky")
    e = 1.0 / (1.0 + np.exp(-SYNTHETIC_ALPHA * X.sum(axis=1)))
    t = (rng.random(n_subjects) < e).astype(np.int8)
    y = t + SYNTHETIC_BETA * X.sum(axis=1) + rng.normal(size=n_subjects)
    frame = pd.DataFrame(X, columns=list(names))
    frame["treat"], frame["y"] = t, y
    return CausalDataset(
        name="dcqe-synthetic",
        frame=frame,
        covariates=names,
        treatment="treat",
        outcome="y",
        estimand="ate",
        benchmark=1.0,
        true_propensity=e,
        column_groups=(names[: m // 2], names[m // 2 :]),
        description="paper 003 Experiment I analogue: 6 equicorrelated covariates, true ATE 1",
        outcome_unit="outcome units",
    )


def load_csv_dataset(
    path: str,
    covariates: Sequence[str],
    treatment: str,
    outcome: str,
    *,
    estimand: str = "ate",
    benchmark: float | None = None,
    column_groups: Sequence[Sequence[str]] | None = None,
) -> CausalDataset:
    """A user's CSV or Parquet file as a dataset (validated like a party's table)."""
    frame = read_table_file(path)
    return CausalDataset(
        name=str(path),
        frame=frame,
        covariates=tuple(covariates),
        treatment=treatment,
        outcome=outcome,
        estimand=estimand,
        benchmark=benchmark,
        column_groups=tuple(tuple(g) for g in column_groups) if column_groups else (),
    )


def _lalonde_file(name: str) -> pd.DataFrame:
    with resources.files("collabcausal.simulations").joinpath("data", "lalonde", name).open("r") as fh:
        return pd.read_csv(fh)
