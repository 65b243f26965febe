"""Partitions: regular cut, grid, nearest centers, specs, DP k-means."""

from __future__ import annotations

import numpy as np
import pytest

from collabcausal.errors import InputError
from collabcausal.estimators.dp.aggregates import noisy_aggregates
from collabcausal.estimators.dp.partitions import (
    SPEC_KEYS,
    CentersPartition,
    GridPartition,
    dp_kmeans,
    partition_from_spec,
    regular_cut,
)


def test_regular_cut_assigns_equal_intervals_and_edges_take_outside_points():
    cut = regular_cut("x", (-1.0, 1.0), 4)
    x = np.array([-1.0, -0.6, -0.4, 0.0, 0.49, 0.5, 0.99, 1.0, -7.0, 7.0])
    assert cut.assign(x).tolist() == [0, 0, 1, 2, 2, 3, 3, 3, 0, 3]
    assert cut.n_cells == 4


def test_grid_numbers_cells_row_major_over_columns():
    grid = GridPartition(["a", "b"], [(0, 1), (0, 1)], [2, 3])
    X = np.array([[0.1, 0.1], [0.1, 0.9], [0.9, 0.1], [0.9, 0.5]])
    assert grid.assign(X).tolist() == [0, 2, 3, 4]
    assert grid.n_cells == 6


def test_centers_assign_to_nearest_center():
    part = CentersPartition(["a"], [[-1.0], [0.0], [2.0]])
    assert part.assign([[-0.9], [0.4], [1.1], [5.0]]).tolist() == [0, 1, 2, 2]


@pytest.mark.parametrize(
    "partition",
    [
        regular_cut("x", (0, 10), 5),
        GridPartition(["a", "b"], [(0, 1), (-2, 2)], [2, 2]),
        CentersPartition(["a"], [[0.0], [1.0]]),
    ],
)
def test_spec_round_trip_gives_the_same_cells(partition):
    X = np.random.default_rng(0).uniform(-1, 3, size=(50, len(partition.columns)))
    again = partition_from_spec(partition.to_spec())
    assert again.columns == partition.columns
    assert np.array_equal(again.assign(X), partition.assign(X))


GRID_KEYS = "bounds, columns, kind, n_cells"


@pytest.mark.parametrize(
    ("partition", "extra", "accepted"),
    [
        (GridPartition(["a", "b"], [(0, 1), (-2, 2)], [2, 2]), {"centers": [[0.0, 0.0]]}, GRID_KEYS),
        (GridPartition(["a"], [(0, 1)], [3]), {"closed": "left"}, GRID_KEYS),
        (CentersPartition(["a"], [[0.0], [1.0]]), {"n_cells": [5]}, "centers, columns, kind"),
    ],
)
def test_a_key_its_kind_does_not_have_is_refused_by_name(partition, extra, accepted):
    """Another kind's key, or a newer analyst's option: refused in one line, not left aside; a spec carries exactly
    its kind's keys."""
    spec = partition.to_spec()
    assert set(spec) == SPEC_KEYS[spec["kind"]]
    (key,) = extra
    with pytest.raises(InputError, match=f"^{spec['kind']} partition option '{key}' is not one this party applies "
                                         f"\\({accepted}\\)"):
        partition_from_spec(spec | extra)


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda: regular_cut("x", (0, 1), 0), "positive integer"),
        (lambda: regular_cut("x", (1, 1), 3), "low < high"),
        (lambda: GridPartition(["a", "b"], [(0, 1)], [2, 2]), "as many bounds"),
        (lambda: GridPartition(["a", "a"], [(0, 1), (0, 1)], [2, 2]), "distinct"),
        (lambda: CentersPartition(["a"], np.zeros((0, 1))), "at least one center"),
        (lambda: partition_from_spec({"kind": "tree"}), "unknown partition kind"),
        (lambda: partition_from_spec({"kind": "grid", "columns": ["a"]}), "incomplete"),
        (lambda: regular_cut("x", (0, 1), 2).assign(np.zeros((3, 2))), "columns"),
    ],
)
def test_bad_partitions_are_input_errors(make, match):
    with pytest.raises(InputError, match=match):
        make()


def test_dp_kmeans_finds_well_separated_clusters():
    rng = np.random.default_rng(1)
    X = np.concatenate([rng.normal(-0.6, 0.05, (3000, 1)), rng.normal(0.6, 0.05, (3000, 1))])
    noise = np.random.default_rng(2)

    def aggregate(partition, eps):
        result = noisy_aggregates(partition.assign(X), partition.n_cells, eps, values=X, bounds=[(-1, 1)], rng=noise)
        return result.counts[:, 0], result.sums[:, 0, :]

    found = dp_kmeans(aggregate, ["x"], [(-1, 1)], 2, 2.0, n_iter=5, seed=3)
    assert np.allclose(np.sort(found.centers[:, 0]), [-0.6, 0.6], atol=0.05)
