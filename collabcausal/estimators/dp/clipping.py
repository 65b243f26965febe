"""How much of the data the declared public bounds clip: counted, reported and warned about.

DP learners clip covariates and outcomes to declared public bounds (clipping is per-record
post-processing, so the DP argument holds whatever the bounds). Bounds that are too narrow bias
the estimate silently; this module counts what they clip so the result can say so.

The counts are computed from the private data and are **not** differentially private: they are a
diagnostic for the data holder (attributes ``clipping_`` / ``warnings_`` of a fitted learner),
not something to release to an analyst.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

CLIP_WARN_SHARE = 0.05


class ClippingWarning(UserWarning):
    """More than :data:`CLIP_WARN_SHARE` of some input lies outside its declared bounds."""


@dataclass(frozen=True)
class ClipCount:
    """Values of one input that fell outside the declared bounds.

    Attributes
    ----------
    what : str
        What was checked, e.g. ``"outcomes"`` or ``"covariate rows"`` (a row counts once however many
        of its entries were clipped).
    bounds : str
        The declared bounds, as text.
    n : int
        Values (or rows) checked.
    clipped : int
        How many were outside the bounds.
    """

    what: str
    bounds: str
    n: int
    clipped: int

    @property
    def share(self) -> float:
        """clipped / n (0 for an empty input)."""
        return self.clipped / self.n if self.n else 0.0

    def message(self) -> str:
        """One line saying what was clipped and what to do about it."""
        return (f"{100 * self.share:.1f}% of the {self.what} ({self.clipped} of {self.n}) lie outside the declared "
                f"bounds {self.bounds} and were clipped: the estimate is biased towards them; declare wider public "
                f"bounds if the domain allows")


def count_outside(values: ArrayLike, bounds, what: str) -> ClipCount:
    """Rows of ``values`` with an entry outside ``bounds``: one (low, high), or one per column."""
    arr = np.asarray(values, dtype=float)
    rows = arr.reshape(arr.shape[0], -1) if arr.ndim else arr.reshape(1, 1)
    box = np.asarray(bounds, dtype=float).reshape(-1, 2)
    outside = ((rows < box[:, 0]) | (rows > box[:, 1])).any(axis=1)
    text = f"[{box[0, 0]:g}, {box[0, 1]:g}]" if box.shape[0] == 1 else "feature_bounds"
    return ClipCount(what, text, int(rows.shape[0]), int(outside.sum()))


def clipping_warnings(counts: Sequence[ClipCount], threshold: float = CLIP_WARN_SHARE) -> tuple[str, ...]:
    """Messages for the counts above ``threshold``, each also issued as a :class:`ClippingWarning`."""
    messages = tuple(c.message() for c in counts if c.share > threshold)
    for message in messages:
        warnings.warn(message, ClippingWarning, stacklevel=3)
    return messages
