"""The analyst's checks of party replies against what it asked for (a party may be hostile).

A reply is used only when every array has exactly the shape and content the request and the
party's public ``describe`` metadata imply; otherwise the study fails with
:class:`~collabcausal.errors.StudyFailedError` naming the party, before any of its numbers enter
an estimate. The checks run in the analyst role, so they apply in process and over gRPC alike.

For ``dc_representation`` (paper 003, Algorithm 2, step 2) of party j in row group i:

* ``x_tilde``: finite, n_i x m~_ij, with n_i the subjects asked for (``rows`` or the described
  count) and 1 <= m~_ij <= the party's described covariate count (a party cannot widen its
  share of the collaborative representation with extra columns);
* ``a_tilde``: finite, r x m~_ij (r anchor rows asked for, same m~_ij);
* label holders: ``treatment`` of n_i values in {0, 1} and a finite ``outcome`` of n_i values;
* a later block of anchor rows (``anchor_rows`` not from row 0) carries ``a_tilde`` only, of the
  party's m~_ij in its first block.

A ``weighted_moments`` reply (paper 003, eqs. 42-44) needs a list of covariate names (m of them)
and finite :class:`~collabcausal.estimators.balance.ArmMoments` arrays: ``sum_w`` and ``sum_w2``
of shape (2,), non-negative, ``sum_wx`` and ``sum_wx2`` of shape (2, m); the reply to k stacked
samples of weights has each of them with a leading axis of k. ``sum_w`` and ``sum_w2`` are the
sums of the weights the analyst sent (and of their squares) per arm, to a relative 1e-9: a reply
to another request, or with its samples swapped, is refused (a party can still misstate
``sum_wx`` and ``sum_wx2``, which only it can compute).

A ``describe`` reply needs an integer ``n_subjects``, a list of covariate names, a boolean
``has_labels`` and an ``anchor_fingerprint`` that is absent, null or
:data:`~collabcausal.anchor_key.FINGERPRINT_HEX` lower-case hex digits.

A ``dp_histogram`` reply (eps-ADUM, paper 001) needs finite ``counts`` of the shape asked for,
(cells, arms), and finite ``sums`` of shape (cells, arms, summed columns): an extra cell or a NaN
would otherwise enter the sum of every party's answers; with the party's described n, every entry
must lie within 40 noise scales of what n subjects can give (a count of 1e12 would make its
cell's uplift the ATE).

A ``dp_discover`` reply (paper 002) needs finite scores within 40 noise scales of the HSIC range (or,
with ``release = "margin"``, that form and a finite margin within 40 noise scales of the margins' range),
the epsilon asked for, the noise scale the request and the party's public n imply, the direction
its scores give, an agreement in [0, 1], and ``m_test`` + ``n_train`` equal to the party's
described subject count with ``m_test`` = round(test_size n): the analyst weighs each party's
scores by ``m_test``, so a party claiming a larger test split, or an impossible score, would
outweigh the others, and one claiming less noise would make the combined direction look more
certain than it is.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from collabcausal.anchor_key import FINGERPRINT_HEX
from collabcausal.errors import ProtocolError, StudyFailedError
from collabcausal.estimators.balance import ArmMoments, arm_weights, block_arm_moments
from collabcausal.messages import Message

_HEX = "0123456789abcdef"

TAIL_SCALES = 40
"""A noisy entry (an HSIC score, a histogram count or sum) farther than this many Laplace scales from
the range its exact value lies in is refused: an honest party's is, with probability exp(-40) ~ 4e-18
per entry."""


def check_representation(
    party: str,
    reply: Message,
    *,
    n_rows: int,
    n_anchors: int,
    n_covariates: int,
    labels: bool,
    columns: int | None = None,
) -> None:
    """Refuse a ``dc_representation`` reply whose arrays differ from what was asked.

    Parameters
    ----------
    party : str
        The replying party (named in the error).
    reply : Message
    n_rows : int
        Subjects asked for (n_i).
    n_anchors : int
        Anchor rows asked for (r, or the rows of the block asked for).
    n_covariates : int
        Covariates the party declared in ``describe``: the most components it may return.
    labels : bool
        Whether treatment and outcome were asked for.
    columns : int, optional
        For a later block of anchor rows: the m~_ij of the party's first block; the reply then
        carries ``a_tilde`` only. None for the first block (``x_tilde`` and the labels too).

    Raises
    ------
    StudyFailedError
        Naming the party, the array and the expected shape.
    """
    first = columns is None
    try:
        expected = {}
        if first:
            x_tilde = reply.array("x_tilde")
            columns = x_tilde.shape[1] if x_tilde.ndim == 2 else -1
            expected["x_tilde"] = (x_tilde, (n_rows, columns))
        expected["a_tilde"] = (reply.array("a_tilde"), (n_anchors, columns))
        if first and labels:
            expected["treatment"] = (reply.array("treatment"), (n_rows,))
            expected["outcome"] = (reply.array("outcome"), (n_rows,))
    except ProtocolError as exc:
        raise _refused(party, exc.problem) from None
    if first and not 1 <= columns <= n_covariates:
        raise _refused(party, f"x_tilde has shape {x_tilde.shape}: 1 to {n_covariates} components expected")
    for name, (array, shape) in expected.items():
        if array.shape != shape or array.dtype.kind not in "biuf":
            raise _refused(party, f"{name} has shape {array.shape} and dtype {array.dtype}, expected {shape} numbers")
        if array.dtype.kind == "f" and not np.isfinite(array).all():  # an integer array is finite
            raise _refused(party, f"{name} holds NaN or infinite values")
    if first and labels and not ((expected["treatment"][0] == 0) | (expected["treatment"][0] == 1)).all():
        raise _refused(party, "treatment holds values other than 0 and 1")


def weight_sums(arms: NDArray, weights: NDArray[np.float64]) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Per sample and arm, the sums of the weights a ``weighted_moments`` request sends and of their squares.

    Shaped as the reply's ``sum_w`` and ``sum_w2``: (2,) for 1-D ``weights``, (k, 2) for k stacked samples.
    """
    stacked = weights if weights.ndim == 2 else weights[None, :]
    # the weight sums of block_arm_moments over no covariates: block by block, no 2k x n temporary
    sums = block_arm_moments(np.empty((arms.shape[0], 0)), lambda r: arm_weights(stacked[:, r], arms[r]), len(stacked))
    sums = sums.by_sample() if weights.ndim == 2 else sums
    return sums.sum_w, sums.sum_w2


