"""Every row protected at small epsilon: subsample-and-aggregate of the ANM's decision.

Paper 002 protects the training rows through the stability of kernel ridge regression (Theorem 5:
a test residual moves by at most ``8/(n lam^{3/2})``), which at a useful ``lam`` swamps the scores
(docs/causal-discovery.md: eps ~ 100 at n = 400). Here the training rows are protected by
subsample-and-aggregate instead (Nissim, Raskhodnikova and Smith, "Smooth sensitivity and sampling
in private data analysis", STOC 2007, section 4; Smith, "Privacy-preserving statistical estimation
with optimal convergence rates", STOC 2011):

1. a uniform random permutation of the n positions, drawn independently of the values, cuts the
   rows into ``k = floor(n / group_size)`` disjoint groups (the ``n - k * group_size`` rows left
   over are not used); ``group_size`` is the request's, or with ``"auto"`` the public function
   :func:`auto_group_size` of n and eps;
2. in each group the full non-private ANM decides (its own split, regression and tuning: anything,
   since the group's output is one bounded vote): ``v_g = 1`` for ``x->y``, ``0`` for ``y->x``,
   ``1/2`` when the group's fit fails (e.g. a constant column), so ``v_g`` is in ``[0, 1]``;
3. the release is ``V~ = sum_g v_g + Lap(1/eps)``; the direction is ``x->y`` when ``V~ > k/2``.

**Claim.** The release is eps-DP under substitution of one row with n public.
*Proof.* Fix the permutation (independent of the data, so the guarantee conditional on it carries
over to the mixture). A substituted row is in at most one group, so at most one ``v_g`` changes, by
at most 1: ``|V - V'| <= 1``, and the Laplace mechanism with scale ``1/eps`` is eps-DP (Dwork,
McSherry, Nissim and Smith 2006). ``k``, ``group_size`` and the noise scale are functions of n and
the request (``"auto"``: of n and eps, never of the values). Everything after (direction,
probability) is post-processing. ∎

**How many groups** (``group_size="auto"``). Fewer, larger groups make each vote more accurate; more
groups make the count robust to the noise. A unanimous count of ``k`` votes lies ``k/2`` from the
threshold, and ``Lap(1/eps)`` crosses it with probability ``exp(-eps k/2)/2``; that is at most
``flip`` exactly when ``k >= 2 ln(1/(2 flip))/eps``. :func:`auto_group_size` takes the fewest such
groups (for ``flip = 0.01``, ``k = ceil(7.82/eps)``: 8 at eps = 1, 2 at eps = 5, one at eps >= 7.82, the
whole data set's ANM decision under ``Lap(1/eps)``), and never groups smaller than :data:`GROUP_SIZE` on
its account. ``flip = 0.01`` was chosen from {0.01, 0.05, 0.1, 0.2} on held-out pair seed 1
(docs/causal-discovery.md), not on the reported seed 0.

**Probability of being right given the noise** (flat prior on the exact count ``V``): the favoured
side agrees with the exact majority when the noise does not cross it,
``P = P(L < |V~ - k/2|) = 1 - exp(-eps |V~ - k/2|) / 2``. It counts the DP noise only, as
:mod:`~collabcausal.estimators.discovery.decision` does for the score releases.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from collabcausal.errors import InputError
from collabcausal.estimators.discovery.agreement import margin_agreement
from collabcausal.estimators.discovery.anm import MIN_TEST_POINTS, X_TO_Y, Y_TO_X, AdditiveNoiseModel
from collabcausal.estimators.dp.mechanisms import laplace, laplace_scale
from collabcausal.randomness import SeedLike, as_generator

GROUP_SIZE = 100
"""Rows per group of :func:`group_votes` when none is given; :func:`auto_group_size` makes none smaller (n >= 100)."""
VOTE_MODEL: dict[str, Any] = {"regression": "gp", "hsic_widths": "median"}
"""Each group's ANM by default: the reference ANM-HSIC (GP regression, median-heuristic HSIC)."""
ABSTAIN = 0.5
UNANIMOUS_FLIP = 0.01
"""``flip`` of :func:`auto_group_size`: the largest chance that the noise reverses a unanimous vote."""
AUTO = "auto"


@dataclass(frozen=True)
class VoteRelease:
    """One subsample-and-aggregate release.

    Attributes
    ----------
    votes : float
        ``V~``: the noisy number of groups voting ``x->y``.
    n_groups : int
        ``k``.
    epsilon, noise_scale : float
        The budget and the Laplace scale ``1/eps``.
    direction : str
        The favoured direction, ``x->y`` when ``V~ > k/2``.
    probability : float
        ``P(favoured = exact majority)`` given the noise (module docstring).
    """

    votes: float
    n_groups: int
    epsilon: float
    noise_scale: float
    direction: str
    probability: float


def n_groups(n: int, group_size: int = GROUP_SIZE) -> int:
    """``floor(n / group_size)``; refuses sizes whose groups could not hold an ANM (public facts only)."""
    if group_size < 2 * MIN_TEST_POINTS:
        raise InputError(f"group_size {group_size} is below {2 * MIN_TEST_POINTS}", "use group_size >= 20, e.g. 100")
    if n < group_size:
        raise InputError(f"{n} rows make no group of {group_size}", "use more rows or a smaller group_size")
    return n // group_size


