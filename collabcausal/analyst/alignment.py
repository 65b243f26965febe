"""Analyst side of subject alignment: intersect the parties' keyed hashes, order, tell each party.

For one row group of a vertical split, every party sends HMAC-SHA256 digests of its subject ids
under the group's shared key (:mod:`collabcausal.party.alignment`); the analyst, who does not hold
the key, keeps the digests present at every party, orders them by digest value (an order that
reveals nothing about the ids) and sends each party the positions of its rows in that order. After
:func:`align_row_group` row k means the same subject at every party of the group.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import reduce

import numpy as np

from collabcausal.analyst.grid import Grid
from collabcausal.errors import StudyFailedError
from collabcausal.messages import Message


@dataclass(frozen=True)
class AlignmentReport:
    """Outcome of aligning one row group.

    Attributes
    ----------
    n_matched : int
        Subjects present at every party of the group (the rows kept).
    unmatched : dict of str to int
        Per party, its subjects without a match at every other party (dropped).
    """

    n_matched: int
    unmatched: dict[str, int]


def align_row_group(grid: Grid, parties: Sequence[str], *, timeout: float | None = None) -> AlignmentReport:
    """Align the subjects of the row group ``parties``; see the module docstring.

    Raises
    ------
    StudyFailedError
        The parties share no subject, or a party's digests repeat (duplicate ids).
    """
    replies = grid.send_and_receive({p: Message("aligned_ids") for p in parties}, timeout=timeout)
    digests = {p: [bytes(row) for row in np.asarray(replies[p].array("ids"), dtype=np.uint8)] for p in parties}
    for party, rows in digests.items():
        if len(set(rows)) != len(rows):
            raise StudyFailedError(f"party {party!r} sent repeated subject hashes", "make its subject ids unique")
    common = sorted(reduce(set.intersection, (set(rows) for rows in digests.values())))
    if not common:
        raise StudyFailedError(
            f"the parties {', '.join(parties)} share no subject",
            "check that they use the same alignment key and the same subject id scheme",
        )
    orders = {}
    for party, rows in digests.items():
        position = {digest: i for i, digest in enumerate(rows)}
        orders[party] = np.array([position[d] for d in common], dtype=np.int64)
    grid.send_and_receive({p: Message("align", {}, {"order": orders[p]}) for p in parties}, timeout=timeout)
    return AlignmentReport(len(common), {p: len(rows) - len(common) for p, rows in digests.items()})
