"""Map a variable into [-1, 1], the range paper 002 assumes (section 5: ``|x|, |y| <= 1``).

With declared public bounds the map is fixed before the data are seen, which the training-set
privacy results need. Without them the bounds are taken from the training split only, so the map is
a fixed function as far as the test split is concerned (test-set privacy, section 4); test values
outside the training range are clipped.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from collabcausal.estimators.validation import check_bounds


@dataclass(frozen=True)
class UnitScaler:
    """Clip to ``[low, high]`` and map affinely onto ``[-1, 1]``."""

    low: float
    high: float

    @classmethod
    def from_bounds(cls, bounds: tuple[float, float], name: str = "bounds") -> UnitScaler:
        """A scaler for declared bounds (checked: finite, low < high)."""
        lo, hi = check_bounds(bounds, name)
        return cls(lo, hi)

    def transform(self, values: NDArray[np.float64]) -> NDArray[np.float64]:
        """``2 (clip(v) - low) / (high - low) - 1``, divided first so that any finite width stays finite."""
        clipped = np.clip(values, self.low, self.high)
        return 2.0 * ((clipped - self.low) / (self.high - self.low)) - 1.0
