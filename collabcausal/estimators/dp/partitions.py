"""Partitions of the covariate space for eps-ADUM (paper 001, section 2.1.2): grids and centers.

A partition maps each row of the covariates it uses to a cell index in ``0..n_cells-1``. It is
public: it is built from declared bounds, or from a DP release (:func:`dp_kmeans`), never from raw
rows, so cells are disjoint subsets of subjects defined independently of the data and parallel
composition applies across them. Partitions travel as JSON specs (:meth:`to_spec`,
:func:`partition_from_spec`).

* :class:`GridPartition`: a regular cut of each of its columns (:func:`regular_cut` is the 1-D
  case used in the paper's synthetic experiment). Values outside the bounds fall into the edge
  cells, so every point of R^d has a cell.
* :class:`CentersPartition`: nearest-center cells (Voronoi), the output of DP k-means.
"""

from __future__ import annotations

import math
import operator
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from collabcausal.errors import InputError
from collabcausal.estimators.validation import check_bounds, check_epsilon, check_matrix, refuse_unknown_keys
from collabcausal.randomness import SeedLike, as_generator

Aggregate = Callable[["CentersPartition", float], tuple[NDArray[np.float64], NDArray[np.float64]]]


class Partition(ABC):
    """A public partition of the space of some named covariates."""

    columns: tuple[str, ...]

    @property
    @abstractmethod
    def n_cells(self) -> int:
        """Number of cells p."""

    @abstractmethod
    def assign(self, X: ArrayLike) -> NDArray[np.int64]:
        """Cell index of each row of ``X`` (its columns are :attr:`columns`, in order)."""

    @abstractmethod
    def to_spec(self) -> dict[str, Any]:
        """A JSON-serialisable description, inverted by :func:`partition_from_spec`."""

    def _matrix(self, X: ArrayLike) -> NDArray[np.float64]:
        arr = check_matrix(X, "X")
        if arr.shape[1] != len(self.columns):
            raise InputError(
                f"the partition uses {len(self.columns)} columns {list(self.columns)} but X has {arr.shape[1]}",
                "pass exactly the partition's columns, in order",
            )
        return arr


_ASSIGN_BLOCK = 1 << 22  # floats of one block of distances in CentersPartition.assign


class GridPartition(Partition):
    """A regular grid: column j cut into ``n_cells[j]`` equal intervals of ``bounds[j]``.

    Parameters
    ----------
    columns : sequence of str
    bounds : sequence of (low, high)
    n_cells : sequence of int
        Cells per column; the partition has their product.
    """

    def __init__(self, columns: Sequence[str], bounds: Sequence[tuple[float, float]], n_cells: Sequence[int]) -> None:
        self.columns = _names(columns)
        if len(bounds) != len(self.columns) or len(n_cells) != len(self.columns):
            raise InputError(
                f"a grid over {len(self.columns)} columns needs as many bounds and cell counts, got "
                f"{len(bounds)} and {len(n_cells)}",
                "give one (low, high) and one cell count per column",
            )
        self.bounds = tuple(check_bounds(b, f"bounds of {c!r}") for b, c in zip(bounds, self.columns, strict=True))
        self.shape = tuple(_positive_int(k, f"cells of {c!r}") for k, c in zip(n_cells, self.columns, strict=True))
        if math.prod(self.shape) > np.iinfo(np.int64).max:
            raise InputError(f"a grid of {math.prod(self.shape)} cells overflows the cell index", "ask for fewer cells")

    @property
    def n_cells(self) -> int:
        return int(np.prod(self.shape))

    def assign(self, X: ArrayLike) -> NDArray[np.int64]:
        arr = self._matrix(X)
        idx = []
        for j, ((lo, hi), k) in enumerate(zip(self.bounds, self.shape, strict=True)):
            idx.append(np.clip(np.floor((arr[:, j] - lo) / (hi - lo) * k), 0, k - 1).astype(np.int64))
        if not idx or arr.shape[0] == 0:
            return np.zeros(arr.shape[0], dtype=np.int64)
        return np.ravel_multi_index(tuple(idx), self.shape).astype(np.int64)

    def to_spec(self) -> dict[str, Any]:
        return {
            "kind": "grid",
            "columns": list(self.columns),
            "bounds": [list(b) for b in self.bounds],
            "n_cells": list(self.shape),
        }

    def __repr__(self) -> str:
        return f"GridPartition({list(self.columns)}, bounds={list(self.bounds)}, n_cells={list(self.shape)})"


def regular_cut(column: str, bounds: tuple[float, float], n_cells: int) -> GridPartition:
    """``n_cells`` equal intervals of ``bounds`` on one covariate (paper 001, section 3.1.1)."""
    return GridPartition([column], [bounds], [n_cells])


