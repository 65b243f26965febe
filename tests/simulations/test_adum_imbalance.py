"""Within-cell imbalance of an eps-ADUM partition, measured on a simulation's rows (issue 38, item 6)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from collabcausal.estimators.dp.partitions import regular_cut
from collabcausal.simulations.adum_imbalance import within_cell_imbalance

CELLS = regular_cut("x", (0.0, 1.0), 4).to_spec()


def _frame(within_cell_confounding: bool, n: int = 20000) -> pd.DataFrame:
    rng = np.random.default_rng(3)
    x = rng.random(n)
    z = rng.normal(size=n)
    score = 2 * x + (1.5 * z if within_cell_confounding else 0.0)  # x is the partition's: adjusted between cells
    t = (rng.random(n) < 1 / (1 + np.exp(-(score - 1)))).astype(int)
    return pd.DataFrame({"x": x, "z": z, "t": t})


def test_cells_that_hold_the_only_confounder_balance_the_covariates():
    imbalance = within_cell_imbalance(_frame(False), ["x", "z"], "t", CELLS, "att")
    assert max(abs(v) for v in imbalance.smd.values()) < 0.1  # n = 20000: each SMD's sd is about 0.015
    assert imbalance.one_arm_share == 0.0
    assert "the cells balance the covariates" in imbalance.sentence("att")


def test_a_confounder_outside_the_partition_is_named_as_not_adjusted():
    imbalance = within_cell_imbalance(_frame(True), ["x", "z"], "t", CELLS, "att")
    assert imbalance.smd["z"] > 0.5 and abs(imbalance.smd["x"]) < 0.2
    assert "cell-level adjustment is not enough" in imbalance.sentence("att") and "z " in imbalance.sentence("att")


def test_weight_in_cells_without_controls_is_counted():
    frame = _frame(False)
    frame.loc[frame.x > 0.75, "t"] = 1  # the last cell has no controls
    imbalance = within_cell_imbalance(frame, ["x", "z"], "t", CELLS, "att")
    expected = (frame.x > 0.75).sum() / frame.t.sum()
    assert abs(imbalance.one_arm_share - expected) < 1e-12
    assert f"{100 * expected:.0f}% of the ATT's weight sits in cells with one arm only" in imbalance.sentence("att")