def auto_group_size(n: int, epsilon: float, *, flip: float = UNANIMOUS_FLIP) -> int:
    """Rows per group for ``n`` rows at ``epsilon``: ``n // k`` for the fewest groups ``k`` that ``Lap(1/eps)``
    reverses when unanimous with probability at most ``flip`` (module docstring, "How many groups").

    ``k = max(1, min(ceil(2 ln(1/(2 flip)) / eps), n // GROUP_SIZE))``: a public function of n and the
    request, so the release's proof is unchanged (Nissim, Raskhodnikova and Smith 2007, section 4).

    Parameters
    ----------
    n : int
        The party's number of rows (public).
    epsilon : float
        The request's budget, finite and > 0.
    flip : float
        In ``(0, 1/2)``; :data:`UNANIMOUS_FLIP` by default.

    Returns
    -------
    int
        ``n // k`` rows per group.

    Raises
    ------
    InputError
        For a non-finite or non-positive ``epsilon`` or ``flip`` outside ``(0, 1/2)``.
    """
    if not (0.0 < epsilon < math.inf and 0.0 < flip < 0.5):
        raise InputError(f"epsilon {epsilon!r} and flip {flip!r} must be finite, > 0 (flip < 1/2)", "send epsilon=1")
    k = max(1, min(math.ceil(2.0 * math.log(1.0 / (2.0 * flip)) / epsilon), n // GROUP_SIZE))
    return max(n // k, 1)


def resolve_group_size(group_size: int | str, n: int, epsilon: float) -> int:
    """The rows per group a request means: ``group_size`` itself, or :func:`auto_group_size` for ``"auto"``.

    Refuses anything else (a bool, a float, another string) and sizes :func:`n_groups` refuses, from public
    facts only (n and the request), so a party can refuse before charging and an analyst check a reply.

    Parameters
    ----------
    group_size : int or "auto"
        The request's ``group_size``.
    n : int
        The party's number of rows (public).
    epsilon : float
        The request's budget (used by ``"auto"`` only).

    Returns
    -------
    int
        Rows per group.

    Raises
    ------
    InputError
        For a malformed ``group_size`` or one that makes no group of at least 20 rows.
    """
    if group_size == AUTO:
        group_size = auto_group_size(n, epsilon)
    if isinstance(group_size, bool) or not isinstance(group_size, int):
        raise InputError(f"group_size must be an integer or {AUTO!r}, got {group_size!r}", "send e.g. 'auto' or 100")
    n_groups(n, group_size)
    return group_size


def group_votes(
    x: NDArray[np.float64], y: NDArray[np.float64], *, group_size: int = GROUP_SIZE,
    model: Mapping[str, Any] | None = None, score: str = "hsic", random_state: SeedLike = None,
) -> NDArray[np.float64]:
    """The exact votes ``v_g`` (step 2 of the module docstring) of the groups of a fresh permutation."""
    rng = as_generator(random_state)
    k = n_groups(x.size, group_size)
    order = rng.permutation(x.size)[: k * group_size].reshape(k, group_size)
    params = VOTE_MODEL if model is None else model  # {} (the fixed public defaults) is a model, not "none given"
    votes = np.empty(k)
    for g, rows in enumerate(order):
        try:
            fitted = AdditiveNoiseModel(random_state=rng, **params).fit(x[rows], y[rows])
            votes[g] = float(fitted.scores(score).direction == X_TO_Y)
        except (InputError, np.linalg.LinAlgError, ValueError):
            votes[g] = ABSTAIN
    return votes


def vote_probability(votes: float, k: int, epsilon: float) -> float:
    """``1 - exp(-eps |V~ - k/2|) / 2``: P(the favoured side is the exact majority's) under ``Lap(1/eps)``."""
    return float(margin_agreement(votes - k / 2.0, 1.0 / epsilon))


def release_votes(votes: NDArray[np.float64], epsilon: float, *, rng: np.random.Generator | None = None) -> VoteRelease:
    """``V~ = sum v_g + Lap(1/eps)`` (OpenDP's sampler unless ``rng``) and its post-processing."""
    if votes.size == 0 or np.any((votes < 0.0) | (votes > 1.0)):
        raise InputError("votes must be a non-empty array of values in [0, 1]", "pass group_votes(...)")
    noisy = float(laplace(np.array([votes.sum()]), 1.0, epsilon, rng=rng)[0])
    k = int(votes.size)
    return VoteRelease(noisy, k, float(epsilon), laplace_scale(1.0, epsilon), X_TO_Y if noisy > k / 2.0 else Y_TO_X,
                       vote_probability(noisy, k, epsilon))


def vote_accuracy(votes: NDArray[np.float64], truth: str, epsilon: float) -> float:
    """Exact probability over the Laplace noise that the release names ``truth`` (no sampling)."""
    d = float(votes.sum()) - votes.size / 2.0
    if truth == Y_TO_X:
        d = -d
    if math.isinf(epsilon):
        return float(d > 0) + 0.5 * float(d == 0)
    return 1.0 - 0.5 * math.exp(-epsilon * d) if d >= 0 else 0.5 * math.exp(epsilon * d)