def check_moments(party: str, reply: Message, sent: tuple[NDArray[np.float64], NDArray[np.float64]]) -> ArmMoments:
    """The :class:`ArmMoments` of a ``weighted_moments`` reply, refused unless as documented above.

    ``sent`` is :func:`weight_sums` of the request: its shape says whether the reply is one sample
    (unstacked arrays) or k (a leading axis of k, kept in the moments returned:
    :func:`~collabcausal.estimators.balance.smd_from_moments` reads them so).

    Raises
    ------
    StudyFailedError
        Naming the party and the array (the first problem, in the order of the fields).
    """
    covariates = reply.params.get("covariates")
    if not isinstance(covariates, list) or not all(isinstance(c, str) for c in covariates):
        raise _refused(party, "covariates is not a list of names", "weighted_moments")
    lead = sent[0].shape[:-1]
    m = len(covariates)
    shapes = {"sum_w": (*lead, 2), "sum_w2": (*lead, 2), "sum_wx": (*lead, 2, m), "sum_wx2": (*lead, 2, m)}
    arrays = {name: reply.arrays.get(name) for name in shapes}
    shaped = all(_numbers(a, shapes[name]) for name, a in arrays.items())
    # each sum_w, sum_w2 within 1e-9 of the non-negative sum sent: finite and non-negative too
    if not (
        shaped
        and np.isfinite(arrays["sum_wx"]).all()
        and np.isfinite(arrays["sum_wx2"]).all()
        and _unmatched(arrays, sent) is None
    ):
        raise _refused(party, _moments_problem(arrays, shapes, sent, len(lead)), "weighted_moments")
    return ArmMoments(**{name: np.asarray(a, dtype=np.float64) for name, a in arrays.items()})


