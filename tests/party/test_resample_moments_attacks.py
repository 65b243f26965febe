"""Red team of weighted_moments on a resample of a table in memory (its rows gathered a block at a time).

The numbers must be those of a brute-force sum over the gathered rows and of the out-of-core path,
for repeated rows, zero weights, k stacked samples and resamples longer than a row block; the
memory of many samples of a long resample stays that of the request and a few blocks.
"""

from __future__ import annotations

import tracemalloc

import numpy as np
import pandas as pd
import pytest
from chunked_tables import COLUMNS, ledger_party
from test_chunked_table import frame, write_directory

from collabcausal.estimators.blocks import ROW_BLOCK
from collabcausal.messages import Message
from collabcausal.party import Party, PartyTable
from collabcausal.party.balance import MAX_SAMPLES
from collabcausal.party.chunked_table import ChunkedTable


def brute_force(X: np.ndarray, rows: np.ndarray, arms: np.ndarray, weights: np.ndarray) -> dict[str, np.ndarray]:
    """Each sample's and arm's sums, one gathered row at a time (k, 2[, m])."""
    k, m = weights.shape[0], X.shape[1]
    out = {"sum_w": np.zeros((k, 2)), "sum_w2": np.zeros((k, 2)), "sum_wx": np.zeros((k, 2, m)),
           "sum_wx2": np.zeros((k, 2, m))}
    for s in range(k):
        for arm in (0, 1):
            w = weights[s] * (arms == arm)
            x = X[rows]
            out["sum_w"][s, arm], out["sum_w2"][s, arm] = w.sum(), (w * w).sum()
            out["sum_wx"][s, arm], out["sum_wx2"][s, arm] = w @ x, w @ (x * x)
    return out


def resample(n_table: int, n_rows: int, k: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows with many repeats, arms, and k samples of weights with zeros (whole arms of a sample too)."""
    rng = np.random.default_rng(seed)
    rows = rng.integers(0, min(n_table, 97), n_rows)  # few distinct rows: each repeated many times
    rows[: n_rows // 3] = rng.integers(0, n_table, n_rows // 3)
    arms = (rng.random(n_rows) < 0.4).astype(np.int8)
    arms[:2] = (0, 1)  # both arms asked for
    weights = rng.uniform(0.0, 3.0, (k, n_rows)) * (rng.random((k, n_rows)) < 0.7)
    weights[0] = 0.0  # a sample of zero weights
    if k > 1:
        weights[1, arms == 1] = 0.0  # a sample with an empty treated arm
    return rows, arms, weights


@pytest.fixture(scope="module")
def tables(tmp_path_factory):
    path = tmp_path_factory.mktemp("registry")
    ordered = write_directory(path / "registry", frame())
    chunked = ChunkedTable.open(path / "registry", COLUMNS, treatment="t", outcome="y")
    return chunked, PartyTable.from_frame(ordered, COLUMNS, treatment="t", outcome="y"), path


@pytest.mark.parametrize("k", [1, 3, MAX_SAMPLES])
@pytest.mark.parametrize("n_rows", [2, 250, ROW_BLOCK + 1234])
def test_in_memory_resample_equals_brute_force_and_the_out_of_core_path(tables, k, n_rows):
    chunked, memory, path = tables
    rows, arms, weights = resample(memory.n_subjects, n_rows, k, seed=n_rows + k)
    request = Message("weighted_moments", {"study": "s"}, {"arms": arms, "weights": weights, "rows": rows})
    ours = ledger_party(path, memory, f"m{k}_{n_rows}").handle(request)
    theirs = ledger_party(path, chunked, f"c{k}_{n_rows}").handle(request)
    expected = brute_force(memory.covariates, rows, arms, weights)
    for name, value in expected.items():
        assert ours.arrays[name].shape == value.shape
        np.testing.assert_allclose(ours.arrays[name], value, rtol=1e-10, atol=1e-9)
        np.testing.assert_allclose(ours.arrays[name], theirs.arrays[name], rtol=1e-10, atol=1e-9)
    assert (ours.arrays["sum_w"][0] == 0.0).all() and (ours.arrays["sum_wx2"][0] == 0.0).all()


def test_a_single_sample_is_the_stacked_requests_first_sample(tables):
    _, memory, path = tables
    rows, arms, weights = resample(memory.n_subjects, ROW_BLOCK + 7, 4, seed=9)
    party = ledger_party(path, memory, "single")
    stacked = party.handle(Message("weighted_moments", {"study": "s"}, {"arms": arms, "weights": weights,
                                                                         "rows": rows}))
    for s in range(4):
        one = party.handle(Message("weighted_moments", {"study": "s"}, {"arms": arms, "weights": weights[s],
                                                                         "rows": rows}))
        for name in one.arrays:
            np.testing.assert_allclose(one.arrays[name], stacked.arrays[name][s], rtol=1e-13, atol=1e-12)


def test_sixteen_samples_of_a_long_resample_of_a_big_table_allocate_about_the_request_only():
    """The gather reads a block of request rows at a time: no (k x rows) or (rows x m) temporary."""
    n, n_rows, m = 400_000, 300_000, 4
    rng = np.random.default_rng(0)
    party = Party("p", PartyTable.from_frame(pd.DataFrame(rng.normal(size=(n, m)), columns=list("abcd")),
                                              list("abcd")))
    rows = rng.integers(0, n, n_rows)
    arms = (np.arange(n_rows) % 2).astype(np.int8)
    weights = rng.uniform(0.5, 2.0, (MAX_SAMPLES, n_rows))  # the request itself: 38 MB
    request = Message("weighted_moments", {"study": "s"}, {"arms": arms, "weights": weights, "rows": rows})
    tracemalloc.start()
    try:
        reply = party.handle(request)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    # two blocks' 2k x ROW_BLOCK arm weights (16 MB each at k = 16: the next is made before the last
    # is let go) and ROW_BLOCK x m gathered rows (2 MB); a k x rows copy of the weights (38 MB) on top
    # would exceed it, whatever the table's size
    assert peak < 2 * (2 * MAX_SAMPLES * ROW_BLOCK * 8) + 8 * 2**20, peak
    x = party.table.covariates.take(rows[:1000], axis=0)
    assert reply.arrays["sum_wx"].shape == (MAX_SAMPLES, 2, m)
    assert np.isfinite(reply.arrays["sum_wx2"]).all() and x.shape == (1000, m)
