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
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Literal, Protocol, TypeVar

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from collabcausal.errors import InputError
from collabcausal.estimators.validation import check_treatment

DEFAULT_MIN_SUBJECTS = 10

R = TypeVar("R")
RowTask = Callable[[slice, NDArray[np.float64], "NDArray[np.int8] | None", "NDArray[np.float64] | None"], R]
"""``task(rows, X, t, y)``: a function of a block of rows (``rows`` their positions in the table; ``X`` the
requested covariates; ``t``, ``y`` the labels or ``None``) whose results over blocks combine into the
table's (:meth:`PartyTable.reduce_rows`)."""


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

    in_memory: ClassVar[bool] = True
    """The rows are arrays in memory (:class:`~collabcausal.party.chunked_table.ChunkedTable` reads out of core)."""

    @property
    def arm_counts(self) -> NDArray[np.int64]:
        """Subjects in the control and the treated arm (a label holder's)."""
        return np.bincount(self.treatment, minlength=2) if self.treatment is not None else np.zeros(2, np.int64)

    def column(self, name: str) -> NDArray[np.float64]:
        """One covariate column by name."""
        return self.covariates[:, column_index(self, name)]

    def reduce_rows(self, task: RowTask[R], columns: Sequence[str], combine: Callable[[R, R], R]) -> R:
        """``task(rows, X, t, y)`` on the whole table, ``X`` the named covariates in that order.

        The in-memory table is one block (``combine``, which merges two blocks' results, is not
        called), ``X`` the covariate matrix itself (read-only) when ``columns`` are all of them in
        order; :meth:`ChunkedTable.reduce_rows <collabcausal.party.chunked_table.ChunkedTable.reduce_rows>`
        runs the same task on every block of rows and combines the results.
        """
        if tuple(columns) == self.covariate_names:  # the covariates themselves, not a copy
            X = self.covariates.view()
            X.flags.writeable = False
        else:
            X = np.column_stack([self.column(c) for c in columns])
        return task(slice(0, self.n_subjects), X, self.treatment, self.outcome)

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
        declared = check_declared(covariates, treatment, outcome, subject_id, where)
        header_dup = frame.columns[frame.columns.duplicated()].tolist()
        if header_dup:
            raise InputError(f"{where}: the header repeats column {header_dup[0]!r}", "rename the duplicate column")
        missing = [c for c in declared if c not in frame.columns]
        if missing:
            raise unknown_column(where, missing[0], list(map(str, frame.columns)))
        return cls.from_arrays(
            np.column_stack([_numeric(frame[c], c, where) for c in covariates]),
            tuple(covariates),
            treatment=None if treatment is None else (treatment, _numeric(frame[treatment], treatment, where)),
            outcome=None if outcome is None else (outcome, _numeric(frame[outcome], outcome, where)),
            subject_ids=None if subject_id is None else (subject_id, frame[subject_id].astype(str).to_numpy()),
            min_subjects=min_subjects,
            on_constant=on_constant,
            source=where,
        )

    @classmethod
    def from_arrays(
        cls,
        covariates: NDArray[np.float64],
        covariate_names: tuple[str, ...],
        *,
        treatment: tuple[str, NDArray[np.float64]] | None = None,
        outcome: tuple[str, NDArray[np.float64]] | None = None,
        subject_ids: tuple[str, NDArray] | None = None,
        min_subjects: int = DEFAULT_MIN_SUBJECTS,
        on_constant: Literal["error", "drop"] = "error",
        source: str = "<arrays>",
    ) -> PartyTable:
        """Validate numeric columns and build a table (the checks shared by every source).

        Parameters
        ----------
        covariates : ndarray of shape (n_subjects, n_covariates)
            Kept without a copy when it is C-contiguous float64 (a large cohort is read into it once).
        covariate_names : tuple of str
        treatment, outcome : (column name, values), optional
            Give both on the label holder, neither elsewhere.
        subject_ids : (column name, values), optional
            Unique subject identifiers; stored as str.
        min_subjects, on_constant, source
            As in :meth:`from_frame`.
        """
        where = source
        X = np.ascontiguousarray(covariates, dtype=np.float64)
        check_subject_count(X.shape[0], min_subjects, where)
        names = tuple(covariate_names)
        low, high = X.min(axis=0), X.max(axis=0)  # one pass each in C order; a NaN or inf shows in them
        for j in np.flatnonzero(~(np.isfinite(low) & np.isfinite(high))):
            check_finite(X[:, j], names[j], where)
        for name, values in (c for c in (treatment, outcome) if c is not None):
            check_finite(values, name, where)
        keep = kept_covariates(names, low, high, on_constant, where, stacklevel=3)
        if len(keep) < len(names):
            X, names = np.ascontiguousarray(X[:, keep]), tuple(names[i] for i in keep)
        t = y = None
        if treatment is not None and outcome is not None:
            t = check_treatment(treatment[1], f"{where}: treatment column {treatment[0]!r}")
            y = np.asarray(outcome[1], dtype=np.float64)
        ids = None
        if subject_ids is not None:
            ids = np.asarray(subject_ids[1]).astype(str)
            if np.unique(ids).size != ids.size:
                raise InputError(
                    f"{where}: subject id column {subject_ids[0]!r} has duplicates", "make subject ids unique"
                )
        return cls(X, names, t, y, ids, where)



