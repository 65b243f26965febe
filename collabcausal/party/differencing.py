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
``min_subjects - 1``; or when

3. a subject's indicator e_k lies (up to negligible weights) in the span of all the answered
   requests and the new one (:func:`isolated_subjects`): some combination of the replies is then
   that subject's row, however many requests it takes and however the decoy weights are spread.

A request whose weights equal an earlier one's (r = 0) reveals nothing new and is answered. A
request stacking k samples of weights is k requests here, admitted in order (the policy refuses it
whole when one sample is refused: :meth:`PartyPolicy._check_weighted
<collabcausal.party.policy.PartyPolicy._check_weighted>`). At
most ``max_moment_requests`` weighted requests are answered per (dataset, study), which also bounds
the history kept (n x 2 floats each); the history is persisted in the party's state
(:mod:`collabcausal.party.request_state`), so a restart does not reset it.

What remains is stated in docs/threat-model.md: several requests combined with a sparse part
smaller than 1e-9 of the weights, or combinations isolating 2 to ``min_subjects - 1`` subjects
together (rule 3 looks for single subjects), are not detected; the cap bounds how many such
combinations exist. Releasing the moments with DP noise would close the question (not built).
"""

from __future__ import annotations

from collections.abc import Iterable

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
    answered : iterable of (array, array), optional
        The totals of the requests answered before (read back from the party's state).
    """

    def __init__(
        self, max_requests: int, answered: Iterable[tuple[NDArray[np.float64], NDArray[np.float64]]] = ()
    ) -> None:
        self.max_requests = max_requests
        self._answered: list[tuple[NDArray[np.float64], NDArray[np.float64]]] = list(answered)

    @property
    def answered(self) -> list[tuple[NDArray[np.float64], NDArray[np.float64]]]:
        """The per-arm totals of every admitted request, oldest first (a copy)."""
        return list(self._answered)

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
            if earlier:
                isolated = isolated_subjects(np.column_stack([*earlier, new]), min_weight_ratio)
                if isolated.size:
                    raise PolicyError(
                        f"{who} refuses {operation!r}: with the {len(earlier)} requests it answered, this one "
                        f"isolates subject {int(isolated[0])} of arm {arm} (a combination of the replies would "
                        f"describe 1 subject, below its min_subjects of {min_subjects})",
                        "send the same weights as before, or ask the party for dp_weighted_moments",
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


def isolated_subjects(requests: NDArray[np.float64], min_weight_ratio: float) -> NDArray[np.intp]:
    """Subjects whose indicator e_k lies (nearly) in the span of the columns of ``requests`` (rule 3).

    Then some combination sum_i c_i w_i equals e_k up to a residual r with ||r||^2 = 1 - lev_k, lev_k
    the leverage of row k (squared norm of row k of an orthonormal basis of the span), and the same
    combination of the replies returns x_k contaminated by at most ||r|| of the other subjects' rows.
    Refused when every entry of r can fall below ``min_weight_ratio`` (the rule's notion of a
    negligible weight): 1 - lev_k <= max(min_weight_ratio^2, 1e-9). This catches any number of
    requests combined, e.g. R1 = 1, R2 = 1 + e_k + d, R3 = 1 + e_k - d with a decoy d spread over
    many subjects, which rules 1 and 2 pass, and as many independent requests as an arm has subjects.
    The rows no request weighs (the other arm's subjects) are left out of the SVD: removing zero
    rows changes neither the singular values nor the other rows of the basis.
    """
    weighed = np.flatnonzero(requests.any(axis=1))  # a subject no request weighs has leverage 0: never isolated
    u, singular, _ = np.linalg.svd(requests[weighed], full_matrices=False)
    if not singular.size or singular[0] == 0.0:
        return np.empty(0, dtype=np.intp)
    basis = u[:, singular > singular[0] * max(requests.shape) * np.finfo(np.float64).eps]
    leverage = (basis**2).sum(axis=1)
    return weighed[1.0 - leverage <= max(min_weight_ratio**2, _SPAN_TOLERANCE)]


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
    """Least-squares residual of w on the earlier requests, zero below the rounding tolerance (rule 2).

    Rows that neither w nor an earlier request weighs add nothing to the fit and leave a zero
    residual: the fit runs on the others, with the cutoff of the whole matrix (numpy's default).
    """
    weighed = np.flatnonzero(earlier.any(axis=1) | (new != 0))
    cutoff = np.finfo(np.float64).eps * max(earlier.shape)
    coefficients = np.linalg.lstsq(earlier[weighed], new[weighed], rcond=cutoff)[0]
    residual = new - earlier @ coefficients
    if np.abs(residual).max() <= _SPAN_TOLERANCE * max(float(np.abs(new).max()), 1e-300):
        return np.zeros_like(residual)
    return residual
