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

from collabcausal.estimators.balance import ArmMoments, arm_moments, arm_weights, block_arm_moments
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
    """The :class:`ArmMoments` of the requested rows' covariates ``columns``, in one pass over the table.

    Request row ``r`` is table row ``rows[r]`` (all rows in order when ``rows`` is None) with arm
    ``arms[r]`` and weight ``weights[r]``. Each table row is read once, in place, in memory or out of
    core (:meth:`~collabcausal.party.table.PartyTable.reduce_rows`); a resample's table rows enter
    each arm's sums with the total weight of the request rows that repeat them, and its ``sum_w``
    and ``sum_w2`` are the request's (``sum_w2`` over its rows, as the resample repeats them). With
    ``standardise`` the moments are those of ``standardise(X)``, whose per-column counts are summed
    over the table and returned (zeros without it).
    """
    if rows is None:
        def moments(block: slice, Z: NDArray[np.float64]) -> ArmMoments:
            return arm_moments(Z, arms[block], weights[block])
    else:
        by_arm = arm_weights(weights, arms)  # each request row's weight in each arm
        per_row = np.stack([np.bincount(rows, a, minlength=table.n_subjects) for a in by_arm])

        def moments(block: slice, Z: NDArray[np.float64]) -> ArmMoments:
            return block_arm_moments(Z, lambda r: per_row[:, block][:, r])

    def task(block: slice, X: NDArray[np.float64], t: Any, y: Any) -> tuple[ArmMoments, NDArray[np.int64]]:
        Z, counts = (X, np.zeros(X.shape[1], np.int64)) if standardise is None else standardise(X)
        return moments(block, Z), counts

    total, counts = table.reduce_rows(task, columns, _add_each)
    if rows is not None:
        total = ArmMoments(by_arm.sum(axis=1), np.einsum("ij,ij->i", by_arm, by_arm), total.sum_wx, total.sum_wx2)
    return total, counts


def _add_each(a: tuple[Any, ...], b: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(x + y for x, y in zip(a, b, strict=True))


@operation("weighted_moments", exact_rows=True, out_of_core=True)
def weighted_moments(party: Party, request: Message) -> Message:
    """Weighted per-arm sufficient statistics of the party's covariates.

    Request arrays: ``arms`` (0/1 per row), ``weights`` (>= 0 per row), optional ``rows``.
    Reply arrays: the fields of :class:`collabcausal.estimators.balance.ArmMoments`.
    Reply params: ``covariates`` (names, in column order).
    """
    rows = selected_rows(party, request)
    n = party.table.n_subjects if rows is None else rows.size
    arms = check_treatment(request.array("arms"), "arms", n=n)
    weights = check_weights(request.array("weights"), "weights", n=n)
    moments, _ = table_moments(party.table, party.table.covariate_names, arms, weights, rows)
    arrays = {name: np.asarray(value) for name, value in vars(moments).items()}  # the dataclass's fields
    return Message("weighted_moments", {"covariates": list(party.table.covariate_names)}, arrays)