def _numbers(array: Any, shape: tuple[int, ...]) -> bool:
    """Whether ``array`` is a numeric ndarray of ``shape`` (a list or another object in its place is not)."""
    return isinstance(array, np.ndarray) and array.shape == shape and array.dtype.kind in "iuf"


def _unmatched(arrays: Mapping[str, Any], sent: Sequence[NDArray[np.float64]]) -> str | None:
    """The first of ``sum_w``, ``sum_w2`` not within a relative 1e-9 of the (non-negative) sums sent, or None."""
    for name, asked in zip(("sum_w", "sum_w2"), sent, strict=True):
        if not (np.abs(arrays[name] - asked) <= 1e-9 * asked).all():
            return name
    return None


def _moments_problem(
    arrays: Mapping[str, Any], shapes: Mapping[str, tuple[int, ...]], sent: Sequence[NDArray[np.float64]], lead: int
) -> str:
    """The first problem of a refused ``weighted_moments`` reply (:func:`check_moments`), for its message."""
    for name, shape in shapes.items():
        array = arrays[name]
        if not _numbers(array, shape):
            got = (
                "nothing"
                if array is None
                else f"shape {array.shape} and dtype {array.dtype}"
                if isinstance(array, np.ndarray)
                else f"a {type(array).__name__}, not an array"
            )
            return f"{name} has {got}, expected {shape} numbers"
        if not np.isfinite(array).all() or (array.ndim == lead + 1 and (array < 0).any()):
            return f"{name} holds NaN, infinite or negative sums"
    unmatched = _unmatched(arrays, sent)
    return f"{unmatched} is not the sum of the weights it was sent (samples swapped, or another request's)"


def check_description(party: str, reply: Message) -> None:
    """Refuse a ``describe`` reply without a non-negative integer ``n_subjects``, a list of covariate
    names and a boolean ``has_labels``, or with a malformed ``anchor_fingerprint``.

    Raises
    ------
    StudyFailedError
        Naming the party and the field.
    """
    p = reply.params
    n, covariates = p.get("n_subjects"), p.get("covariates")
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise _refused(party, f"n_subjects is {n!r}, not a count", "describe")
    if not isinstance(covariates, list) or not all(isinstance(c, str) for c in covariates):
        raise _refused(party, "covariates is not a list of names", "describe")
    if not isinstance(p.get("has_labels"), bool):
        raise _refused(party, "has_labels is not true or false", "describe")
    fingerprint = p.get("anchor_fingerprint")
    if fingerprint is not None and not (
        isinstance(fingerprint, str) and len(fingerprint) == FINGERPRINT_HEX and set(fingerprint) <= set(_HEX)
    ):
        raise _refused(party, "anchor_fingerprint is not a key fingerprint", "describe")


def check_anchor_keys(replies: Mapping[str, Message], parties: Sequence[str]) -> None:
    """Stop a study whose ``parties`` do not all hold the same anchor key (their ``describe`` fingerprints).

    Parties with different keys build different anchors, so their intermediate representations live
    in unrelated coordinates and the collaborative representation is wrong without any error
    (measured on examples/lalonde-2x2: PSM ATT 0.694 instead of 0.434). The parties are grouped by
    fingerprint; the largest group (ties: the one with the first party name) is taken as the study's
    key and every other group is named. A party without a key is named too (it would refuse its
    representation request after the others had computed theirs).

    Raises
    ------
    StudyFailedError
        One line: e.g. "p22 holds a different anchor key from p11, p12, p21".
    """
    groups: dict[str | None, list[str]] = {}
    for party in sorted(parties):
        groups.setdefault(replies[party].params.get("anchor_fingerprint"), []).append(party)
    if len(groups) <= 1 and None not in groups:
        return
    keyless = groups.pop(None, [])
    ranked = sorted(groups.values(), key=lambda names: (-len(names), names[0]))
    problems = [f"{', '.join(names)} {'holds' if len(names) == 1 else 'hold'} a different anchor key from "
                f"{', '.join(ranked[0])}" for names in ranked[1:]]
    if keyless:
        problems.append(f"{', '.join(keyless)} {'holds' if len(keyless) == 1 else 'hold'} no anchor key")
    raise StudyFailedError("; ".join(problems), "give every party the same [anchor] key_file")


