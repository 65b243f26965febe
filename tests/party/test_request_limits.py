"""A hostile analyst asks for sizes that would exhaust the party: refused before any charge or compute."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import collabcausal.party  # noqa: F401  (registers the operations)
from collabcausal.errors import ConfigError, PolicyError
from collabcausal.estimators.dp.partitions import GridPartition, regular_cut
from collabcausal.ledger import PrivacyLedger
from collabcausal.messages import Message
from collabcausal.party import Party, PartyTable
from collabcausal.party.policy import PartyPolicy
from collabcausal.party.request_limits import RequestLimits, histogram_entries

OPS = ("describe", "dp_histogram", "dp_range", "weighted_moments", "dc_representation")


@pytest.fixture()
def party(tmp_path):
    rng = np.random.default_rng(0)
    n = 200
    frame = pd.DataFrame(
        {"a": rng.uniform(0, 1, n), "b": rng.normal(size=n), "t": np.arange(n) % 2, "y": rng.normal(size=n)}
    )
    # DP and exact operations on one party, to test every cap: an explicit opt-out (no guarantee)
    policy = PartyPolicy(
        OPS, ["a", "b"], min_subjects=10, limits=RequestLimits(max_request_bytes=2048), allow_plain_with_dp=True
    )
    table = PartyTable.from_frame(frame, ["a", "b"], treatment="t", outcome="y")
    ledger = PrivacyLedger(tmp_path / "l.sqlite", epsilon=100.0, dataset="d")
    return Party("h", table, policy=policy, ledger=ledger, anchor_key=bytes(32))


def _histogram(partition, **params) -> Message:
    return Message(
        "dp_histogram", {"study": "s", "epsilon": 1.0, "columns": ["a", "b"], "partition": partition, **params}
    )


def _refused(party: Party, request: Message, key: str) -> str:
    with pytest.raises(PolicyError, match=f"above its {key} of") as info:
        party.handle(request)
    message = str(info.value)
    assert "\n" not in message and f"[policy] {key}" in message
    return message


def test_a_histogram_of_10_to_the_12_cells_is_refused_before_the_ledger_is_charged(party):
    grid = {"kind": "grid", "columns": ["a", "b"], "bounds": [[0, 1], [-3, 3]], "n_cells": [10**6, 10**6]}
    message = _refused(party, _histogram(grid), "max_cells")
    assert "1000000000000 histogram entries" in message
    assert party.ledger.history() == []


def test_cell_counts_sent_as_floats_are_counted_too(party):
    # Red team: [1e6, 1e6] as floats counted as 0 entries (not ints), passed max_cells, and the grid
    # accepted them (int(1e6) == 1e6): charged, then a 10^12-cell bincount.
    grid = {"kind": "grid", "columns": ["a", "b"], "bounds": [[0, 1], [-3, 3]], "n_cells": [1e6, 1e6]}
    _refused(party, _histogram(grid), "max_cells")
    assert party.ledger.history() == []


def test_cells_count_arms_and_summed_columns(party):
    cut = regular_cut("a", (0, 1), 25_000)
    sums = [{"column": "b", "bounds": [-3, 3]}]
    assert histogram_entries(_histogram(cut.to_spec(), by_arm=True, sums=sums).params) == 100_000
    party.handle(_histogram(cut.to_spec(), by_arm=True, sums=sums))  # exactly at the cap: answered
    _refused(party, _histogram(regular_cut("a", (0, 1), 25_001).to_spec(), by_arm=True, sums=sums), "max_cells")
    assert len(party.ledger.history()) == 1


def test_centers_partitions_count_one_cell_per_center():
    spec = {"kind": "centers", "columns": ["a"], "centers": [[0.1]] * 7}
    assert histogram_entries({"partition": spec, "by_arm": True}) == 14
    grid = GridPartition(["a", "b"], [(0, 1), (0, 1)], [3, 4]).to_spec()
    assert histogram_entries({"partition": grid}) == 12
    assert histogram_entries({"partition": {"kind": "grid", "n_cells": ["x"]}}) == 0


def test_arrays_above_max_request_bytes_are_refused(party):
    request = Message("weighted_moments", {}, {"arms": np.arange(200) % 2, "weights": np.ones(200)})
    message = _refused(party, request, "max_request_bytes")
    assert "3200 bytes of arrays" in message


def test_params_nested_100000_deep_are_refused_without_recursion(party):
    nested: list = []
    for _ in range(100_000):
        nested = [nested]
    _refused(party, Message("dp_range", {"quantiles": nested}), "max_params_depth")


def test_a_list_of_20000_quantiles_is_refused_before_the_charge(party):
    request = Message(
        "dp_range", {"study": "s", "epsilon": 1.0, "columns": ["a"], "bounds": [[0, 1]], "quantiles": [0.5] * 20_000}
    )
    _refused(party, request, "max_list_length")
    assert party.ledger.history() == []


def test_params_above_max_params_bytes_are_refused(party):
    _refused(party, Message("describe", {"study": "x" * (2 << 20)}), "max_params_bytes")


def test_anchor_rows_and_components_are_capped_before_any_work(party):
    params = {"study": "s", "anchor_ranges": {"a": [0, 1], "b": [-3, 3]}}
    with pytest.raises(PolicyError, match="anchor rows, the study asked for 200000000"):
        party.handle(Message("dc_representation", {**params, "n_anchors": 2 * 10**8, "n_components": 1}))
    with pytest.raises(PolicyError, match="releases at most 1 components"):
        party.handle(Message("dc_representation", {**params, "n_anchors": 50, "n_components": 10**9}))


def test_honest_requests_pass_the_default_limits(party):
    counts = party.handle(_histogram(regular_cut("a", (0, 1), 10).to_spec(), by_arm=True)).array("counts")
    assert counts.shape == (10, 2)
    assert party.handle(Message("describe")).params["n_subjects"] == 200


@pytest.mark.parametrize("key", ["max_cells", "max_request_bytes", "max_params_depth", "max_moment_requests"])
@pytest.mark.parametrize("bad", [0, -1, 2.5, True])
def test_limits_must_be_positive_integers(key, bad):
    with pytest.raises(ConfigError, match=f"policy {key} must be a positive integer"):
        RequestLimits(**{key: bad})
