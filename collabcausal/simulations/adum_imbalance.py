"""How much imbalance an eps-ADUM partition leaves within its cells: a simulation's check, from all rows.

eps-ADUM (paper 001) adjusts only between the cells of its partition: its effect is causal when
treatment is as good as random within every cell. A simulation holds every row, so it can measure
what the release cannot: the standardized mean difference (SMD) between treated and controls of
each covariate within the cells, averaged with the estimand's cell weights (ATT: the treated
counts; ATE: all), and the share of that weight in cells without one of the arms (which no cell
mean can adjust). Computed from the raw rows: not private, never part of a deployment's report.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from collabcausal.estimators.balance import SMD_THRESHOLD
from collabcausal.estimators.dp.partitions import partition_from_spec


@dataclass(frozen=True)
class WithinCellImbalance:
    """Within-cell SMD per covariate and the weight share in cells with one arm only.

    Attributes
    ----------
    smd : dict of str to float or None
        ``sum_k w_k (mean_k1 - mean_k0) / sum_k w_k`` over cells with both arms, divided by the
        covariate's pooled sd ``sqrt((var_1 + var_0) / 2)`` over all rows; None when no cell has both.
    one_arm_share : float
        Share of the weight ``sum_k w_k`` in cells without a treated or without a control subject.
    """

    smd: dict[str, float | None]
    one_arm_share: float

    def sentence(self, estimand: str) -> str:
        """Whether cell-level adjustment is enough, in one clause for the report's line."""
        defined = {c: v for c, v in self.smd.items() if v is not None}
        large = sorted(((abs(v), c) for c, v in defined.items() if abs(v) > SMD_THRESHOLD), reverse=True)
        empty = (f"; {100 * self.one_arm_share:.0f}% of the {estimand.upper()}'s weight sits in cells with one arm only"
                 if self.one_arm_share > 0 else "")
        if not large and not self.one_arm_share:
            worst = max(defined.values(), key=abs, default=0.0)
            return (f"simulation, from all rows: within the cells every |SMD| <= {SMD_THRESHOLD:g} "
                    f"(largest {abs(worst):.2f}): the cells balance the covariates")
        listed = ", ".join(f"{c} {v:.2f}" for v, c in large[:4])
        return (f"simulation, from all rows: cell-level adjustment is not enough: within the cells treated and "
                f"controls still differ (|SMD| > {SMD_THRESHOLD:g}: {listed or 'none'}){empty}")


def within_cell_imbalance(
    frame: pd.DataFrame, covariates: list[str], treatment: str, partition_spec: Mapping[str, Any], estimand: str
) -> WithinCellImbalance:
    """The within-cell imbalance of ``frame`` under the released partition (module docstring)."""
    partition = partition_from_spec(partition_spec)
    cells = partition.assign(frame[list(partition.columns)].to_numpy(dtype=float))
    t = frame[treatment].to_numpy().astype(bool)
    n = np.bincount(cells * 2 + t, minlength=2 * partition.n_cells).reshape(-1, 2).astype(float)
    weights = n[:, 1] if estimand == "att" else n.sum(axis=1)
    both = (n > 0).all(axis=1)
    smd = {}
    for column in covariates:
        x = frame[column].to_numpy(dtype=float)
        sums = np.bincount(cells * 2 + t, weights=x, minlength=2 * partition.n_cells).reshape(-1, 2)
        means = np.divide(sums, n, out=np.zeros_like(sums), where=n > 0)
        if not both.any() or weights[both].sum() == 0:
            smd[column] = None
            continue
        diff = weights[both] @ (means[both, 1] - means[both, 0]) / weights[both].sum()
        sd = np.sqrt((x[t].var(ddof=1) + x[~t].var(ddof=1)) / 2.0)
        smd[column] = float(diff / sd) if sd > 0 else 0.0
    return WithinCellImbalance(smd, float(weights[~both].sum() / weights.sum()))