class CentersPartition(Partition):
    """Nearest-center (Voronoi) cells; ties go to the lower index.

    Parameters
    ----------
    columns : sequence of str
    centers : array of shape (n_cells, len(columns))
    """

    def __init__(self, columns: Sequence[str], centers: ArrayLike) -> None:
        self.columns = _names(columns)
        self.centers = check_matrix(centers, "centers")
        if self.centers.shape[0] == 0 or self.centers.shape[1] != len(self.columns):
            raise InputError(
                f"centers have shape {self.centers.shape} for {len(self.columns)} columns",
                "pass at least one center with one coordinate per column",
            )

    @property
    def n_cells(self) -> int:
        return int(self.centers.shape[0])

    def assign(self, X: ArrayLike) -> NDArray[np.int64]:
        arr = self._matrix(X)
        block = max(1, _ASSIGN_BLOCK // self.centers.size)  # bounded memory whatever the number of centers
        out = np.empty(arr.shape[0], dtype=np.int64)
        for start in range(0, arr.shape[0], block):
            d2 = ((arr[start : start + block, None, :] - self.centers[None, :, :]) ** 2).sum(axis=2)
            out[start : start + block] = np.argmin(d2, axis=1)
        return out

    def to_spec(self) -> dict[str, Any]:
        return {"kind": "centers", "columns": list(self.columns), "centers": self.centers.tolist()}

    def __repr__(self) -> str:
        return f"CentersPartition({list(self.columns)}, n_cells={self.n_cells})"


SPEC_KEYS = {"grid": frozenset({"kind", "columns", "bounds", "n_cells"}),
             "centers": frozenset({"kind", "columns", "centers"})}
"""The keys of each kind's :meth:`Partition.to_spec`: a spec carrying any other is refused
(:func:`partition_from_spec`)."""


def partition_from_spec(spec: Mapping[str, Any]) -> Partition:
    """Rebuild a partition from :meth:`Partition.to_spec` output (e.g. received in a request); a key its kind does
    not have is refused."""
    if not isinstance(spec, Mapping) or "kind" not in spec:
        raise InputError(f"a partition spec must be a mapping with a 'kind', got {spec!r}", "use Partition.to_spec()")
    if isinstance(spec["kind"], str) and spec["kind"] in SPEC_KEYS:
        refuse_unknown_keys(spec, SPEC_KEYS[spec["kind"]], f"{spec['kind']} partition")
    try:
        if spec["kind"] == "grid":
            return GridPartition(spec["columns"], [tuple(b) for b in spec["bounds"]], spec["n_cells"])
        if spec["kind"] == "centers":
            return CentersPartition(spec["columns"], spec["centers"])
    except (KeyError, TypeError) as exc:
        raise InputError(f"incomplete partition spec {dict(spec)!r} ({exc})", "use Partition.to_spec()") from exc
    raise InputError(f"unknown partition kind {spec['kind']!r}", "use 'grid' or 'centers'")


def dp_kmeans(
    aggregate: Aggregate,
    columns: Sequence[str],
    bounds: Sequence[tuple[float, float]],
    n_clusters: int,
    epsilon: float,
    *,
    n_iter: int = 5,
    seed: SeedLike = None,
) -> CentersPartition:
    """DP k-means (DPLloyd; Su et al. 2015, paper 001's reference [25]) over noisy cell aggregates.

    Each of ``n_iter`` Lloyd steps asks ``aggregate(current_partition, epsilon / n_iter)`` for a
    DP release of the count and coordinate sums of every current cell (basic composition across
    steps, parallel across cells) and moves each center to its noisy mean, clipped to ``bounds``.
    A center whose noisy count is below 1 stays where it is. The initial centers are drawn
    uniformly in ``bounds`` from ``seed`` (public; no data is used).

    Parameters
    ----------
    aggregate : callable
        ``aggregate(partition, eps) -> (counts (k,), sums (k, d))``: a local DP computation in a
        simulation, or the sum of the parties' noisy answers (:mod:`collabcausal.analyst.adum`).
    columns, bounds : sequences
        Covariates used and their declared bounds.
    n_clusters : int
    epsilon : float
        Total budget of the clustering (paper 001 spends eps/2 here).
    n_iter : int
    seed : int or Generator, optional
        For the public initial centers only.
    """
    eps = check_epsilon(epsilon)
    k = _positive_int(n_clusters, "n_clusters")
    steps = _positive_int(n_iter, "n_iter")
    box = np.array([check_bounds(b) for b in bounds], dtype=np.float64)
    if box.shape[0] != len(columns):
        raise InputError(f"{len(columns)} columns but {box.shape[0]} bounds", "give one (low, high) per column")
    centers = as_generator(seed).uniform(box[:, 0], box[:, 1], size=(k, box.shape[0]))
    for _ in range(steps):
        partition = CentersPartition(columns, centers)
        counts, sums = aggregate(partition, eps / steps)
        counts = np.asarray(counts, dtype=np.float64).reshape(k)
        sums = np.asarray(sums, dtype=np.float64).reshape(k, box.shape[0])
        moved = counts >= 1.0
        centers = centers.copy()
        centers[moved] = np.clip(sums[moved] / counts[moved, None], box[:, 0], box[:, 1])
    return CentersPartition(columns, centers)


def _names(columns: Sequence[str]) -> tuple[str, ...]:
    names = tuple(str(c) for c in ([columns] if isinstance(columns, str) else columns))
    if not names or len(set(names)) != len(names):
        raise InputError(f"partition columns must be non-empty and distinct, got {list(names)}", "name each once")
    return names


def _positive_int(value: Any, name: str) -> int:
    """An integer >= 1 (Python or numpy; not a float such as 1e6, not a bool, not text)."""
    try:
        k = -1 if isinstance(value, bool) else operator.index(value)
    except TypeError:
        k = -1
    if k < 1:
        raise InputError(f"{name} must be a positive integer, got {value!r}", "pass e.g. 10")
    return k
