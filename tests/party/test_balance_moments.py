"""The party's weighted moments: what a resample of a few rows costs a large table."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import collabcausal.party  # noqa: F401  (registers the operations)
from collabcausal.messages import Message
from collabcausal.party import Party, PartyTable
from collabcausal.party.balance import MAX_SAMPLES
from collabcausal.party.chunked_table import ChunkedTable

N = 1_000_000


@pytest.mark.parametrize("out_of_core", [False, True])
def test_a_resample_of_few_rows_with_many_samples_does_not_allocate_samples_times_the_table(tmp_path, out_of_core):
    """Red team: 16 samples of 200 rows asked of a 10^6-row party made it hold 2 x 16 x 10^6 sums (256 MB).

    Out of core its weights are summed per distinct row asked for: one count per table row (8 MB)
    and 2 x 16 x 200 sums. In memory its 200 rows are gathered (a block of request rows at a time):
    nothing of the table's size. The numbers are those of the rows gathered.
    """
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"a": rng.normal(size=N)})
    table = PartyTable.from_frame(frame, ["a"])
    if out_of_core:
        (tmp_path / "t").mkdir()
        parquet = pa.Table.from_pandas(frame, preserve_index=False)
        pq.write_table(parquet, tmp_path / "t" / "a.parquet", row_group_size=N // 4)
    party = Party("p", ChunkedTable.open(tmp_path / "t", ["a"]) if out_of_core else table)
    rows = rng.integers(0, N, 200)
    arms = np.arange(200) % 2
    weights = rng.uniform(0.5, 2.0, (MAX_SAMPLES, 200))
    tracemalloc.start()
    try:
        request = Message("weighted_moments", {"study": "s"}, {"arms": arms, "weights": weights, "rows": rows})
        reply = party.handle(request)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    # out of core: the table's counts (8 MB), a block read and the 200 rows; in memory: the 200 rows only
    assert peak < (24 * 2**20 if out_of_core else 2**20), peak  # 256 MB before
    x = table.covariates[rows, 0]
    for s in range(MAX_SAMPLES):
        for arm in (0, 1):
            w = weights[s] * (arms == arm)
            np.testing.assert_allclose(reply.array("sum_wx")[s, arm, 0], w @ x, rtol=1e-12)
            np.testing.assert_allclose(reply.array("sum_wx2")[s, arm, 0], w @ x**2, rtol=1e-12)
