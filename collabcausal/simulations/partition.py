"""Split one data set into a grid of virtual parties (DESIGN.md "Notation").

Subjects go into row groups (at random, or by a rule on a column); covariates into named column
groups. Party (i, j) holds the covariates of column group j for the subjects of row group i.
Parties are named ``p{i}{j}`` with 1-based indices (``p11`` is the paper's (1,1)th party), or
``p{i}-{j}`` beyond 9. Every party of a row holds the row's treatment and outcome.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from collabcausal.errors import InputError
from collabcausal.party.node import Party
from collabcausal.party.table import ConstantCovariateError, PartyTable
from collabcausal.randomness import child_rng
from collabcausal.simulations.datasets import CausalDataset


def party_name(i: int, j: int, shape: tuple[int, int]) -> str:
    """Name of party (i, j), 0-based indices: ``p11`` style, or ``p10-3`` on grids beyond 9."""
    if max(shape) <= 9:
        return f"p{i + 1}{j + 1}"
    return f"p{i + 1}-{j + 1}"


@dataclass(frozen=True, eq=False)
class GridPartition:
    """Which subjects and covariates each party of an R x C grid holds.

    Attributes
    ----------
    row_groups : tuple of ndarray
        Dataset row positions of each row group, in the order the parties hold them.
    column_groups : tuple of tuple of str
    """

    row_groups: tuple[NDArray[np.int64], ...]
    column_groups: tuple[tuple[str, ...], ...]

    @property
    def shape(self) -> tuple[int, int]:
        """(rows, columns) of the grid."""
        return len(self.row_groups), len(self.column_groups)

    def name(self, i: int, j: int) -> str:
        """Name of party (i, j) (0-based)."""
        return party_name(i, j, self.shape)

    def names(self) -> list[list[str]]:
        """Party names, row by row."""
        return [[self.name(i, j) for j in range(self.shape[1])] for i in range(self.shape[0])]

    def subjects(self) -> NDArray[np.int64]:
        """Dataset row positions of all subjects, row groups stacked in order."""
        return np.concatenate(self.row_groups)


def partition_grid(
    dataset: CausalDataset,
    n_row_groups: int = 2,
    *,
    column_groups: Sequence[Sequence[str]] | None = None,
    row_rule: str = "random",
    seed: int = 0,
) -> GridPartition:
    """Split ``dataset`` into ``n_row_groups`` x ``len(column_groups)`` parties.

    Parameters
    ----------
    dataset : CausalDataset
    n_row_groups : int
    column_groups : sequence of sequence of str, optional
        Default: the dataset's own column groups.
    row_rule : str
        ``"random"``: shuffle subjects (seeded) and cut into near-equal groups, as paper 003
        does; ``"column:NAME"``: sort by column NAME (ties by position) and cut into near-equal
        groups, e.g. hospitals serving different age ranges.
    seed : int
    """
    n = dataset.n_subjects
    if not 1 <= n_row_groups <= n:
        raise InputError(f"cannot split {n} subjects into {n_row_groups} row groups", "choose fewer row groups")
    groups = tuple(tuple(g) for g in (column_groups or dataset.column_groups))
    check_column_groups(groups, dataset.covariates)
    if row_rule == "random":
        order = child_rng(seed, "partition", "rows").permutation(n)
    elif row_rule.startswith("column:"):
        column = row_rule.split(":", 1)[1]
        if column not in dataset.frame.columns:
            raise InputError(f"row rule names unknown column {column!r}", f"use one of {list(dataset.frame.columns)}")
        order = np.argsort(dataset.frame[column].to_numpy(), kind="stable")
    else:
        raise InputError(f"unknown row rule {row_rule!r}", "use 'random' or 'column:NAME'")
    return GridPartition(tuple(np.sort(part).astype(np.int64) for part in np.array_split(order, n_row_groups)), groups)


def check_column_groups(groups: Sequence[Sequence[str]], covariates: Sequence[str]) -> None:
    """Refuse column groups that are not a partition of ``covariates``, naming every offending covariate.

    A covariate in no group would be silently left out of every collaboration while the centralized
    analysis (CA) still adjusts for it, so the settings would compare different models.

    Raises
    ------
    InputError
        One line naming the covariates left out, listed twice, or unknown, and any empty group.
    """
    listed = [c for g in groups for c in g]
    names = ", ".join
    problems = []
    if left_out := [c for c in covariates if c not in listed]:
        problems.append(f"leave out {names(map(repr, left_out))} (CA would adjust for them, no collaboration would)")
    if twice := sorted({c for c in listed if listed.count(c) > 1}):
        problems.append(f"list {names(map(repr, twice))} twice")
    if unknown := [c for c in listed if c not in covariates]:
        problems.append(f"name unknown covariate {names(map(repr, unknown))}")
    if any(not g for g in groups):
        problems.append("have an empty column group")
    if problems:
        raise InputError(
            f"column groups {';'.join(','.join(g) for g in groups)!r} " + "; ".join(problems),
            f"list every covariate of {names(covariates)} in exactly one column group, or drop it from the covariates",
        )


def build_parties(dataset: CausalDataset, partition: GridPartition, *, anchor_key: bytes) -> list[Party]:
    """Party objects for every cell of the grid, each holding only its own slice.

    ``anchor_key`` is the parties' shared anchor key; simulations pass
    :func:`~collabcausal.anchor_key.simulation_anchor_key` of the study seed (simulation only).

    Every party of a row holds the row's treatment and outcome (DESIGN.md "Notation": by default
    every party of the row is a label holder) and validates its slice with the same rules as a
    deployed party (:class:`~collabcausal.party.table.PartyTable`).

    A row group whose subjects are all in one treatment arm, or a covariate constant in one row
    group (but not in the data set), means too many row groups for the data: refused naming the
    row group, its size and the command-line fix.
    """
    parties = []
    n_groups = len(partition.row_groups)
    for i, rows in enumerate(partition.row_groups):
        block: pd.DataFrame = dataset.frame.iloc[rows].reset_index(drop=True)
        if block[dataset.treatment].nunique() < 2:
            raise InputError(
                f"{dataset.name}: row group {i + 1} of {n_groups} ({len(rows)} subjects) has only one treatment arm: "
                "too many row groups for the data",
                "use fewer --rows",
            )
        for j, columns in enumerate(partition.column_groups):
            name = partition.name(i, j)
            try:
                table = PartyTable.from_frame(
                    block,
                    columns,
                    treatment=dataset.treatment,
                    outcome=dataset.outcome,
                    source=f"{dataset.name}[{name}]",
                    min_subjects=2,
                )
            except ConstantCovariateError as exc:
                raise InputError(
                    f"{dataset.name}: covariate {exc.column!r} is constant in row group {i + 1} of {n_groups} "
                    f"({len(rows)} subjects): too many row groups for the data",
                    "use fewer --rows, or leave the covariate out (--covariates with --data)",
                ) from None
            parties.append(Party(name, table, anchor_key=anchor_key))
    return parties
