"""The party's weighted moments: what a resample of a few rows costs a large table."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pandas as pd

import collabcausal.party  # noqa: F401  (registers the operations)
from collabcausal.messages import Message
from collabcausal.party import Party, PartyTable
from collabcausal.party.balance import MAX_SAMPLES

N = 1_000_000


def test_a_resample_of_few_rows_with_many_samples_does_not_allocate_samples_times_the_table():
    """Red team: 16 samples of 200 rows asked of a 10^6-row party made it hold 2 x 16 x 10^6 sums (256 MB).

    Now its weights are summed per distinct row asked for: one count per table row (8 MB) and
    2 x 16 x 200 sums; the numbers are those of the rows gathered.
    """
    rng = np.random.default_rng(0)
    party = Party("p", PartyTable.from_frame(pd.DataFrame({"a": rng.normal(size=N)}), ["a"]))
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
    assert peak < 24 * 2**20  # the table's counts (8 MB) and the 200 rows; 256 MB before
    x = party.table.covariates[rows, 0]
    for s in range(MAX_SAMPLES):
        for arm in (0, 1):
            w = weights[s] * (arms == arm)
            np.testing.assert_allclose(reply.array("sum_wx")[s, arm, 0], w @ x, rtol=1e-12)
            np.testing.assert_allclose(reply.array("sum_wx2")[s, arm, 0], w @ x**2, rtol=1e-12)
