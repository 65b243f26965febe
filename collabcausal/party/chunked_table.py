"""A party's table read out of core: a directory of Parquet files, reduced block by block on Dask.

A registry of 10^8 rows does not fit in a party's memory. ``[data] path`` naming a directory (of
``*.parquet`` files, found recursively and read in sorted path order, one block per row group)
makes the party read it as a :class:`ChunkedTable` (docs/data-sources.md, "Out of core"):

* opening it reads every block once and applies the checks of
  :meth:`~collabcausal.party.table.PartyTable.from_arrays` (numeric, no NULL, finite, treatment
  coded 0/1 with both arms, no constant covariate, ``min_subjects``), counting the arms on the way;
* afterwards an operation that supports it (:attr:`Operation.out_of_core
  <collabcausal.party.operations.Operation.out_of_core>`) runs one task per block on Dask's threaded
  scheduler with ``workers`` threads and combines the blocks' results in row order
  (:meth:`ChunkedTable.reduce_rows`), so the same table gives the same numbers on every run.

Each worker streams its block in batches of :data:`BATCH_ROWS` rows, so the party holds ``workers``
batches (and the task's temporaries) at a time: its memory is set by the batch size, not the
table's or the row groups'. Results are combined batch by batch within a block, then block by
block, always in row order. A read after opening first checks that no file's size or
modification time changed, and any problem it meets is reported as "changed since the party opened
it", without the file, row or value: the read may be part of a charged DP release, whose only
output about the rows must be its noisy values.

The engine was chosen by measurement (``benchmarks/bench_out_of_core.py`` prints the figures):
Dask runs the party's own numpy kernels on each block, so the private computations are the same
functions as in memory (no second implementation in SQL), and DuckDB was measured beside it on the
one reduction SQL expresses directly (the moments of the reduction).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

import numpy as np
import pyarrow as pa
from numpy.typing import NDArray

from collabcausal.errors import InputError
from collabcausal.estimators.validation import check_treatment
from collabcausal.party.arrow_columns import float_column
from collabcausal.party.table import (
    DEFAULT_MIN_SUBJECTS,
    R,
    RowTask,
    check_declared,
    check_finite,
    check_subject_count,
    column_index,
    kept_covariates,
)

__all__ = ["ChunkedTable"]

DEFAULT_WORKERS = 2
"""Blocks processed at once (Dask threads) unless the party says otherwise."""

BATCH_ROWS = 1 << 16
"""Rows a worker holds at once (a batch of 10 covariates and the labels is 6 MB)."""


@dataclass(frozen=True)
class Block:
    """One row group of one file: rows ``start .. start + rows - 1`` of the table.

    ``metadata`` is the file's footer as the opening pass read it, shared by the file's blocks: a
    read does not parse it again, which costs time in the file's number of row groups (a file of
    many small row groups would cost their square on every request).
    """

    path: Path
    row_group: int
    start: int
    rows: int
    metadata: Any = field(compare=False, repr=False)


@dataclass(frozen=True)
class _Summary:
    """What the opening pass learns from a block: column ranges and arm counts."""

    low: NDArray[np.float64]
    high: NDArray[np.float64]
    arms: NDArray[np.int64]

    def merge(self, other: _Summary) -> _Summary:
        return _Summary(np.minimum(self.low, other.low), np.maximum(self.high, other.high), self.arms + other.arms)


class ChunkedTable:
    """A validated private table read block by block from a directory of Parquet files.

    Build it with :meth:`open`. It offers what the out-of-core operations read of a table
    (``covariate_names``, ``n_subjects``, ``has_labels``, ``arm_counts``, ``source``,
    :meth:`reduce_rows`, :meth:`project_rows`, :meth:`labels`) and no ``covariates`` matrix.

    Attributes
    ----------
    covariate_names : tuple of str
    n_subjects : int
    has_labels : bool
    arm_counts : ndarray of int64, shape (2,)
        Control and treated subjects (zeros without labels).
    source : str
        The directory, for messages.
    blocks : tuple of Block
    workers : int
    """

    in_memory: ClassVar[bool] = False
    subject_ids: ClassVar[None] = None

    def __init__(
        self,
        covariate_names: tuple[str, ...],
        labels: dict[str, str],
        blocks: tuple[Block, ...],
        source: str,
        workers: int,
        arm_counts: NDArray[np.int64],
        stamps: dict[Path, tuple[int, int]] | None = None,
    ) -> None:
        self.covariate_names = covariate_names
        self._labels = labels
        self.blocks = blocks
        self.source = source
        self.workers = workers
        self.arm_counts = arm_counts
        self._stamps = stamps

    @property
    def n_subjects(self) -> int:
        """Number of rows (from the files' metadata)."""
        return sum(b.rows for b in self.blocks)

    @property
    def has_labels(self) -> bool:
        """True when the table holds treatment and outcome."""
        return len(self._labels) == 2

    @classmethod
    def open(
        cls,
        directory: str | Path,
        covariates: Sequence[str],
        *,
        treatment: str | None = None,
        outcome: str | None = None,
        subject_id: str | None = None,
        min_subjects: int = DEFAULT_MIN_SUBJECTS,
        on_constant: Literal["error", "drop"] = "error",
        workers: int | None = None,
        source: str | None = None,
    ) -> ChunkedTable:
        """List the blocks, read each once to validate it, and return the table.

        Parameters
        ----------
        directory : path
            A directory of ``*.parquet`` files (subdirectories included), every one with the
            declared columns.
        covariates, treatment, outcome, min_subjects, on_constant
            As in :meth:`PartyTable.from_frame <collabcausal.party.table.PartyTable.from_frame>`.
        subject_id : str, optional
            Refused: aligning a vertical split needs the ids in memory.
        workers : int, optional
            Blocks read and processed at once (default :func:`default_workers`).
        source : str, optional
            Name used in messages (default: the directory).
        """
        directory = Path(directory)
        where = source or str(directory)
        check_declared(covariates, treatment, outcome, subject_id, where)
        if subject_id is not None:
            raise InputError(
                f"{where}: a subject id column cannot be read out of core (alignment holds the ids in memory)",
                "drop subject_id for an out-of-core table, or align on a table that fits in memory (one file)",
            )
        workers = default_workers() if workers is None else workers
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
            raise InputError(f"{where}: workers must be an int >= 1, got {workers!r}", "e.g. workers = 2")
        labels = {role: name for role, name in (("treatment", treatment), ("outcome", outcome)) if name is not None}
        blocks = _list_blocks(directory, [*covariates, *labels.values()], where)
        n = sum(b.rows for b in blocks)
        check_subject_count(n, min_subjects, where)
        stamps = _file_stamps(blocks)
        table = cls(tuple(covariates), labels, blocks, where, workers, np.zeros(2, dtype=np.int64))
        summary = table.reduce_rows(table._summary, covariates, _Summary.merge)
        if len(labels) == 2 and summary.arms.min() == 0:
            raise InputError(
                f"{where}: treatment column {treatment!r} has only one arm among {n} subjects",
                "both treated and control subjects are needed to estimate an effect",
            )
        keep = kept_covariates(covariates, summary.low, summary.high, on_constant, where, stacklevel=2)
        names = tuple(covariates[i] for i in keep)
        arms = summary.arms if len(labels) == 2 else table.arm_counts
        return cls(names, labels, blocks, where, workers, arms, stamps)

    def column(self, name: str) -> Any:
        """Refused: the table's columns are not held in memory."""
        column_index(self, name)
        raise InputError(
            f"{self.source} is read out of core, so column {name!r} is not held in memory",
            "use an operation that supports out-of-core tables (docs/data-sources.md)",
        )

    def reduce_rows(self, task: RowTask[R], columns: Sequence[str], combine: Callable[[R, R], R]) -> R:
        """``task(rows, X, t, y)`` on every batch of rows, the results combined in row order.

        ``X`` holds the named covariates in that order; ``t`` and ``y`` are the batch's labels
        (``None`` without them). ``combine(a, b)`` merges the results of consecutive runs of rows.
        """
        names = [self.covariate_names[column_index(self, c)] for c in columns]
        self._check_unchanged()

        def run(block: Block) -> R:
            return functools.reduce(combine, (task(*batch) for batch in self._batches(block, names)))

        try:
            return self._map_combine(run, combine)
        except (InputError, OSError, pa.ArrowException):
            if self._stamps is None:  # the opening pass: its messages name the file, row and problem
                raise
            raise self._changed() from None

    def _check_unchanged(self) -> None:
        """Refuse to read files whose size or modification time differ from those the opening pass validated."""
        if self._stamps is not None and _file_stamps(self.blocks) != self._stamps:
            raise self._changed()

    def _changed(self) -> InputError:
        """The one error of a read after opening: the rows may not be described (a DP release may be charged)."""
        return InputError(
            f"{self.source} changed since the party opened and validated it",
            "restart the party to validate the table again",
        )

    def project_rows(
        self, project: Callable[[NDArray[np.float64]], NDArray[np.float64]], columns: Sequence[str], width: int
    ) -> NDArray[np.float64]:
        """``project(X_batch)`` of every batch of rows (``width`` columns each), stacked in row order."""
        out = np.empty((self.n_subjects, width))

        def write(rows: slice, X: NDArray[np.float64], t: Any, y: Any) -> None:
            out[rows] = project(X)

        self.reduce_rows(write, columns, lambda a, b: None)
        return out

    def labels(self) -> tuple[NDArray[np.int8], NDArray[np.float64]]:
        """The treatment and outcome columns, whole (``n`` bytes and ``8n`` bytes)."""
        if not self.has_labels:
            raise InputError(f"{self.source} holds no treatment/outcome", "ask the row group's label holder")
        t_all, y_all = np.empty(self.n_subjects, dtype=np.int8), np.empty(self.n_subjects)

        def write(rows: slice, X: Any, t: NDArray[np.int8], y: NDArray[np.float64]) -> None:
            t_all[rows], y_all[rows] = t, y

        self.reduce_rows(write, [], lambda a, b: None)
        return t_all, y_all

    def _map_combine(self, task: Callable[[Block], R], combine: Callable[[R, R], R]) -> R:
        """``task`` on every block on Dask's threaded scheduler, results combined in block order."""
        import dask

        parts = [dask.delayed(task, pure=False)(block) for block in self.blocks]
        results = dask.compute(*parts, scheduler="threads", num_workers=self.workers)
        return functools.reduce(combine, results)

    def _batches(
        self, block: Block, covariates: Sequence[str]
    ) -> Iterator[tuple[slice, NDArray[np.float64], NDArray[np.int8] | None, NDArray[np.float64] | None]]:
        """The block's rows in batches of at most :data:`BATCH_ROWS`: positions, named covariates, labels.

        Each batch is checked as at opening. The reader streams the row group in 1 MiB buffers, so a
        worker holds one batch's columns, not its row group's.
        """
        import pyarrow.parquet as pq

        names = [*covariates, *self._labels.values()]
        file = pq.ParquetFile(block.path, metadata=block.metadata, pre_buffer=False, buffer_size=1 << 20)
        where, start = f"{self.source} ({block.path.name})", block.start
        for data in file.iter_batches(BATCH_ROWS, row_groups=[block.row_group], columns=names, use_threads=False):
            rows = slice(start, start + data.num_rows)
            X = np.empty((data.num_rows, len(covariates)))
            for j, name in enumerate(covariates):
                X[:, j] = float_column(data.column(name), name, where, start)
                check_finite(X[:, j], name, where, start)
            labels: list[Any] = [None, None]
            for k, role in enumerate(("treatment", "outcome")):
                if role in self._labels:
                    name = self._labels[role]
                    labels[k] = float_column(data.column(name), name, where, start)
                    check_finite(labels[k], name, where, start)
            if labels[0] is not None:
                labels[0] = check_treatment(labels[0], f"{where}: treatment column {self._labels['treatment']!r}",
                                            both_arms=False)
            yield rows, X, labels[0], labels[1]
            start = rows.stop

    def _summary(self, rows: slice, X: NDArray[np.float64], t: NDArray[np.int8] | None, y: Any) -> _Summary:
        arms = np.bincount(t, minlength=2).astype(np.int64) if t is not None else np.zeros(2, dtype=np.int64)
        return _Summary(X.min(axis=0), X.max(axis=0), arms)


def default_workers() -> int:
    """:data:`DEFAULT_WORKERS`, at most the machine's cores."""
    return max(1, min(DEFAULT_WORKERS, os.cpu_count() or 1))


def _file_stamps(blocks: Sequence[Block]) -> dict[Path, tuple[int, int]]:
    """Each file's size and modification time (ns); a missing file has none."""
    out = {}
    for path in dict.fromkeys(b.path for b in blocks):
        try:
            info = path.stat()
        except OSError:
            out[path] = (-1, -1)
        else:
            out[path] = (info.st_size, info.st_mtime_ns)
    return out


def _list_blocks(directory: Path, names: list[str], where: str) -> tuple[Block, ...]:
    """The row groups of the directory's Parquet files in sorted path order, each file's schema checked."""
    import pyarrow.parquet as pq

    if not directory.is_dir():
        raise InputError(f"{directory}: no such directory", "check [data] path")
    files = sorted(p for p in directory.rglob("*.parquet") if p.is_file())
    if not files:
        raise InputError(f"{where}: no .parquet files in the directory", "write the table as Parquet files there")
    _check_distinct(files, where)
    blocks, start = [], 0
    for path in files:
        try:
            meta = pq.ParquetFile(path).metadata
            present = meta.schema.to_arrow_schema().names
        except (pa.ArrowException, OSError) as exc:
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise InputError(f"{path} is not a readable parquet table ({first})", "fix or re-export the file") from exc
        missing = [c for c in names if c not in present]
        if missing:
            raise InputError(f"{path}: unknown column {missing[0]!r}", f"use one of {present}")
        for i in range(meta.num_row_groups):
            rows = meta.row_group(i).num_rows
            if rows:
                blocks.append(Block(path, i, start, rows, meta))
                start += rows
    return tuple(blocks)


def _check_distinct(files: Sequence[Path], where: str) -> None:
    """Refuse two paths (symbolic or hard links) to one file: its rows would count as two subjects each."""
    seen: dict[tuple[int, int], Path] = {}
    for path in files:
        info = path.stat()
        first = seen.setdefault((info.st_dev, info.st_ino), path)
        if first != path:
            raise InputError(
                f"{where}: {path} and {first} are the same file, so each of its rows would be read twice",
                "remove the link: each subject's row must appear once in the directory",
            )