@dataclass(frozen=True)
class HistogramRange:
    """Where an honest party's noisy ``dp_histogram`` entries lie, but with probability about exp(-40) each.

    Attributes
    ----------
    counts : (float, float)
        A cell's count is in [0, n] before noise.
    sums : ndarray of shape (n_sums,)
        A cell's sum of column j is at most ``n max|bound_j|`` in absolute value before noise.
    """

    counts: tuple[float, float]
    sums: np.ndarray


def histogram_range(n_subjects: int, epsilon: float, bounds: Sequence[tuple[float, float]], entries: int
                    ) -> HistogramRange:
    """The :class:`HistogramRange` of a party with ``n_subjects`` rows answering ``dp_histogram`` at ``epsilon``.

    The noise scales are those of :func:`~collabcausal.estimators.dp.aggregates.noisy_aggregates`
    (counts discrete Laplace ``2 / eps`` or, with sums, ``2 / (eps / 2)``; sums Laplace
    ``sum_sensitivity / (eps / 2)``), widened by :data:`TAIL_SCALES` of them.
    """
    from collabcausal.estimators.dp.aggregates import COUNT_SENSITIVITY, sum_sensitivity

    count_eps = epsilon / 2.0 if bounds else epsilon
    slack = TAIL_SCALES * COUNT_SENSITIVITY / count_eps
    sum_slack = TAIL_SCALES * sum_sensitivity(bounds, entries) / (epsilon / 2.0) if bounds else 0.0
    largest = np.array([max(abs(lo), abs(hi)) for lo, hi in bounds], dtype=float)
    return HistogramRange((-slack, n_subjects + slack), n_subjects * largest + sum_slack)


