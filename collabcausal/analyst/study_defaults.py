"""What decides a DC-QE study's numbers, and its defaults: one source for every path that runs one.

``collabcausal simulate`` (paper 003's table of settings), ``collabcausal simulate KIND`` and
``collabcausal analyst serve`` (study.toml) run the same code; they give the same W-clb estimates
when they agree on the data and grid and on what is listed here:

* the anchor: drawn from the parties' anchor key, the **study id** and the public ranges
  (:mod:`collabcausal.party.anchor`), with ``r`` rows. It is a random draw, and PSM's 1:1 matching
  moves with it (LaLonde 2x2, W-clb, 100 random keys, ``scripts/anchor_draws.py``: ATT mean 0.53,
  sd 0.21, range 0.14 to 1.09, against a standard error of 0.80; IPW sd 0.005). Simulations key it with
  :func:`~collabcausal.anchor_key.simulation_anchor_key` of the seed and the study id
  :func:`simulation_study_id` (``"lalonde-2x2"`` for LaLonde on 2x2, the example's id);
* m~ per party (:data:`PARTY_COMPONENTS`) and m^ (default: the rank);
* the seed (bootstrap resamples), the estimand, the interval and the bootstrap count.

:func:`configuration_line` prints these in one line (``simulate`` and ``analyst serve`` alike), so
two runs that disagree show why.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import PurePath

PARTY_COMPONENTS = 3
"""m~ per party: chosen with the sensitivity sweep in docs/dcqe.md (paper 003's values were lost)."""
BOOTSTRAP = 200
"""Bootstrap replicates B (the paper used 1000)."""
INTERVAL = "percentile"
"""The SE and interval printed around each estimate."""


def simulation_study_id(dataset: str, shape: tuple[int, int]) -> str:
    """The study id of a simulation of ``dataset`` on a ``rows x columns`` grid, e.g. ``"lalonde-2x2"``.

    A data set given as a file is named by its file name without folder or suffix
    (``examples/cohort/cohort.csv`` on 3 x 2: ``"cohort-3x2"``). The id keys the anchor (with the
    anchor key), so every setting and every study kind of one simulation shares one anchor, as paper
    003's collaborations do.
    """
    return f"{PurePath(dataset).stem}-{shape[0]}x{shape[1]}"


def ranges_digest(ranges: Mapping[str, Sequence[float]]) -> str:
    """First 8 hex digits of the SHA-256 of the anchor ranges (canonical JSON): equal digests, equal ranges."""
    canonical = json.dumps({k: [float(v) for v in ranges[k]] for k in sorted(ranges)}, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:8]


def configuration_line(
    *,
    study: str,
    anchor_key: str,
    n_anchors: int,
    ranges: Mapping[str, Sequence[float]],
    party_components: object,
    n_components: int | None,
    seed: int,
) -> str:
    """One line naming everything besides the data and grid that decides a DC-QE run's numbers.

    Parameters
    ----------
    study : str
        The study id (keys the anchor).
    anchor_key : str
        Which key: ``"simulation key of seed 0"``, or a fingerprint of the parties' key.
    n_anchors : int
        Anchor rows r.
    ranges : mapping
        The public anchor ranges (printed as a digest).
    party_components : int, float or mapping
        m~.
    n_components : int, optional
        m^ (None: the rank).
    seed : int
        The study seed.
    """
    m_hat = "rank" if n_components is None else n_components
    return (
        f"DC-QE configuration: study {study!r}, anchor key: {anchor_key}, r {n_anchors}, "
        f"ranges {ranges_digest(ranges)}, m~ {party_components}, m^ {m_hat}, seed {seed}"
    )
