"""Party side of federated balance diagnostics (paper 003, eqs. 42-44; issue "federated balance").

``weighted_moments``: the analyst sends per-subject arms and weights (IPW weights or PSM match
counts) for the party's (resampled) rows; the party returns additive weighted sufficient
statistics of its own covariates per arm. Means and variances, hence SMD and MASMD, follow at the
analyst without raw covariates leaving the party. Not differentially private: the moments are
aggregates over many subjects, released under the party's policy and audit log. The arms reveal
the treatment of the row group's subjects to this party (documented in docs/threat-model.md).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from collabcausal.errors import InputError
from collabcausal.estimators.balance import ArmMoments, arm_weights, block_arm_moments
from collabcausal.estimators.validation import check_treatment, check_weights
from collabcausal.messages import Message
from collabcausal.party.node import Party
from collabcausal.party.operations import operation
from collabcausal.party.representation import selected_rows

Standardise = Callable[[NDArray[np.float64]], tuple[NDArray[np.float64], NDArray[np.int64]]]
"""A map of a block of covariate rows to the rows the moments are taken of, and a per-column count."""


def table_moments(
    table: Any,
    columns: Sequence[str],
    arms: NDArray,
    weights: NDArray[np.float64],
    rows: NDArray[np.int64] | None,
    standardise: Standardise | None = None,
) -> tuple[ArmMoments, NDArray[np.int64]]:
    """The :class:`ArmMoments` of the requested rows' covariates ``columns`` under each of k weightings
    (stacked: :class:`ArmMoments`), in one pass over the table.

    Request row ``r`` is table row ``rows[r]`` (all rows in order when ``rows`` is None) with arm
    ``arms[r]`` and weight ``weights[s, r]`` in sample ``s`` (``weights`` of shape (k, rows)). Each
    table row is read once, in place, in memory or out of core
    (:meth:`~collabcausal.party.table.PartyTable.reduce_rows`), and each block's products serve the
    k samples at once. A resample of a table in memory gathers its rows a block of request rows at
    a time; out of core, its table rows enter each arm's sums with the total weight of the request
    rows that repeat them (2k sums per distinct row asked for, one count per table row: the memory
    does not grow with k times the table), and its ``sum_w`` and ``sum_w2`` are the request's
    (``sum_w2`` over its rows, as the resample repeats them). With ``standardise`` the moments are
    those of ``standardise(X)``, whose per-column counts are summed over the table and
    returned (zeros without it).
    """
    samples = weights.shape[0]
    by_row = rows is not None and not table.in_memory  # out of core: each block's rows asked for, summed per row
    if by_row:
        by_arm = arm_weights(weights, arms)  # each request row's weight in each arm of each sample
        weighed = np.flatnonzero(np.bincount(rows, minlength=table.n_subjects))  # the table rows asked for
        # per weighed table row, its total weight in each arm of each sample (one bincount for all):
        # 2k x (distinct rows asked for) numbers, whatever the table's size
        at = (np.searchsorted(weighed, rows) + weighed.size * np.arange(by_arm.shape[0])[:, None]).ravel()
        per_row = np.bincount(at, by_arm.ravel(), minlength=by_arm.shape[0] * weighed.size)
        per_row = per_row.reshape(by_arm.shape[0], weighed.size)

    def task(block: slice, X: NDArray[np.float64], t: Any, y: Any) -> tuple[ArmMoments, NDArray[np.int64]]:
        Z, counts = (X, np.zeros(X.shape[1], np.int64)) if standardise is None else standardise(X)
        if by_row:
            lo, hi = np.searchsorted(weighed, (block.start, block.stop))  # the block's rows asked for
            asked = weighed[lo:hi] - block.start
            return block_arm_moments(Z, lambda r: per_row[:, lo:hi][:, r], samples, asked), counts
        # the request's rows in order: the block's own (rows None), or gathered from the whole table in memory
        w, a = (weights, arms) if rows is not None else (weights[:, block], arms[block])
        return block_arm_moments(Z, lambda r: arm_weights(w[:, r], a[r]), samples, rows), counts

    total, counts = table.reduce_rows(task, columns, _add_each)
    if by_row:
        total = ArmMoments(by_arm.sum(axis=1), np.vecdot(by_arm, by_arm), total.sum_wx, total.sum_wx2)
    return total, counts


def _add_each(a: tuple[Any, ...], b: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(x + y for x, y in zip(a, b, strict=True))


@operation("weighted_moments", parameters=(), exact_rows=True, out_of_core=True)
def weighted_moments(party: Party, request: Message) -> Message:
    """Weighted per-arm sufficient statistics of the party's covariates, for one or several weightings.

    Request arrays: ``arms`` (0/1 per row), ``weights`` (>= 0 per row, or of shape (k, rows): k
    samples of the same rows, e.g. a study's matched and weighted samples, read in one pass),
    optional ``rows``. Reply arrays: the fields of
    :class:`collabcausal.estimators.balance.ArmMoments`, each with a leading axis of the k samples
    when ``weights`` is 2-D. Reply params: ``covariates`` (names, in column order). Each sample
    counts as one request of the party's differencing history (:mod:`collabcausal.party.policy`).
    """
    rows = selected_rows(party, request)
    n = party.table.n_subjects if rows is None else rows.size
    arms = check_treatment(request.array("arms"), "arms", n=n)
    weights = request.array("weights")
    stacked = weights.ndim == 2
    samples = sample_weights(weights, n) if stacked else check_weights(weights, "weights", n=n)[None, :]
    moments, _ = table_moments(party.table, party.table.covariate_names, arms, samples, rows)
    arrays = dict(vars(moments.by_sample() if stacked else moments))  # (k, 2, ...) in the reply to stacked weights
    return Message("weighted_moments", {"covariates": list(party.table.covariate_names)}, arrays)


MAX_SAMPLES = 16
"""Samples of weights one ``weighted_moments`` request may stack: a study asks for at most four (PSM,
IPW, AIPW, unweighted); a resample's per-row sums out of core take 2 x samples floats per distinct row
asked for (in memory its rows are gathered a block at a time: 2 x samples floats per row of a block)."""


def sample_weights(weights: NDArray, n: int) -> NDArray[np.float64]:
    """A request's 2-D ``weights``, k samples of ``n`` rows: finite, non-negative, shaped (k, n), 1 <= k <= MAX_SAMPLES.

    Raises
    ------
    InputError
        Naming the shape or the values, and the fix.
    """
    if weights.ndim != 2 or weights.shape[1] != n or weights.dtype.kind not in "biuf":
        raise InputError(
            f"weights has shape {weights.shape} and dtype {weights.dtype}, expected (k, {n}) numbers",
            "send one weight per requested row, one row of weights per sample",
        )
    if not 1 <= weights.shape[0] <= MAX_SAMPLES:
        raise InputError(
            f"weights stacks {weights.shape[0]} samples, not 1 to {MAX_SAMPLES}",
            f"send at most {MAX_SAMPLES} samples per request",
        )
    samples = weights.astype(np.float64, copy=False)
    if samples.size and not (samples.min() >= 0.0 and samples.max() < np.inf):  # NaN fails both; no temporaries
        raise InputError("weights must be finite and >= 0", "send valid weights")
    return samples
