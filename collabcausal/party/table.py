"""A party's private table: loading and validation.

The table is declared, never guessed: covariate columns, an optional treatment and outcome (the
row group's label holder has them), and an optional subject id column used for alignment.
Every problem is reported as one :class:`~collabcausal.errors.InputError` naming the file, the
column and the fix; nothing is written anywhere while loading.

Constant covariates are refused by default (``on_constant="error"``): standardization divides by
the column's standard deviation, and a silently dropped column changes the study's covariate set
without the coordinator knowing (:class:`ConstantCovariateError`, which names the column so a
caller can say why in its own terms). Pass ``on_constant="drop"`` to drop them with a warning.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from collabcausal.errors import InputError
from collabcausal.estimators.validation import check_treatment

DEFAULT_MIN_SUBJECTS = 10


class ConstantCovariateError(InputError):
    """A declared covariate that takes one value in the table (``column`` names it)."""

    def __init__(self, where: str, column: str) -> None:
        self.column = column
        super().__init__(f"{where}: covariate {column!r} is constant", "remove it from the declared covariates")


@dataclass(frozen=True, eq=False)
class PartyTable:
    """A validated private table.

    Attributes
    ----------
    covariates : ndarray of shape (n_subjects, n_covariates)
    covariate_names : tuple of str
    treatment : ndarray of int8 or None
        0/1, present on label holders.
    outcome : ndarray of float or None
    subject_ids : ndarray of str or None
    source : str
        Where the table came from (file path or ``"<DataFrame>"``), for messages.
    """

    covariates: NDArray[np.float64]
    covariate_names: tuple[str, ...]
    treatment: NDArray[np.int8] | None = None
    outcome: NDArray[np.float64] | None = None
    subject_ids: NDArray[np.str_] | None = None
    source: str = "<DataFrame>"

    @property
    def n_subjects(self) -> int:
        """Number of rows."""
        return int(self.covariates.shape[0])

    @property
    def has_labels(self) -> bool:
        """True when the table holds treatment and outcome (the row group's label holder)."""
        return self.treatment is not None and self.outcome is not None

    def column(self, name: str) -> NDArray[np.float64]:
        """One covariate column by name."""
        try:
            return self.covariates[:, self.covariate_names.index(name)]
        except ValueError:
            raise InputError(
                f"{self.source}: no covariate column {name!r}",
                f"use one of {list(self.covariate_names)}",
            ) from None

    @classmethod
    def from_frame(
        cls,
        frame: pd.DataFrame,
        covariates: Sequence[str],
        *,
        treatment: str | None = None,
        outcome: str | None = None,
        subject_id: str | None = None,
        min_subjects: int = DEFAULT_MIN_SUBJECTS,
        on_constant: Literal["error", "drop"] = "error",
        source: str = "<DataFrame>",
    ) -> PartyTable:
        """Validate ``frame`` and build a table.

        Parameters
        ----------
        frame : pandas.DataFrame
        covariates : sequence of str
            Covariate column names, in the order the party shares them.
        treatment, outcome : str, optional
            Give both on the label holder, neither elsewhere.
        subject_id : str, optional
            Column of subject identifiers (unique), used for alignment in vertical splits.
        min_subjects : int
            Refuse tables with fewer rows.
        on_constant : {"error", "drop"}
            What to do with a constant covariate.
        source : str
            Name used in error messages.
        """
        where = source
        if frame.shape[0] == 0:
            raise InputError(f"{where} has no rows", "point to a table with at least one subject per row")
        covariates = list(covariates)
        if not covariates:
            raise InputError(f"{where}: no covariate columns declared", "declare at least one covariate")
        declared = covariates + [c for c in (treatment, outcome, subject_id) if c is not None]
        dup = sorted({c for c in declared if declared.count(c) > 1})
        if dup:
            raise InputError(f"{where}: column {dup[0]!r} is declared twice", "declare each column once")
        header_dup = frame.columns[frame.columns.duplicated()].tolist()
        if header_dup:
            raise InputError(f"{where}: the header repeats column {header_dup[0]!r}", "rename the duplicate column")
        missing = [c for c in declared if c not in frame.columns]
        if missing:
            raise InputError(
                f"{where}: unknown column {missing[0]!r}",
                f"use one of {list(map(str, frame.columns))}",
            )
        if (treatment is None) != (outcome is None):
            raise InputError(
                f"{where}: treatment and outcome must be declared together",
                "declare both on the label holder, neither on other parties",
            )
        if frame.shape[0] < min_subjects:
            raise InputError(
                f"{where} has {frame.shape[0]} subjects, fewer than the minimum {min_subjects}",
                "add subjects or lower min_subjects in the configuration",
            )
        X = np.column_stack([_numeric(frame[c], c, where) for c in covariates])
        names = tuple(covariates)
        constant = [c for c, col in zip(covariates, X.T, strict=True) if np.ptp(col) == 0.0]
        if constant:
            if on_constant == "error":
                raise ConstantCovariateError(where, constant[0])
            warnings.warn(f"{where}: dropping constant covariates {constant}", stacklevel=2)
            keep = [i for i, c in enumerate(covariates) if c not in constant]
            if not keep:
                raise InputError(f"{where}: every covariate is constant", "declare informative covariates")
            X, names = X[:, keep], tuple(covariates[i] for i in keep)
        t = y = None
        if treatment is not None and outcome is not None:
            t = check_treatment(
                _numeric(frame[treatment], treatment, where), f"{where}: treatment column {treatment!r}"
            )
            y = _numeric(frame[outcome], outcome, where)
        ids = None
        if subject_id is not None:
            ids = frame[subject_id].astype(str).to_numpy()
            if len(set(ids)) != ids.size:
                raise InputError(f"{where}: subject id column {subject_id!r} has duplicates", "make subject ids unique")
        return cls(np.ascontiguousarray(X), names, t, y, ids, where)

    @classmethod
    def from_file(cls, path: str | Path, covariates: Sequence[str], **kwargs: object) -> PartyTable:
        """Load a CSV or Parquet file and validate it (see :meth:`from_frame`)."""
        return cls.from_frame(read_table_file(path), covariates, source=str(path), **kwargs)  # type: ignore[arg-type]


def read_table_file(path: str | Path) -> pd.DataFrame:
    """Read a ``.csv`` or ``.parquet`` file into a DataFrame with one-line errors."""
    p = Path(path)
    if not p.is_file():
        raise InputError(f"{p}: no such file", "check the path")
    if p.stat().st_size == 0:
        raise InputError(f"{p} is empty", "point to a file with a header row and data")
    suffix = p.suffix.lower()
    try:
        if suffix == ".parquet":
            return pd.read_parquet(p)
        if suffix in (".csv", ".txt"):
            return pd.read_csv(p)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError, OSError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise InputError(f"{p} is not a readable {suffix[1:]} table ({first})", "fix or re-export the file") from exc
    raise InputError(f"{p}: unsupported file type {suffix!r}", "use a .csv or .parquet file")


def _numeric(series: pd.Series, name: str, where: str) -> NDArray[np.float64]:
    values = pd.to_numeric(series, errors="coerce").to_numpy(dtype=np.float64)
    bad = np.isnan(values) & series.notna().to_numpy()
    if bad.any():
        row = int(np.argmax(bad))
        raise InputError(
            f"{where}: column {name!r} is not numeric (row {row + 1}: {series.iloc[row]!r})",
            "encode it as numbers (e.g. one-hot) before loading",
        )
    if not np.isfinite(values).all():
        row = int(np.argmax(~np.isfinite(values))) + 1
        raise InputError(
            f"{where}: column {name!r} has a NaN or infinite value (row {row})", "impute or drop those rows"
        )
    return values
