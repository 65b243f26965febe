"""Analyst side of federated balance diagnostics (paper 003, eqs. 42-45).

The analyst sends each party the arms and balance weights of its row group's subjects, adds the
returned sufficient statistics over row groups, and turns them into standardized mean
differences, so SMD and MASMD are exact without raw covariates reaching the analyst.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from collabcausal.analyst.grid import Grid
from collabcausal.analyst.replies import check_moments
from collabcausal.errors import StudyFailedError
from collabcausal.estimators.balance import ArmMoments, smd_from_moments
from collabcausal.messages import Message


def federated_smd(
    grid: Grid,
    parties: Sequence[Sequence[str]],
    rows: Sequence[NDArray[np.int64]],
    treatment: NDArray[np.int8],
    weights: NDArray[np.float64],
    *,
    study: str = "study",
    timeout: float | None = None,
) -> tuple[tuple[str, ...], NDArray[np.float64]]:
    """SMD per covariate of every listed party, from federated weighted moments.

    Parameters
    ----------
    grid : Grid
    parties : sequence of sequence of str
        Parties per row group whose covariates are diagnosed (same column layout in every group).
    rows : sequence of int arrays
        Subject positions per row group (all subjects, or a bootstrap resample).
    treatment, weights : ndarray (n,)
        Stacked over row groups in the order of ``rows``.

    Returns
    -------
    covariates : tuple of str
        ``party:column`` names, in the order of the SMD array (first row group's layout).
    smd : ndarray
    """
    bounds = np.cumsum([0] + [len(r) for r in rows])
    messages = {}
    for i, group in enumerate(parties):
        sl = slice(bounds[i], bounds[i + 1])
        arrays = {"arms": treatment[sl], "weights": weights[sl], "rows": np.asarray(rows[i], dtype=np.int64)}
        messages.update({party: Message("weighted_moments", {"study": study}, arrays) for party in group})
    replies = grid.send_and_receive(messages, timeout=timeout)
    per_group = [_side_by_side([check_moments(p, replies[p]) for p in group]) for group in parties]
    for group, moments in zip(parties[1:], per_group[1:], strict=True):
        if moments.sum_wx.shape != per_group[0].sum_wx.shape:
            raise StudyFailedError(
                f"parties {', '.join(group)} sent moments of {moments.sum_wx.shape[1]} covariates, the first row "
                f"group {per_group[0].sum_wx.shape[1]}",
                "give every row group the same column layout (balance_parties)",
            )
    names = tuple(f"{p}:{c}" for p in parties[0] for c in replies[p].params["covariates"])
    total = per_group[0]
    for moments in per_group[1:]:
        total = total + moments
    return names, smd_from_moments(total)


def _side_by_side(parts: Sequence[ArmMoments]) -> ArmMoments:
    """One row group's parties hold different covariates of the same subjects: join columns.

    The weight sums are the same for every party of the row (same subjects, arms and weights).
    """
    first = parts[0]
    return ArmMoments(
        first.sum_w,
        first.sum_w2,
        np.concatenate([p.sum_wx for p in parts], axis=-1),
        np.concatenate([p.sum_wx2 for p in parts], axis=-1),
    )
