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

from collabcausal.estimators.balance import ArmMoments, arm_sums, arm_weights
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
    core (:meth:`~collabcausal.party.table.PartyTable.reduce_rows`), entering each arm's sums with
    the total weight of the request rows that repeat it (a resample's repeats add up).
    ``sum_w`` and ``sum_w2`` are functions of the request alone (``sum_w2`` over its rows, as a
    resample repeats them). With ``standardise`` the moments are those of ``standardise(X)``, whose
    per-column counts are summed over the table and returned (zeros without it).
    """
    A = arm_weights(arms, weights)
    per_row = A if rows is None else np.stack([np.bincount(rows, a, minlength=table.n_subjects) for a in A])

    def task(block: slice, X: NDArray[np.float64], t: Any, y: Any) -> tuple[NDArray, NDArray, NDArray]:
        Z, counts = (X, np.zeros(X.shape[1], np.int64)) if standardise is None else standardise(X)
        return (*arm_sums(Z, per_row[:, block]), counts)

    sum_wx, sum_wx2, counts = table.reduce_rows(task, columns, _add_each)
    return ArmMoments(A.sum(axis=1), np.einsum("ij,ij->i", A, A), sum_wx, sum_wx2), counts


def _add_each(a: tuple[NDArray, ...], b: tuple[NDArray, ...]) -> tuple[NDArray, ...]:
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
