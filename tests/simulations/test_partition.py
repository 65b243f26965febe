"""Grid partitioning and analysis settings."""

from __future__ import annotations

import numpy as np
import pytest

from collabcausal.anchor_key import simulation_anchor_key
from collabcausal.errors import InputError
from collabcausal.simulations.datasets import load_lalonde, make_dcqe_synthetic
from collabcausal.simulations.partition import build_parties, partition_grid
from collabcausal.simulations.settings import DEFAULT_2X2, parse_settings


def test_random_rows_split_subjects_disjointly_and_completely() -> None:
    part = partition_grid(load_lalonde(), 2, seed=0)
    assert [len(g) for g in part.row_groups] == [1338, 1337]
    assert np.array_equal(np.sort(part.subjects()), np.arange(2675))
    assert part.names() == [["p11", "p12"], ["p21", "p22"]]


def test_row_rule_by_column_orders_groups_by_that_column() -> None:
    data = make_dcqe_synthetic(300, 0)
    part = partition_grid(data, 3, row_rule="column:x1")
    x1 = data.frame["x1"].to_numpy()
    assert x1[part.row_groups[0]].max() <= x1[part.row_groups[1]].min()


def test_parties_hold_only_their_cell() -> None:
    data = load_lalonde()
    part = partition_grid(data, 2, seed=1)
    parties = {p.name: p for p in build_parties(data, part, anchor_key=simulation_anchor_key(0))}
    p21 = parties["p21"].table
    assert p21.covariate_names == ("age", "married", "education", "nodegree")
    np.testing.assert_array_equal(p21.column("age"), data.frame["age"].to_numpy()[part.row_groups[1]])
    assert parties["p22"].table.has_labels


def test_large_grids_use_dashed_names() -> None:
    part = partition_grid(make_dcqe_synthetic(200, 0), 10, column_groups=[["x1", "x2", "x3"], ["x4", "x5", "x6"]])
    assert part.name(9, 1) == "p10-2"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"n_row_groups": 0}, "cannot split"),
        ({"column_groups": [["x1"], ["x1", "x2"]]}, "list 'x1' twice"),
        ({"column_groups": [["x1"], ["zz"]]}, "name unknown covariate 'zz'"),
        ({"column_groups": [["x1"], []]}, "an empty column group"),
        ({"row_rule": "column:zz"}, "unknown column 'zz'"),
        ({"row_rule": "alphabetical"}, "unknown row rule"),
    ],
)
def test_bad_partitions_are_refused(kwargs, message) -> None:
    with pytest.raises(InputError, match=message):
        partition_grid(make_dcqe_synthetic(100, 0), **({"n_row_groups": 2} | kwargs))


def test_column_groups_that_leave_out_covariates_are_refused_naming_exactly_those() -> None:
    data = make_dcqe_synthetic(100, 0)
    with pytest.raises(InputError) as caught:
        partition_grid(data, 2, column_groups=[["x1"], ["x2", "x2"]])
    problem = caught.value.problem
    assert problem.startswith("column groups 'x1;x2,x2' leave out 'x3', 'x4', 'x5', 'x6' (CA would adjust")
    assert problem.endswith("; list 'x2' twice")
    assert "\n" not in str(caught.value) and "drop it from the covariates" in caught.value.fix


def test_paper_settings_on_2x2_and_subsets_on_any_grid() -> None:
    part = partition_grid(load_lalonde(), 2)
    settings = {s.name: s for s in parse_settings(DEFAULT_2X2, part, {"W-clb": 6})}
    assert settings["L-clb"].parties == ("p11", "p21") and settings["W-clb"].n_components == 6
    assert settings["R-IA"].kind == "individual" and settings["CA"].kind == "central"
    assert settings["T-clb"].estimator_label("psm") == "DC-QE(PSM)"
    grid3 = partition_grid(make_dcqe_synthetic(300, 0), 3)
    (custom,) = parse_settings(["p11+p31"], grid3)
    assert custom.parties == ("p11", "p31")


@pytest.mark.parametrize(
    ("tokens", "message"), [(["Q"], "unknown setting"), (["p11+p99"], "unknown party"), (["W", "W"], "twice")]
)
def test_bad_settings_are_refused(tokens, message) -> None:
    with pytest.raises(InputError, match=message):
        parse_settings(tokens, partition_grid(load_lalonde(), 2))
