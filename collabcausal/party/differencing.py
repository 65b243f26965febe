"""A party's defence against differencing of weighted requests (``weighted_moments``).

A weighted request returns, per arm, sums over subjects of w_k, w_k x_k and w_k x_k^2. Each request
alone must spread its weight over ``min_subjects`` subjects (:mod:`collabcausal.party.policy`),
but two requests whose per-subject weights differ on one subject k reveal x_k by subtraction:
``reply(S + {k}) - reply(S) = w_k x_k``; the same holds after scaling one request
(``reply(2 w + e_k) - 2 reply(w)``) or through a linear combination of several.

The rule (docs/threat-model.md, "Differencing"). Per arm, let w be the new request's per-subject
total weight (summed over repeated rows) and W the matrix of every earlier answered request's
weights. The party refuses the request when the part of w that no earlier request explains is
carried by fewer than ``min_subjects`` subjects, i.e. when, for

1. each earlier request w', the residual r = w - c w' with c the median of w_k / w'_k over the
   subjects both weigh (exact: catches a one-subject change of any size, even 1e-12, scaled or
   not), or
2. the least-squares residual r = w - W b of w on all earlier requests (catches linear
   combinations of several requests; residuals below 1e-9 of the largest weight count as zero,
   since rounding leaves such residuals when w is in the span),

the number of subjects with |r_k| >= ``min_weight_ratio`` x max|r| is between 1 and
``min_subjects - 1``. A request whose weights equal an earlier one's (r = 0) reveals nothing new
and is answered. At most ``max_moment_requests`` weighted requests are answered per party process
(a ``party join`` serves one study), which also bounds the history kept (n x 2 floats each).

What remains is stated in docs/threat-model.md: several requests combined with a sparse part
smaller than 1e-9 of the weights, or combinations whose supports are too small for the
least-squares residual to stay concentrated, are not detected; the cap bounds how many such
combinations exist. Releasing the moments with DP noise would close the question (not built).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from collabcausal.errors import PolicyError

_SPAN_TOLERANCE = 1e-9


class WeightedRequestHistory:
    """Per-arm, per-subject weights of the weighted requests a party has answered.

    Parameters
    ----------
    max_requests : int
        Requests answered at most (``max_moment_requests``).
    """

    def __init__(self, max_requests: int) -> None:
        self.max_requests = max_requests
        self._answered: list[tuple[NDArray[np.float64], NDArray[np.float64]]] = []

    def __len__(self) -> int:
        return len(self._answered)

    def admit(
        self,
        who: str,
        operation: str,
        totals: tuple[NDArray[np.float64], NDArray[np.float64]],
        *,
        min_subjects: int,
        min_weight_ratio: float,
    ) -> None:
        """Record ``totals`` (arm 0, arm 1) or refuse with a one-line :class:`PolicyError`."""
        if len(self._answered) >= self.max_requests:
            raise PolicyError(
                f"{who} has answered {len(self._answered)} {operation!r} requests, its max_moment_requests",
                "ask for fewer balance diagnostics, or ask the party to raise [policy] max_moment_requests",
            )
        for arm in (0, 1):
            new = totals[arm]
            earlier = [old[arm] for old in self._answered if old[arm].shape == new.shape]
            for index, old in enumerate(earlier):
                self._refuse_if_few(
                    who,
                    operation,
                    arm,
                    _ratio_residual(new, old),
                    min_subjects,
                    min_weight_ratio,
                    f"request {index + 1} scaled",
                )
            if len(earlier) > 1:
                residual = _span_residual(new, np.column_stack(earlier))
                self._refuse_if_few(
                    who, operation, arm, residual, min_subjects, min_weight_ratio, "a combination of earlier requests"
                )
        self._answered.append(totals)

    def _refuse_if_few(
        self,
        who: str,
        operation: str,
        arm: int,
        residual: NDArray[np.float64],
        min_subjects: int,
        min_weight_ratio: float,
        what: str,
    ) -> None:
        count = differing_subjects(residual, min_weight_ratio)
        if 0 < count < min_subjects:
            raise PolicyError(
                f"{who} refuses {operation!r}: in arm {arm} it differs from {what} on only {count} subjects, "
                f"below its min_subjects of {min_subjects} (the difference of the replies would describe them)",
                "send the same weights as before, or weights that differ on at least min_subjects subjects",
            )


def differing_subjects(residual: NDArray[np.float64], min_weight_ratio: float) -> int:
    """Subjects carrying a non-negligible part of ``residual``: |r_k| >= ratio x max|r| (0 if r = 0)."""
    magnitude = np.abs(residual)
    largest = float(magnitude.max()) if magnitude.size else 0.0
    if largest == 0.0:
        return 0
    return int(np.count_nonzero(magnitude >= min_weight_ratio * largest))


def _ratio_residual(new: NDArray[np.float64], old: NDArray[np.float64]) -> NDArray[np.float64]:
    """w - c w' with c the median ratio over the subjects both requests weigh (rule 1)."""
    both = (new > 0) & (old > 0)
    scale = float(np.median(new[both] / old[both])) if both.any() else 0.0
    return new - scale * old


def _span_residual(new: NDArray[np.float64], earlier: NDArray[np.float64]) -> NDArray[np.float64]:
    """Least-squares residual of w on the earlier requests, zero below the rounding tolerance (rule 2)."""
    coefficients = np.linalg.lstsq(earlier, new, rcond=None)[0]
    residual = new - earlier @ coefficients
    if np.abs(residual).max() <= _SPAN_TOLERANCE * max(float(np.abs(new).max()), 1e-300):
        return np.zeros_like(residual)
    return residual
