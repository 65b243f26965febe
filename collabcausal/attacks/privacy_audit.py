"""Empirical privacy audits of a party's DP operations, through :meth:`Party.handle`.

An audit builds two neighbouring datasets (worst cases for the operation's sensitivity), loads
each into a :class:`~collabcausal.party.Party` with its own ledger (so policy checks, clipping,
charging and the OpenDP noise are the ones a deployment runs), asks each the same request many
times and runs a distinguishing attack on the replies:

1. the release vector of a reply is a fixed list of its arrays and numeric fields;
2. the first half of the releases (calibration) gives, per coordinate, the median under each
   dataset (``a``, ``b``) and a Laplace scale (median absolute deviation / ln 2), hence the
   Laplace log-likelihood-ratio statistic ``T(x) = sum_i (|x_i - a_i| - |x_i - b_i|) / s_i``;
   the calibration half also chooses, among ``T`` and each coordinate alone, the statistic and the
   event ``{S >= c}`` or ``{S <= c}`` (threshold ``c`` among 100 quantiles) with the largest lower
   bound, and the dataset it favours;
3. on the second half (independent of the choice), the event's frequencies ``k1/N`` and ``k2/N``
   give ``eps_hat = ln(k1/k2)`` and a Clopper-Pearson lower bound
   ``ln(lower(k1) / upper(k2))``, each one-sided bound at level ``(1 - confidence)/2``.

If the operation is epsilon-DP for the relation the neighbours come from, the lower bound exceeds
epsilon with probability at most ``1 - confidence`` (the two bounds hold together with at least
that probability, and then ``lower(k1)/upper(k2) <= P1/P2 <= e^eps``). An audit can only show a
lower bound on the true epsilon: a bound far below the claim does not prove the claim.

Two relations are audited (docs/differential-privacy.md): :data:`~collabcausal.ledger.SUBSTITUTION`
(the project's relation; the claim must hold) and :data:`~collabcausal.ledger.ADD_REMOVE`
(one record removed, so n changes; no claim is made and a large figure is expected where a reply
carries n-dependent values).
"""

from __future__ import annotations

import math
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray
from scipy.stats import beta

from collabcausal.anchor_key import simulation_anchor_key
from collabcausal.estimators.dp.aggregates import OUTCOME
from collabcausal.estimators.dp.partitions import CentersPartition, regular_cut
from collabcausal.ledger import ADD_REMOVE, SUBSTITUTION, PrivacyLedger
from collabcausal.messages import Message
from collabcausal.party import Party, PartyTable

RELATIONS = (SUBSTITUTION, ADD_REMOVE)
_N_THRESHOLDS = 100


@dataclass(frozen=True)
class AuditCase:
    """One party operation, one request and its worst-case neighbouring datasets.

    Attributes
    ----------
    name : str
        What is audited, e.g. ``"dp_sum"`` or ``"eps-ADUM histogram"``.
    request : Message
        The request sent to both parties (its ``epsilon`` is the claim).
    covariates : tuple of str
    treatment, outcome : str or None
        How the frames load into a :class:`PartyTable`.
    fields : tuple of str
        Arrays or numeric params of the reply that form the release vector.
    neighbours : mapping
        ``relation -> (first frame, second frame)``.
    """

    name: str
    request: Message
    covariates: tuple[str, ...]
    fields: tuple[str, ...]
    neighbours: Mapping[str, tuple[pd.DataFrame, pd.DataFrame]]
    treatment: str | None = None
    outcome: str | None = None

    @property
    def claimed_epsilon(self) -> float:
        """The epsilon the request is charged (and claims)."""
        return float(self.request.params["epsilon"])


@dataclass(frozen=True)
class AuditResult:
    """The outcome of one audit.

    Attributes
    ----------
    name, relation : str
    claimed_epsilon : float
    epsilon_hat : float
        ``ln(k1/k2)`` of the chosen event on the evaluation half (``inf`` when ``k2 = 0``).
    epsilon_lower : float
        Clopper-Pearson lower bound at ``confidence`` (never negative).
    n_releases : int
        Releases per dataset (half calibrate, half evaluate).
    confidence : float
    """

    name: str
    relation: str
    claimed_epsilon: float
    epsilon_hat: float
    epsilon_lower: float
    n_releases: int
    confidence: float
    counts: tuple[int, int] = field(default=(0, 0))


