"""Rows every study kind's report shares: each party's privacy spend, a point estimate without interval.

Kept apart from the study kinds (:mod:`collabcausal.analyst.kinds`) and
:mod:`collabcausal.analyst.balance_report` so that each imports them one way.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from collabcausal.estimators.intervals import IntervalEstimate


def party_spend(
    parties: Iterable[str], epsilon: float, delta: float = 0.0, *, requests: int = 1
) -> dict[str, dict[str, float]]:
    """The report's ``privacy``: each party's spend when it was charged ``requests`` times (epsilon, delta).

    The analyst states what it asked (basic composition, as the parties' ledgers compose the
    charges); the ledgers themselves stay with the parties.
    """
    return {p: {"epsilon": requests * float(epsilon), "delta": requests * float(delta)} for p in parties}


def point_row(estimate: float, method: str, **extra: Any) -> dict[str, Any]:
    """A report row with an estimate and no interval (no bootstrap, no analytic SE)."""
    point = IntervalEstimate(float(estimate), None, None, None, "none", 0.05, None, 0, 0).to_dict()
    return point | {"method": method, **extra}
