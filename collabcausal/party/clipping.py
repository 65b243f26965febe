"""How many of a party's values fall outside the study's declared ranges: its operator's own diagnostic.

Every DP release clips each column to its public range before adding noise, so a value outside
the range is moved silently into it (an outcome range of [0, 1] declared for a 0-60 outcome biases
the estimate). The party counts what it clips per column and logs it on its own stderr: computed
from its rows, this count is not differentially private and never leaves the party (it is neither
sent to the analyst nor written to the audit log). ``party join --check`` counts the same against
the ranges the operator copies from the study into ``[ranges]`` of party.toml, before the study.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from collabcausal.logs import LOGGER

if TYPE_CHECKING:
    from collabcausal.party.chunked_table import ChunkedTable
    from collabcausal.party.table import PartyTable

OUTCOME = "outcome"
"""The key of the outcome's range (in ``[ranges]`` the outcome may also be named by its column)."""

log = logging.getLogger(f"{LOGGER}.party.clipping")
"""The clip counts' own logger (under the party's), so that a simulation whose public ranges are narrower than its
simulated covariates on purpose can quiet them
(:func:`~collabcausal.simulations.dp_effects_benchmark.quiet_clipping_log`)."""


def values_outside(
    table: PartyTable | ChunkedTable, ranges: Mapping[str, Sequence[float]], outcome: str | None = None
) -> dict[str, int]:
    """Per column of ``ranges`` the table holds, how many of its values lie outside ``[lo, hi]``.

    ``ranges`` names covariates, and the outcome as :data:`OUTCOME` or as its column ``outcome``
    (counted only at a label holder). One pass over the rows, in memory or out of core.
    """
    covariates = [c for c in ranges if c in table.covariate_names]
    outcome_key = next((k for k in (OUTCOME, outcome) if k is not None and k in ranges), None)
    if not table.has_labels:
        outcome_key = None
    bounds = np.array([ranges[c] for c in covariates], dtype=float).reshape(-1, 2)
    outcome_range = ranges[outcome_key] if outcome_key is not None else None
    counts = table.reduce_rows(lambda rows, X, t, y: count_outside(bounds, outcome_range, X, y), covariates, np.add)
    names = covariates + ([outcome if outcome_key == OUTCOME and outcome else outcome_key] if outcome_key else [])
    return {str(name): int(k) for name, k in zip(names, np.atleast_1d(counts), strict=True)}


def count_outside(bounds: np.ndarray, outcome_range: Sequence[float] | None, X: Any, y: Any) -> np.ndarray:
    """Per column of a block of rows, how many values lie outside its ``[lo, hi]`` row of ``bounds``.

    With ``outcome_range``, one more entry counts the outcomes ``y`` outside it. The counts of the
    blocks of a table add up to the table's (one row task of ``reduce_rows``, alone or beside another).
    """
    X = np.asarray(X, dtype=float)
    out = ((X < bounds[:, 0]) | (X > bounds[:, 1])).sum(axis=0)
    if outcome_range is not None:
        lo, hi = outcome_range
        values = np.asarray(y, dtype=float)
        out = np.append(out, int(((values < lo) | (values > hi)).sum()))
    return out


def log_clipping(party: str, operation: str, clipped: Mapping[str, int], n_subjects: int) -> None:
    """One warning line on the party's own log when ``operation`` clipped any value (nothing is sent)."""
    moved = {name: k for name, k in clipped.items() if k}
    if moved:
        listed = ", ".join(f"{name} {k} of {n_subjects}" for name, k in moved.items())
        log.warning("%s: values clipped to the study's declared ranges (this party's diagnostic, not sent): %s",
                    operation, listed, extra={"party": party})