@lru_cache(maxsize=65536)
def clopper_pearson(k: int, n: int, alpha: float) -> tuple[float, float]:
    """One-sided Clopper-Pearson bounds ``(lower, upper)`` of a binomial p, each at level ``alpha``.

    Cached: the attack's threshold search asks for the same counts many times.
    """
    lower = 0.0 if k == 0 else float(beta.ppf(alpha, k, n - k + 1))
    upper = 1.0 if k == n else float(beta.ppf(1.0 - alpha, k + 1, n - k))
    return lower, upper


def epsilon_lower_bound(k1: int, k2: int, n: int, confidence: float) -> float:
    """``max(0, ln(lower(k1/n) / upper(k2/n)))``, both bounds at ``(1 - confidence)/2``."""
    alpha = (1.0 - confidence) / 2.0
    lower, _ = clopper_pearson(k1, n, alpha)
    _, upper = clopper_pearson(k2, n, alpha)
    return max(0.0, math.log(lower / upper)) if lower > 0.0 else 0.0


def distinguish(
    first: NDArray[np.float64], second: NDArray[np.float64], confidence: float
) -> tuple[float, float, int, int]:
    """The attack of the module docstring on two (releases x coordinates) samples.

    Returns ``(eps_hat, eps_lower, k1, k2)`` on the evaluation halves.
    """
    half = min(first.shape[0], second.shape[0]) // 2
    cal_a, cal_b, test_a, test_b = first[:half], second[:half], first[half : 2 * half], second[half : 2 * half]
    a, b = np.median(cal_a, axis=0), np.median(cal_b, axis=0)
    pooled = np.vstack([cal_a - a, cal_b - b])
    scale = np.median(np.abs(pooled), axis=0) / math.log(2.0)
    weight = np.where(scale > 0.0, 1.0 / np.where(scale > 0.0, scale, 1.0), 1e6)

    def statistic(x: NDArray[np.float64]) -> NDArray[np.float64]:
        return ((np.abs(x - a) - np.abs(x - b)) * weight).sum(axis=1)

    # Candidate statistics: T, and each coordinate itself (equal medians leave T blind).
    statistics: list[Callable[[NDArray[np.float64]], NDArray[np.float64]]] = [statistic]
    statistics += [lambda x, j=j: x[:, j] for j in range(first.shape[1])]
    best = (-1.0, statistic, 0.0, True, True)
    for stat in statistics:
        t_cal_a, t_cal_b = stat(cal_a), stat(cal_b)
        pooled_t = np.concatenate([t_cal_a, t_cal_b])
        for c in np.unique(np.quantile(pooled_t, np.linspace(0.005, 0.995, _N_THRESHOLDS))):
            for upper_tail in (True, False):
                k_a, k_b = _event_counts(t_cal_a, t_cal_b, c, upper_tail)
                # Orient the event towards the dataset where it is more frequent.
                num, den = (k_b, k_a) if k_b >= k_a else (k_a, k_b)
                score = epsilon_lower_bound(num, den, half, confidence)
                if score > best[0]:
                    best = (score, stat, c, upper_tail, k_b >= k_a)
    _, stat, c, upper_tail, towards_second = best
    k_a, k_b = _event_counts(stat(test_a), stat(test_b), c, upper_tail)
    k1, k2 = (k_b, k_a) if towards_second else (k_a, k_b)
    eps_hat = math.inf if k2 == 0 and k1 > 0 else (math.log(k1 / k2) if k1 > 0 else 0.0)
    return eps_hat, epsilon_lower_bound(k1, k2, half, confidence), k1, k2


def _event_counts(t_a: NDArray[np.float64], t_b: NDArray[np.float64], c: float, upper_tail: bool) -> tuple[int, int]:
    if upper_tail:
        return int((t_a >= c).sum()), int((t_b >= c).sum())
    return int((t_a <= c).sum()), int((t_b <= c).sum())


def release_vector(reply: Message, fields: Sequence[str]) -> NDArray[np.float64]:
    """The numbers of ``fields`` (arrays raveled, numeric params) of one reply, concatenated."""
    parts = [
        np.ravel(reply.arrays[name]) if name in reply.arrays else np.array([float(reply.params[name])])
        for name in fields
    ]
    return np.concatenate(parts).astype(np.float64)


