"""The shared anchor data set (paper 003, Algorithm 2 line 1; DESIGN.md "DC-QE" step 1).

The anchor is never built from private rows: column ``k`` is uniform on ``[lo_k, hi_k]``, drawn
from a stream derived from the study seed and the column's name. Every party can therefore build
exactly its own columns of the same ``r x m`` matrix without seeing anyone else's, and the
analyst can check nothing private went into it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from numpy.typing import NDArray

from collabcausal.errors import InputError
from collabcausal.estimators.validation import check_bounds
from collabcausal.randomness import child_rng


def anchor_columns(
    seed: int,
    columns: Sequence[str],
    ranges: Mapping[str, Sequence[float]],
    n_anchors: int,
) -> NDArray[np.float64]:
    """The anchor's columns ``columns`` (``n_anchors`` rows), uniform on their declared ranges.

    Parameters
    ----------
    seed : int
        The study seed (public within the study).
    columns : sequence of str
        Covariate names, in the order the party shares them.
    ranges : mapping of str to (low, high)
        Public ranges per covariate (study config, or DP range estimates).
    n_anchors : int
        Number of anchor rows ``r``.

    Returns
    -------
    ndarray of shape (n_anchors, len(columns))
    """
    if int(n_anchors) < 1:
        raise InputError(f"n_anchors must be at least 1, got {n_anchors}", "use e.g. the number of subjects")
    out = np.empty((int(n_anchors), len(columns)))
    for k, name in enumerate(columns):
        if name not in ranges:
            raise InputError(f"no anchor range for covariate {name!r}", "declare [low, high] for every covariate")
        lo, hi = check_bounds(tuple(ranges[name]), f"anchor range of {name!r}")
        out[:, k] = child_rng(seed, "anchor", name).uniform(lo, hi, int(n_anchors))
    return out