def check_subject_count(n: int, min_subjects: int, where: str) -> None:
    """Refuse a table of no rows, or of fewer than ``min_subjects``."""
    if n == 0:
        raise InputError(f"{where} has no rows", "point to a table with at least one subject per row")
    if n < min_subjects:
        raise InputError(
            f"{where} has {n} subjects, fewer than the minimum {min_subjects}",
            "add subjects or lower min_subjects in the configuration",
        )


def kept_covariates(
    names: Sequence[str],
    low: NDArray[np.float64],
    high: NDArray[np.float64],
    on_constant: Literal["error", "drop"],
    where: str,
    stacklevel: int,
) -> list[int]:
    """Positions of the covariates that are not constant (``low < high``, their range over the table).

    A constant one is a :class:`ConstantCovariateError` (``on_constant="error"``) or dropped with a
    warning (``stacklevel`` as :func:`warnings.warn` counts it from the caller of this function).
    """
    constant = [c for c, lo, hi in zip(names, low, high, strict=True) if lo == hi]
    if not constant:
        return list(range(len(names)))
    if on_constant == "error":
        raise ConstantCovariateError(where, constant[0])
    warnings.warn(f"{where}: dropping constant covariates {constant}", stacklevel=stacklevel + 1)
    keep = [i for i, c in enumerate(names) if c not in constant]
    if not keep:
        raise InputError(f"{where}: every covariate is constant", "declare informative covariates")
    return keep


class NamedColumns(Protocol):
    """A table's covariate names and source, as both tables (in memory or out of core) have them."""

    covariate_names: tuple[str, ...]
    source: str


def column_index(table: NamedColumns, name: str) -> int:
    """Position of covariate ``name`` in ``table.covariate_names``; a one-line error naming the choices."""
    try:
        return table.covariate_names.index(name)
    except ValueError:
        raise InputError(
            f"{table.source}: no covariate column {name!r}", f"use one of {list(table.covariate_names)}"
        ) from None


def check_declared(
    covariates: Sequence[str], treatment: str | None, outcome: str | None, subject_id: str | None, where: str
) -> list[str]:
    """Every declared column name, covariates first; refuses none, repeats and a lone treatment or outcome."""
    if not covariates:
        raise InputError(f"{where}: no covariate columns declared", "declare at least one covariate")
    declared = [*covariates, *(c for c in (treatment, outcome, subject_id) if c is not None)]
    dup = sorted({c for c in declared if declared.count(c) > 1})
    if dup:
        raise InputError(f"{where}: column {dup[0]!r} is declared twice", "declare each column once")
    if (treatment is None) != (outcome is None):
        raise InputError(
            f"{where}: treatment and outcome must be declared together",
            "declare both on the label holder, neither on other parties",
        )
    return declared


def unknown_column(where: str, column: str, present: Sequence[str]) -> InputError:
    """The error for a declared ``column`` absent from a table's header ``present``.

    A header read as one column holding a ``;``, tab or ``|`` is a file with another delimiter
    (pandas reads CSV with commas): the error says so rather than listing that one column.
    """
    if len(present) == 1:
        separator = next((s for s in (";", "\t", "|") if s in present[0]), None)
        if separator is not None:
            shown = {"\t": "tab"}.get(separator, repr(separator))
            return InputError(
                f"{where}: unknown column {column!r}: the header {present[0]!r} was read as one column, so the file "
                f"looks {shown}-separated, and CSV files are read comma-separated",
                "save the table as comma-separated CSV (e.g. from a spreadsheet: CSV UTF-8, comma) or as Parquet",
            )
    return InputError(f"{where}: unknown column {column!r}", f"use one of {list(present)}")


def read_table_file(path: str | Path, file_format: str | None = None) -> pd.DataFrame:
    """Read a ``.csv`` or ``.parquet`` file (or ``file_format`` "csv" / "parquet") into a DataFrame."""
    p = Path(path)
    if not p.is_file():
        raise InputError(f"{p}: no such file", "check the path")
    if p.stat().st_size == 0:
        raise InputError(f"{p} is empty", "point to a file with a header row and data")
    suffix = p.suffix.lower() if file_format is None else f".{file_format}"
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
    return values


def check_finite(values: NDArray[np.float64], name: str, where: str, start: int = 0) -> None:
    """Refuse a NaN or infinite value, naming its (1-based) row; ``start``: the row of ``values[0]`` in the source."""
    finite = np.isfinite(values)
    if not finite.all():
        row = start + int(np.argmin(finite)) + 1
        raise InputError(
            f"{where}: column {name!r} has a NaN or infinite value (row {row})", "impute or drop those rows"
        )