def audit(case: AuditCase, relation: str, n_releases: int, *, confidence: float = 1.0 - 1e-6) -> AuditResult:
    """Run ``n_releases`` requests on each neighbour of ``relation`` through ``Party.handle``; attack."""
    first, second = case.neighbours[relation]
    samples = []
    with tempfile.TemporaryDirectory(dir=fast_directory()) as folder:
        for i, frame in enumerate((first, second)):
            party = _party(case, frame, Path(folder) / f"ledger-{i}.sqlite", n_releases)
            replies = [release_vector(party.handle(case.request), case.fields) for _ in range(n_releases)]
            samples.append(np.stack(replies))
    eps_hat, eps_lower, k1, k2 = distinguish(samples[0], samples[1], confidence)
    return AuditResult(case.name, relation, case.claimed_epsilon, eps_hat, eps_lower, n_releases, confidence, (k1, k2))


def _party(case: AuditCase, frame: pd.DataFrame, ledger: Path, n_releases: int) -> Party:
    table = PartyTable.from_frame(
        frame, list(case.covariates), treatment=case.treatment, outcome=case.outcome, min_subjects=1
    )
    delta = float(case.request.params.get("delta", 0.0))
    epsilon = case.claimed_epsilon * n_releases * 2.0
    budget = PrivacyLedger(ledger, epsilon=epsilon, delta=min(0.5, delta * n_releases * 2.0), dataset="audit")
    return Party("audited", table, ledger=budget, anchor_key=simulation_anchor_key(0))


def fast_directory() -> str | None:
    """A RAM-backed folder for the audit's ledgers when there is one (each charge is fsynced)."""
    shm = Path("/dev/shm")
    return str(shm) if shm.is_dir() else None


def _pair(frame: pd.DataFrame, **changes: Any) -> Mapping[str, tuple[pd.DataFrame, pd.DataFrame]]:
    """Neighbours of ``frame``: its row 0 substituted by ``changes``, and row 0 removed."""
    substituted = frame.copy()
    for column, value in changes.items():
        substituted.loc[0, column] = value
    return {SUBSTITUTION: (frame, substituted), ADD_REMOVE: (frame, frame.drop(index=0).reset_index(drop=True))}


def _request(operation: str, epsilon: float, **params: Any) -> Message:
    return Message(operation, {"epsilon": epsilon, "study": "audit", **params})