def check_histogram(
    party: str, reply: Message, shape: tuple[int, int], n_sums: int, *, plausible: HistogramRange | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """``counts`` (shape ``shape``) and ``sums`` (``shape`` + (n_sums,)) of a ``dp_histogram`` reply, both finite.

    With ``plausible``, every entry must also lie in the range an honest party's release reaches but
    with probability about exp(-40): a count of 1e12 would otherwise make its cell's uplift the ATE.

    Raises
    ------
    StudyFailedError
        Naming the party and the array.
    """
    arrays = []
    for name, expected in (("counts", shape), ("sums", (*shape, n_sums))):
        array = reply.arrays.get(name)
        if array is None or array.shape != expected or array.dtype.kind not in "iuf":
            got = "nothing" if array is None else f"shape {array.shape} and dtype {array.dtype}"
            raise _refused(party, f"{name} has {got}, expected {expected} numbers", "dp_histogram")
        if not np.all(np.isfinite(array)):
            raise _refused(party, f"{name} holds NaN or infinite values", "dp_histogram")
        arrays.append(np.asarray(array, dtype=np.float64))
    counts, sums = arrays
    if plausible is not None:
        low, high = plausible.counts
        if not ((counts >= low) & (counts <= high)).all() or not (np.abs(sums) <= plausible.sums).all():
            raise _refused(party, f"counts or sums lie beyond {TAIL_SCALES} noise scales of what its "
                           "described subjects can give", "dp_histogram")
    return counts, sums


def check_discovery(party: str, reply: Message, request: Mapping[str, Any], *, n_subjects: int) -> None:
    """Refuse a ``dp_discover`` reply unlike the ``request`` (scores or margin, noise scale, epsilon, split sizes).

    The noise scale must be the one the request and the party's public n imply (paper 002, section
    4.2 and Theorem 7, :func:`~collabcausal.estimators.discovery.private_scores.split_sensitivity`):
    a party claiming less noise would make the combined direction look more certain than it is. The
    direction must be the one its scores give and the agreement a probability.

    Raises
    ------
    StudyFailedError
        Naming the party and the field.
    """
    from collabcausal.estimators.discovery.anm import decide
    from collabcausal.estimators.discovery.private_scores import split_sensitivity
    from collabcausal.estimators.dp.mechanisms import laplace_scale

    p = reply.params
    form = request.get("release", "scores")
    released = ("margin",) if form == "margin" else ("score_xy", "score_yx")
    for name in (*released, "noise_scale", "agreement"):
        value = p.get(name)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not np.isfinite(value):
            raise _refused(party, f"{name} is {value!r}, not a finite number", "dp_discover")
    if p.get("form", "scores") != form:
        raise _refused(party, f"it released {p.get('form')!r}, not the {form!r} asked for", "dp_discover")
    m, n = p.get("m_test"), p.get("n_train")
    if m != round(request["test_size"] * n_subjects) or not isinstance(n, int) or m + n != n_subjects:
        raise _refused(party, f"split sizes m_test = {m!r}, n_train = {n!r} do not fit its {n_subjects} subjects",
                       "dp_discover")
    sensitivity = split_sensitivity(request["score"], request["protect"], m, n, request["regularization"],
                                    request["hsic_widths"][1])
    expected = laplace_scale(2.0 * sensitivity, request["epsilon"])
    if p.get("epsilon") != request["epsilon"] or not np.isclose(p["noise_scale"], expected, rtol=1e-9, atol=0.0):
        raise _refused(party, f"noise scale {p['noise_scale']!r} or epsilon {p.get('epsilon')!r} is not what was "
                       f"asked ({expected!r}, {request['epsilon']!r})", "dp_discover")
    # An HSIC score with kernels in [0, 1] lies in [0, m^2 / (m - 1)^2] (tr(HKH L) <= m tr(HKH) <= m^2), so a
    # margin in [-top, top]; Laplace noise leaves either by more than TAIL_SCALES scales with probability
    # exp(-TAIL_SCALES) per released value.
    top = m**2 / (m - 1) ** 2
    low = -top if form == "margin" else 0.0
    if not all(low - TAIL_SCALES * expected <= p[s] <= top + TAIL_SCALES * expected for s in released):
        raise _refused(party, f"{', '.join(f'{s} {p[s]!r}' for s in released)} lie beyond {TAIL_SCALES} noise "
                       f"scales of [{low:.4g}, {top:.4g}]", "dp_discover")
    favoured = decide(0.0, p["margin"]) if form == "margin" else decide(p["score_xy"], p["score_yx"])
    if p.get("direction") != favoured or not 0.0 <= p["agreement"] <= 1.0:
        raise _refused(party, f"direction {p.get('direction')!r} or agreement {p['agreement']!r} does not follow from "
                       f"its {form}", "dp_discover")


def _refused(party: str, problem: str, operation: str = "dc_representation") -> StudyFailedError:
    return StudyFailedError(
        f"party {party!r} sent a {operation} reply the analyst did not ask for: {problem}",
        f"check {party}'s software and data; the study cannot use its reply",
    )


def check_vote(party: str, reply: Message, request: Mapping[str, Any], *, n_subjects: int) -> None:
    """Refuse a ``dp_discover_vote`` reply unlike the ``request``: its epsilon, its Laplace scale ``1/epsilon``, its
    number of groups ``floor(n / group_size)`` (n public; ``group_size`` the request's, or for ``"auto"`` the same
    public function of n and epsilon the party applies) and a finite vote count.

    Raises
    ------
    StudyFailedError
        Naming the party and the field.
    """
    from collabcausal.estimators.discovery.subsample_vote import resolve_group_size
    from collabcausal.estimators.dp.mechanisms import laplace_scale

    p = reply.params
    votes = p.get("votes")
    if isinstance(votes, bool) or not isinstance(votes, (int, float)) or not np.isfinite(votes):
        raise _refused(party, f"votes is {votes!r}, not a finite number", "dp_discover_vote")
    group_size = resolve_group_size(request["group_size"], n_subjects, request["epsilon"])
    if p.get("n_groups") != n_subjects // group_size:
        raise _refused(party, f"n_groups {p.get('n_groups')!r} is not its {n_subjects} subjects in groups of "
                       f"{group_size}", "dp_discover_vote")
    expected = laplace_scale(1.0, request["epsilon"])
    scale = p.get("noise_scale")
    if p.get("epsilon") != request["epsilon"] or not (isinstance(scale, (int, float)) and np.isclose(
            scale, expected, rtol=1e-9, atol=0.0)):
        raise _refused(party, f"noise scale {scale!r} or epsilon {p.get('epsilon')!r} is not what was asked",
                       "dp_discover_vote")
