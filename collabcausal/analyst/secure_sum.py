"""The coordinator's side of secure aggregation: relay keys, collect masked uploads, learn the sum.

One release over a roster of parties (docs/secure-aggregation.md):

1. ask every party for a signed round key (``secagg_keys``; no charge);
2. send each party the release request with the round's advertisements; each verifies them,
   charges its ledger, adds its noise share and masks its values;
3. sum the uploads modulo 2^64 (the masks cancel) and decode.

A party that does not answer fails the round: the uploads of the others stay masked (nothing is
unmasked) and the round restarts under a new id, with fresh keys, among the parties left. Every
attempt that reached stage 2 is a new release, charged again by the parties that answered it; the
report counts the attempts. A party that *refuses* (policy, budget, bad input) fails the study
with its one-line error, as in a plain round.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from collabcausal.analyst.grid import Grid
from collabcausal.errors import StudyFailedError
from collabcausal.messages import Message
from collabcausal.secagg import KEYS_OPERATION, SCALE_BITS, RoundFailed, aggregate, decode, share_calibration

MAX_ATTEMPTS = 3


@dataclass(frozen=True)
class SecureSum:
    """The decoded sum of one release over ``parties`` and the noise it carries."""

    parties: list[str]
    total: NDArray[np.float64]
    noise_sd: float
    sigma_share: float
    attempts: int
    unpinned: list[str]
    """Parties that stated ``peers = "any"``: for them the sum is private only if this coordinator is honest."""


def secure_sum(
    grid: Grid,
    operation: str,
    parties: list[str],
    params: Callable[[str], dict[str, Any]],
    sensitivity: float,
    rho: float,
    *,
    length: int,
    value_bound: float,
    study: str,
    timeout: float | None = None,
    arrays: Callable[[str], dict[str, NDArray[Any]]] | None = None,
    max_attempts: int = MAX_ATTEMPTS,
) -> SecureSum:
    """Run one secure-aggregation release of ``operation``; restart without parties that drop out.

    Parameters
    ----------
    grid : Grid
    operation : str
        The party operation whose reply is masked (its name is the round's mask label).
    parties : list of str
        The roster; at least two.
    params : callable
        ``params(party)`` -> the request's params for that party (``secagg`` is added here).
    sensitivity, rho : float
        The release's L2 sensitivity and zCDP target, as each party computes them from the request.
    length : int
        Length of the released vector.
    value_bound : float
        Public bound on |entry| of one party's vector (the largest party's ``n``).
    study : str
    timeout : float, optional
    arrays : callable, optional
        ``arrays(party)`` -> the request's arrays for that party (none by default).
    max_attempts : int
        Rounds tried before the study fails; 1 for a release whose parties can answer once (a vertical
        round's key owner opens once).

    Returns
    -------
    SecureSum

    Raises
    ------
    StudyFailedError
        Fewer than two parties left, :data:`MAX_ATTEMPTS` rounds failed, or a party stated a noise
        share other than the one the request implies.
    """
    roster = list(parties)
    for attempt in range(1, max_attempts + 1):
        if len(roster) < 2:
            raise StudyFailedError(
                f"secure aggregation of {operation} needs two or more parties, {len(roster)} left",
                "restart the study when the parties are back, or set secure_aggregation = false",
            )
        round_id = f"{study}/{operation}/{attempt}/{uuid.uuid4().hex[:12]}"  # never reused by a party
        sigma = share_calibration(sensitivity, rho, n_parties=len(roster), length=length,
                                  value_bound=value_bound)
        asks = {p: Message(KEYS_OPERATION, {"study": study, "round": round_id}) for p in roster}
        keys, lost = grid.send_each(asks, timeout=timeout)
        if lost:
            roster = [p for p in roster if p not in lost]
            continue
        advertisements = [keys[p].params["advertisement"] for p in roster]
        requests = {p: Message(operation, params(p) | {"secagg": {"round": round_id,
                                                                   "advertisements": advertisements}},
                               {} if arrays is None else arrays(p))
                    for p in roster}
        uploads, lost = grid.send_each(requests, timeout=timeout)
        try:
            total = aggregate({p: _masked(p, operation, uploads[p], sigma, length) for p in uploads}, roster)
        except RoundFailed:
            roster = [p for p in roster if p not in lost]
            continue
        noise_sd = sigma * math.sqrt(len(roster)) / 2.0**SCALE_BITS
        unpinned = sorted(p for p in roster if uploads[p].params.get("pinned") is not True)
        return SecureSum(roster, decode(total, SCALE_BITS), noise_sd, sigma / 2.0**SCALE_BITS, attempt, unpinned)
    raise StudyFailedError(
        f"secure aggregation of {operation} failed {max_attempts} time(s) (parties dropped out)",
        "check the parties' connections and restart the study",
    )


def _masked(party: str, operation: str, reply: Message, sigma: float, length: int) -> NDArray[np.uint64]:
    stated = reply.params.get("sigma_share")
    if isinstance(stated, bool) or not isinstance(stated, (int, float)) or not math.isclose(stated, sigma,
                                                                                            rel_tol=1e-9):
        raise StudyFailedError(
            f"party {party!r} stated noise share sd {stated!r} for {operation}, but the round implies {sigma:.6g}",
            "check that party's software version",
        )
    masked = np.asarray(reply.arrays.get("masked"))
    if masked.dtype != np.uint64 or masked.shape != (length,):
        raise StudyFailedError(
            f"party {party!r} sent a masked {operation} of dtype {masked.dtype} and shape {masked.shape}, "
            f"not uint64 ({length},)",
            "check that party's software version",
        )
    return masked