def party_cases(epsilon: float = 1.0) -> list[AuditCase]:
    """The worst-case neighbours of every DP operation a party offers (module docstring).

    Each substitution moves row 0 to the opposite end of every declared bound, and from one cell
    and arm to another where there are cells and arms, so the change equals the sensitivity. For
    the median, row 0 jumps from below to above a cluster holding the other rows, which moves the
    rank of every candidate between them. Each removal drops row 0, except for the releases whose
    size is n (``dp_representation``: one row per subject; ``dp_weighted_moments``: one weight per
    row in the request), audited under substitution only. ``dp_weighted_moments`` gets a hostile
    analyst's weights: 1 on row 0 and 0.01 on the others.
    """
    n = 10
    a = np.linspace(-4.0, 4.0, n)
    a[0] = -5.0
    t = np.array([0, 0, 0, 0, 0, 1, 1, 1, 1, 1])
    y = np.linspace(-0.5, 0.5, n)
    y[0] = -1.0
    base = pd.DataFrame({"a": a, "t": t, "y": y})
    labels = {"treatment": "t", "outcome": "y"}
    moved = _pair(base, a=5.0, t=1, y=1.0)
    cluster = pd.DataFrame({"a": np.r_[-4.0, np.linspace(3.9, 4.0, n - 1)], "t": t, "y": y})
    rng = np.random.default_rng(2026)
    pairs = pd.DataFrame({"x": rng.uniform(-3, 3, 40), "z": rng.uniform(-1.5, 1.5, 40)})
    # dp_discover_vote (two groups of 20): x is 0 but on one row, so a group abstains unless an x = 1 row
    # is in its training half (its training x is constant otherwise); the substituted row adds another.
    votes = pd.DataFrame({"x": np.r_[np.zeros(39), 1.0], "z": np.linspace(-1.0, 1.0, 40)})
    # dp_discover release = "margin": 39 rows at (or, one of them, next to) one corner, so a test split without row 0
    # scores about 0 both ways; in the test split row 0 at (3, 1.5) is far in x and in x -> z's residual only (HSIC
    # norm about 2 (m-1)/m^2 that way), at (-3, -1.5) far in z and in z -> x's residual only: the margin moves by
    # about 4 (m-1)/m^2 (docs/causal-discovery.md). The one row next to the corner keeps both columns non-constant.
    corner = pd.DataFrame({"x": np.r_[3.0, np.full(38, -3.0), -2.9], "z": np.r_[np.full(39, 1.5), 1.4]})
    sums_a = [{"column": "a", "bounds": [-5.0, 5.0]}]
    sums_y = [{"column": OUTCOME, "bounds": [-1.0, 1.0]}]
    centers = CentersPartition(["a"], [[-2.5], [2.5]]).to_spec()
    return [
        AuditCase("dp_count by arm", _request("dp_count", epsilon, by_arm=True, columns=[]), ("a",), ("counts",),
                  moved, **labels),
        AuditCase("dp_sum", _request("dp_sum", epsilon, sums=sums_a, columns=["a"]), ("a",), ("sums",), moved,
                  **labels),
        AuditCase("dp_mean", _request("dp_mean", epsilon, sums=sums_a, columns=["a"]), ("a",), ("count", "sums"),
                  moved, **labels),
        AuditCase(
            "eps-ADUM counts",
            _request("dp_histogram", epsilon, partition=regular_cut("a", (-5, 5), 2).to_spec(), by_arm=True,
                     columns=["a"]),
            ("a",), ("counts",), moved, **labels,
        ),
        AuditCase(
            "eps-ADUM histogram",
            _request("dp_histogram", epsilon, partition=regular_cut("a", (-5, 5), 2).to_spec(), by_arm=True,
                     sums=sums_y, columns=["a"]),
            ("a",), ("counts", "sums"), moved, **labels,
        ),
        AuditCase(
            "DP k-means step",
            _request("dp_histogram", epsilon, partition=centers, sums=sums_a, columns=["a"]),
            ("a",), ("counts", "sums"), moved, **labels,
        ),
        AuditCase(
            "dp_range median",
            _request("dp_range", epsilon, columns=["a"], bounds=[[-5.0, 5.0]], quantiles=[0.5]),
            ("a",), ("ranges",), _pair(cluster, a=5.0), **labels,
        ),
        AuditCase(
            "dp_representation",
            _request("dp_representation", epsilon, delta=1e-5, n_components=2, n_anchors=10, labels=True,
                     anchor_ranges={"a": [-5.0, 5.0], "b": [-5.0, 5.0]}, outcome_range=[-1.0, 1.0]),
            ("a", "b"), ("x_tilde", "t_noisy", "y_noisy"),
            {SUBSTITUTION: _pair(base.assign(b=base["a"]), a=5.0, b=5.0, t=1, y=1.0)[SUBSTITUTION]}, **labels,
        ),
        AuditCase(
            "dp_weighted_moments",
            Message("dp_weighted_moments",
                    {"epsilon": epsilon, "delta": 1e-5, "study": "audit", "columns": ["a"], "bounds": [[-5.0, 5.0]]},
                    {"arms": t.astype(np.int8), "weights": np.r_[1.0, np.full(n - 1, 0.01)]}),
            ("a",), ("sum_wx", "sum_wx2"), {SUBSTITUTION: moved[SUBSTITUTION]},
        ),
        AuditCase(
            "dp_discover hsic",
            _request("dp_discover", epsilon, columns=["x", "z"], x_bounds=[-3, 3], y_bounds=[-1.5, 1.5],
                     regularization=1.0),
            ("x", "z"), ("score_xy", "score_yx", "n_train"), _pair(pairs, x=3.0, z=-1.5),
        ),
        AuditCase(
            "dp_discover margin",
            _request("dp_discover", epsilon, columns=["x", "z"], x_bounds=[-3, 3], y_bounds=[-1.5, 1.5],
                     regularization=1.0, release="margin"),
            ("x", "z"), ("margin", "n_train"), _pair(corner, x=-3.0, z=-1.5),
        ),
        AuditCase(
            "dp_discover_vote",
            _request("dp_discover_vote", epsilon, columns=["x", "z"], group_size=20, rule="krr"),
            ("x", "z"), ("votes", "n_groups"), {SUBSTITUTION: _pair(votes, x=1.0)[SUBSTITUTION]},
        ),
    ]


def run_audits(
    n_releases: int,
    relations: Sequence[str] = RELATIONS,
    *,
    cases: Sequence[AuditCase] | None = None,
    confidence: float = 1.0 - 1e-6,
    progress: Callable[[AuditResult], None] | None = None,
) -> list[AuditResult]:
    """Audit every case under every relation; ``progress`` sees each result as it comes."""
    results = []
    for case in party_cases() if cases is None else cases:
        for relation in (r for r in relations if r in case.neighbours):
            result = audit(case, relation, n_releases, confidence=confidence)
            results.append(result)
            if progress is not None:
                progress(result)
    return results
