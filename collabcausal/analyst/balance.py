"""Analyst side of federated balance diagnostics (paper 003, eqs. 42-45).

The analyst sends each party the arms and balance weights of its row group's subjects, adds the
returned sufficient statistics over row groups, and turns them into standardized mean
differences, so SMD and MASMD are exact without raw covariates reaching the analyst
(:func:`federated_smd`). With a :class:`DPBalance` the parties release the moments with Gaussian
noise charged to their ledgers (``dp_weighted_moments``, :mod:`collabcausal.party.dp_balance`) and
the result states the noise's effect on each SMD. A study selects it with ``[balance]`` in
study.toml (:class:`DPBalanceSpec`, built into a :class:`DPBalance` from the parties' ``describe``
replies and the public ``[anchor_ranges]`` by :meth:`DPBalanceSpec.for_parties`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from collabcausal.analyst.grid import Grid
from collabcausal.analyst.replies import check_moments, weight_sums
from collabcausal.errors import InputError, StudyFailedError
from collabcausal.estimators.balance import ArmMoments, smd_from_moments, smd_noise_sd
from collabcausal.estimators.dp.mechanisms import analytic_gaussian_sigma
from collabcausal.estimators.validation import check_delta, check_epsilon
from collabcausal.messages import Message


@dataclass(frozen=True)
class DPBalance:
    """The analyst's choice of differentially private balance moments (``dp_weighted_moments``).

    Attributes
    ----------
    epsilon, delta : float
        Charged to each party's ledger per request (0 < delta < 1/n).
    bounds : mapping of str to (float, float)
        Public range of every diagnosed covariate (each party clips to it).
    columns : mapping of str to sequence of str
        The covariates of each party, in its column order (its ``describe`` reply).
    """

    epsilon: float
    delta: float
    bounds: Mapping[str, tuple[float, float]]
    columns: Mapping[str, Sequence[str]]

    def params(self, party: str) -> dict[str, Any]:
        """The DP parameters of the request sent to ``party``."""
        names = [str(c) for c in self.columns[party]]
        bounds = [[float(self.bounds[c][0]), float(self.bounds[c][1])] for c in names]
        return {"epsilon": self.epsilon, "delta": self.delta, "columns": names, "bounds": bounds}


@dataclass(frozen=True)
class DPBalanceSpec:
    """A study's choice of DP balance moments (``[balance]`` of study.toml).

    Parameters
    ----------
    epsilon, delta : float
        Charged to each party's ledger per ``dp_weighted_moments`` request (basic composition over
        the study's requests: :meth:`~collabcausal.analyst.dcqe.DCQEPlan.balance_requests`).
    """

    epsilon: float
    delta: float

    def __post_init__(self) -> None:
        check_epsilon(self.epsilon, "[balance] epsilon")
        if check_delta(self.delta, "[balance] delta") <= 0.0:
            raise InputError("DP balance moments need delta > 0 (Gaussian mechanism)", "e.g. delta = 1e-6")

    def for_parties(
        self, described: Mapping[str, Message], anchor_ranges: Mapping[str, Sequence[float]], parties: Iterable[str]
    ) -> DPBalance:
        """The :class:`DPBalance` of ``parties``: their covariates from ``described``, bounds from ``anchor_ranges``.

        Checked before any request, so nothing is charged for a study that cannot run: every
        covariate needs a public range, and ``delta`` must lie below ``1/n`` of every party (the
        party refuses otherwise, :mod:`collabcausal.party.dp_balance`).
        """
        columns: dict[str, list[str]] = {}
        for party in parties:
            params = described[party].params
            columns[party] = [str(c) for c in params["covariates"]]
            missing = [c for c in columns[party] if c not in anchor_ranges]
            if missing:
                raise InputError(
                    f"covariate {missing[0]!r} of party {party!r} has no public range for its DP balance moments",
                    f"add {missing[0]} = [low, high] to [anchor_ranges]",
                )
            n = int(params["n_subjects"])
            if not self.delta < 1.0 / n:
                raise InputError(
                    f"[balance] delta {self.delta:g} is not below 1/n = 1/{n} of party {party!r}",
                    "lower [balance] delta, e.g. 1e-6",
                )
        names = [c for cols in columns.values() for c in cols]
        bounds = {c: (float(anchor_ranges[c][0]), float(anchor_ranges[c][1])) for c in names}
        return DPBalance(self.epsilon, self.delta, bounds, columns)


@dataclass(frozen=True)
class FederatedSMD:
    """The SMD of every diagnosed covariate, and the effect of DP noise on it.

    Attributes
    ----------
    covariates : tuple of str
        ``party:column`` names, in the order of the SMD array (first row group's layout).
    smd : ndarray
        Exact (``weighted_moments``), or post-processed from noisy moments (``dp_weighted_moments``:
        still (epsilon, delta)-DP per party).
    noise_sd : ndarray or None
        With DP moments, the first-order standard deviation of ``smd`` due to the noise alone
        (:func:`~collabcausal.estimators.balance.smd_noise_sd`); None for exact moments.
    """

    covariates: tuple[str, ...]
    smd: NDArray[np.float64]
    noise_sd: NDArray[np.float64] | None = None


def federated_smd(
    grid: Grid,
    parties: Sequence[Sequence[str]],
    rows: Sequence[NDArray[np.int64] | int],
    treatment: NDArray[np.int8],
    weights: NDArray[np.float64],
    *,
    dp: DPBalance | None = None,
    study: str = "study",
    timeout: float | None = None,
) -> FederatedSMD:
    """SMD per covariate of every listed party: :func:`federated_smds` of one sample."""
    return federated_smds(grid, parties, rows, treatment, [weights], dp=dp, study=study, timeout=timeout)[0]


def federated_smds(
    grid: Grid,
    parties: Sequence[Sequence[str]],
    rows: Sequence[NDArray[np.int64] | int],
    treatment: NDArray[np.int8],
    samples: Sequence[NDArray[np.float64]] | NDArray[np.float64],
    *,
    dp: DPBalance | None = None,
    study: str = "study",
    timeout: float | None = None,
) -> list[FederatedSMD]:
    """SMD per covariate of every listed party in each weighted sample, from federated weighted moments.

    Parameters
    ----------
    grid : Grid
    parties : sequence of sequence of str
        Parties per row group whose covariates are diagnosed (same column layout in every group).
    rows : sequence of int arrays or ints
        Subject positions per row group (a bootstrap resample), or the row group's subject count:
        all its subjects in table order, asked for without a ``rows`` array (the party reads its
        table in place instead of gathering a copy of it).
    treatment : ndarray (n,)
        Stacked over row groups in the order of ``rows``.
    samples : sequence of ndarray (n,), or ndarray (k, n)
        The weights of each sample (e.g. PSM's matched sample, IPW's weighted one), stacked over
        row groups like ``treatment`` (a (k, n) array is sent as it is, without a stacked copy).
        Exact moments of all of them are asked for in one round, a (k, rows) ``weights`` array per
        party (each sample counts as one request of the party's differencing history); DP moments
        in one round per sample, each charged.
    dp : DPBalance, optional
        Ask for ``dp_weighted_moments`` (:mod:`collabcausal.party.dp_balance`): each party's sums
        ``sum_wx`` and ``sum_wx2`` carry ``N(0, sigma^2)`` noise (sigma in its reply); the moments
        of the row groups add, and so do their noise variances. The covariates are standardised on
        their public bounds, ``(clip(x) - mid) / half`` (SMD does not change under a positive
        affine map), so the bounds must be the same for every row group.
    """
    if not len(samples):
        return []
    operation = "weighted_moments" if dp is None else "dp_weighted_moments"
    whole = [isinstance(r, (int, np.integer)) for r in rows]
    bounds = np.cumsum([0] + [int(r) if w else len(r) for r, w in zip(rows, whole, strict=True)])

    def ask(batch: Sequence[NDArray[np.float64]] | NDArray[np.float64]) -> list[FederatedSMD]:  # one round
        stacked = len(batch) > 1
        weights = (batch if isinstance(batch, np.ndarray) else np.stack(batch)) if stacked else batch[0]
        messages, sent = {}, {}
        for i, group in enumerate(parties):
            sl = slice(bounds[i], bounds[i + 1])
            arrays = {"arms": treatment[sl], "weights": weights[..., sl]}
            if not whole[i]:
                arrays["rows"] = np.asarray(rows[i], dtype=np.int64)
            sums = weight_sums(arrays["arms"], arrays["weights"])  # what each reply's sum_w, sum_w2 must be
            for party in group:
                params = {"study": study} | ({} if dp is None else dp.params(party))
                messages[party], sent[party] = Message(operation, params, arrays), sums
        replies = grid.send_and_receive(messages, timeout=timeout)
        checked = {p: check_moments(p, replies[p], sent[p]) for g in parties for p in g}
        names = tuple(f"{p}:{c}" for p in parties[0] for c in replies[p].params["covariates"])
        widths = [sum(checked[p].sum_wx.shape[-1] for p in group) for group in parties]
        for group, width in zip(parties[1:], widths[1:], strict=True):
            if width != widths[0]:
                raise StudyFailedError(
                    f"parties {', '.join(group)} sent moments of {width} covariates, the first row group {widths[0]}",
                    "give every row group the same column layout (balance_parties)",
                )
        total = _side_by_side([checked[p] for p in parties[0]])  # every sample at once: a leading axis of them
        for group in parties[1:]:
            total = total + _side_by_side([checked[p] for p in group])
        if dp is not None:  # one sample
            return [_dp_smd(dp, parties, replies, total, weights, bounds, rows, whole, names)]
        smd = smd_from_moments(total)
        return [FederatedSMD(names, s) for s in (smd if stacked else [smd])]

    batches = [[w] for w in samples] if dp is not None else [samples]  # DP: one charged release per sample
    return [smd for batch in batches for smd in ask(batch)]


def _dp_smd(
    dp: DPBalance,
    parties: Sequence[Sequence[str]],
    replies: Mapping[str, Message],
    total: ArmMoments,
    weights: NDArray[np.float64],
    bounds: NDArray[np.int64],
    rows: Sequence[NDArray[np.int64] | int],
    whole: Sequence[bool],
    names: tuple[str, ...],
) -> FederatedSMD:
    """The :class:`FederatedSMD` of one sample's noisy moments, each party's sigma checked against its request's."""
    subjects = [np.arange(bounds[i + 1] - bounds[i]) if whole[i] else rows[i] for i in range(len(rows))]
    variance = sum(
        np.concatenate([
            _noise_variance(p, replies[p], expected_sigma(dp, p, weights[bounds[i] : bounds[i + 1]], subjects[i]))
            for p in group
        ])
        for i, group in enumerate(parties)
    )
    return FederatedSMD(names, smd_from_moments(total, noisy=True), smd_noise_sd(total, np.sqrt(variance)))


def expected_sigma(dp: DPBalance, party: str, weights: NDArray[np.float64], rows: ArrayLike) -> float:
    """The noise sd ``party`` must add to a ``dp_weighted_moments`` request: a function of the request alone.

    The analytic Gaussian sigma (Balle & Wang 2018) for the sensitivity ``2 sqrt(m) max_k W_k``
    (:func:`collabcausal.estimators.dp.calibration.moments_sensitivity`), ``W_k`` the total weight the
    request puts on subject ``k`` (summed over its repeated rows) and ``m`` the party's covariates.
    """
    from collabcausal.estimators.dp.calibration import max_subject_weight, moments_sensitivity

    sensitivity = moments_sensitivity(len(dp.columns[party]), max_subject_weight(rows, weights))
    return analytic_gaussian_sigma(sensitivity, dp.epsilon, dp.delta)


def _noise_variance(party: str, reply: Message, expected: float) -> NDArray[np.float64]:
    """``sigma^2`` per covariate of a ``dp_weighted_moments`` reply, refused unless its sigma is ``expected``.

    A party stating less noise than its release carries would make the diagnosis look more precise
    than it is; the analyst knows the sigma its request implies (:func:`expected_sigma`).
    """
    sigma = reply.params.get("sigma")
    if isinstance(sigma, bool) or not isinstance(sigma, (int, float)) or not 0.0 < sigma < math.inf:
        raise StudyFailedError(
            f"party {party!r} sent a dp_weighted_moments reply without a finite sigma > 0 ({sigma!r})",
            "check that party's software version",
        )
    if not math.isclose(sigma, expected, rel_tol=1e-9):
        raise StudyFailedError(
            f"party {party!r} sent a dp_weighted_moments reply whose sigma {sigma!r} is not the one its request "
            f"implies ({expected!r})",
            "check that party's software version; the study cannot use its reply",
        )
    return np.full(len(reply.params["covariates"]), expected**2)


def _side_by_side(parts: Sequence[ArmMoments]) -> ArmMoments:
    """One row group's parties hold different covariates of the same subjects: join columns.

    The weight sums are the same for every party of the row (same subjects, arms and weights).
    """
    if len(parts) == 1:
        return parts[0]
    first = parts[0]
    return ArmMoments(
        first.sum_w,
        first.sum_w2,
        np.concatenate([p.sum_wx for p in parts], axis=-1),
        np.concatenate([p.sum_wx2 for p in parts], axis=-1),
    )
