"""The analyst's side of eps-ADUM (paper 001) over a grid of horizontally split parties.

Each party answers the same ``dp_histogram`` request on its own rows, charging its own ledger;
the analyst sums the noisy counts and sums (post-processing) and fits
:class:`~collabcausal.estimators.dp.adum.EpsADUM` from them. A subject lives at one party, so the
release is epsilon-DP for every subject. The same code runs in process (simulations,
:class:`~collabcausal.protocol.inprocess.InProcessGrid`) and over gRPC.

With a DP k-means partition (paper 001, section 3.2) the analyst spends eps/2 on the clustering
(``n_iter`` ``dp_histogram`` rounds over the current centers, summing coordinates) and eps/2 on
the ADUM release.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import reduce
from typing import Any

import numpy as np

from collabcausal.analyst.grid import Grid
from collabcausal.analyst.replies import check_description, check_histogram, histogram_range
from collabcausal.estimators.dp.adum import EpsADUM
from collabcausal.estimators.dp.aggregates import OUTCOME, NoisyAggregates
from collabcausal.estimators.dp.partitions import CentersPartition, Partition, dp_kmeans
from collabcausal.estimators.validation import check_bounds, check_epsilon
from collabcausal.messages import Message
from collabcausal.randomness import SeedLike


def collect_aggregates(
    grid: Grid,
    partition: Partition,
    epsilon: float,
    *,
    study: str,
    by_arm: bool = True,
    sums: Sequence[dict[str, Any]] = (),
    parties: Sequence[str] | None = None,
    timeout: float | None = None,
) -> NoisyAggregates:
    """Ask every party for a ``dp_histogram`` over ``partition`` and add up the noisy answers.

    Parameters
    ----------
    grid : Grid
    partition : Partition
        Public; sent as its spec.
    epsilon : float
        Charged to each party's ledger.
    study : str
        The study id recorded in each party's ledger.
    by_arm : bool
        Split counts and sums by treatment arm.
    sums : sequence of {"column": name, "bounds": [lo, hi]}
        Columns to sum per cell (``OUTCOME`` for the outcome).
    parties : sequence of str, optional
        Defaults to every party of the grid.
    timeout : float, optional
    """
    eps = check_epsilon(epsilon)
    names = list(parties) if parties is not None else grid.party_names()
    columns = list(dict.fromkeys([*partition.columns, *(s["column"] for s in sums if s["column"] != OUTCOME)]))
    params = {"epsilon": eps, "study": study, "partition": partition.to_spec(), "by_arm": by_arm, "sums": list(sums)}
    described = grid.send_and_receive(dict.fromkeys(names, Message("describe", {"study": study})), timeout=timeout)
    for party, reply in described.items():
        check_description(party, reply)
    request = Message("dp_histogram", {**params, "columns": columns})
    replies = grid.send_and_receive(dict.fromkeys(names, request), timeout=timeout)
    shape = (partition.n_cells, 2 if by_arm else 1)
    boxes = [check_bounds(s["bounds"]) for s in sums]
    answers = [
        NoisyAggregates(*check_histogram(
            p, r, shape, len(sums),
            plausible=histogram_range(described[p].params["n_subjects"], eps, boxes, shape[0] * shape[1]),
        ))
        for p, r in replies.items()
    ]
    return reduce(lambda a, b: a + b, answers)


def fit_adum(
    grid: Grid,
    partition: Partition,
    epsilon: float,
    outcome_bounds: tuple[float, float],
    *,
    study: str,
    min_count: float = 1.0,
    parties: Sequence[str] | None = None,
    timeout: float | None = None,
) -> EpsADUM:
    """eps-ADUM over ``grid`` on a public partition (paper 001, Algorithm 1, summed over parties)."""
    bounds = check_bounds(outcome_bounds, "outcome_bounds")
    aggregates = collect_aggregates(
        grid,
        partition,
        epsilon,
        study=study,
        sums=[{"column": OUTCOME, "bounds": list(bounds)}],
        parties=parties,
        timeout=timeout,
    )
    return EpsADUM(partition, epsilon, bounds, min_count=min_count).fit_aggregates(aggregates)


def dp_kmeans_over_grid(
    grid: Grid,
    columns: Sequence[str],
    bounds: Sequence[tuple[float, float]],
    n_clusters: int,
    epsilon: float,
    *,
    study: str,
    n_iter: int = 5,
    seed: SeedLike = None,
    parties: Sequence[str] | None = None,
    timeout: float | None = None,
) -> CentersPartition:
    """DP k-means on the parties' rows: each Lloyd step is one summed ``dp_histogram`` round."""
    sums = [{"column": c, "bounds": list(check_bounds(b))} for c, b in zip(columns, bounds, strict=True)]

    def aggregate(partition: CentersPartition, eps: float) -> tuple[np.ndarray, np.ndarray]:
        result = collect_aggregates(
            grid, partition, eps, study=study, by_arm=False, sums=sums, parties=parties, timeout=timeout
        )
        return result.counts[:, 0], result.sums[:, 0, :]

    return dp_kmeans(aggregate, columns, bounds, n_clusters, epsilon, n_iter=n_iter, seed=seed)


def fit_kmeans_adum(
    grid: Grid,
    columns: Sequence[str],
    bounds: Sequence[tuple[float, float]],
    n_clusters: int,
    epsilon: float,
    outcome_bounds: tuple[float, float],
    *,
    study: str,
    n_iter: int = 5,
    seed: SeedLike = None,
    min_count: float = 1.0,
    parties: Sequence[str] | None = None,
    timeout: float | None = None,
) -> EpsADUM:
    """eps/2 DP k-means partition, then eps/2-ADUM on it (paper 001, section 3.2)."""
    half = check_epsilon(epsilon) / 2.0
    partition = dp_kmeans_over_grid(
        grid, columns, bounds, n_clusters, half, study=study, n_iter=n_iter, seed=seed, parties=parties, timeout=timeout
    )
    return fit_adum(
        grid, partition, half, outcome_bounds, study=study, min_count=min_count, parties=parties, timeout=timeout
    )
