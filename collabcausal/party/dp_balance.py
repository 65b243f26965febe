"""Differentially private balance moments: ``dp_weighted_moments`` (paper 003, eqs. 42-44).

The plain ``weighted_moments`` (:mod:`collabcausal.party.balance`) returns exact weighted sums of
the party's covariates, guarded only by ``min_subjects``, ``min_weight_ratio`` and the differencing
rule (docs/threat-model.md). This operation releases the same sufficient statistics with Gaussian
noise, (epsilon, delta)-DP under the project's one relation (substitution of one subject, n public;
docs/differential-privacy.md), whatever weights and arms the analyst sends:

1. **Public box.** Each requested covariate is clipped to the public range ``[lo, hi]`` sent in the
   request and standardised to ``z = (clip(x, lo, hi) - c) / h`` in ``[-1, 1]``, with centre
   ``c = (lo + hi) / 2`` and scale ``h = (hi - lo) / 2``. The reply carries the moments of ``z``:
   SMD does not change under a positive affine map of a covariate, and on the standard box every
   covariate gets the same noise whatever its range.
2. **Weights are public.** The arms and weights are the analyst's request: ``sum_w`` and
   ``sum_w2`` per arm are functions of the request alone and are returned exactly. Subject ``k``
   enters the sums with its total weight ``W_k`` (summed over the rows that repeat it).
3. **Sensitivity.** Subject ``k`` adds ``W_k u_k`` with ``u_k = (z_k, z_k^2)`` (m + m numbers) to
   the block of its arm. Substituting it changes the released vector ``(sum_wz, sum_wz2)`` of both
   arms (4m numbers) by at most, in L2,

       Delta = 2 sqrt(m) max_k W_k

   Within the subject's arm, per covariate ``(z - z')^2 + (z^2 - z'^2)^2 = d^2 (1 + e^2)`` with
   ``d = z - z'``, ``e = z + z'`` and ``|d| + |e| <= 2``; ``(2 - |e|)^2 (1 + e^2)`` decreases in
   ``|e|``, so the maximum is 4, at opposite ends (``z = -1, z' = 1``: the bound is attained). A
   substitution that also flips the subject's arm (the request's arms come from the label holder,
   whose record may be the one substituted) moves ``W_k u_k`` out of one block and ``W_k u'_k``
   into the other: ``|u|^2 + |u'|^2 <= 2 + 2`` per covariate, the same 4. A subject whose rows
   carry both arms moves by ``sqrt(a_0^2 + a_1^2) |u - u'| <= W_k |u - u'|``. Weight 1 on one
   subject and 1e-300 on the others therefore buys the analyst nothing: the noise is scaled to the
   heaviest subject.
4. **Noise.** ``N(0, sigma^2)`` on each of the 4m sums from the vetted OpenDP sampler
   (:func:`collabcausal.estimators.dp.mechanisms.gaussian`), sigma the analytic Gaussian
   calibration of ``Delta`` (Balle & Wang 2018, Theorem 8).

Everything that depends only on the request (columns, bounds, arms, weights, rows, epsilon,
delta, sigma) is checked before the ledger is charged; the charge comes before the table is read.
The attack of a hostile analyst (weights concentrated on one subject) is audited through
:meth:`Party.handle` in ``tests/party/test_dp_balance.py`` and ``benchmarks/audit_privacy.py``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from collabcausal.errors import InputError
from collabcausal.estimators.balance import ArmMoments
from collabcausal.estimators.dp.calibration import max_subject_weight, moments_sensitivity, public_scale
from collabcausal.estimators.dp.mechanisms import analytic_gaussian_sigma, clip, gaussian
from collabcausal.estimators.validation import check_bounds, check_delta, check_epsilon, check_treatment, check_vector
from collabcausal.messages import Message
from collabcausal.party.balance import table_moments
from collabcausal.party.dp_queries import annotate_clipping, request_number, require_ledger
from collabcausal.party.node import Party
from collabcausal.party.operations import operation
from collabcausal.party.representation import selected_rows
from collabcausal.party.table import column_index

OPERATION = "dp_weighted_moments"
_FIX = "send columns=[...], bounds=[[lo, hi], ...] (one per column), epsilon and 0 < delta < 1/n"


def standardised_moments(
    table: Any,
    columns: Sequence[str],
    bounds: Sequence[tuple[float, float]],
    arms: NDArray,
    weights: NDArray[np.float64],
    rows: NDArray[np.int64] | None,
) -> tuple[ArmMoments, list[int]]:
    """The exact moments of ``z = (clip(x, lo, hi) - c) / h`` (steps 1-2) of the requested rows, before noise.

    One pass over the party's table (:func:`~collabcausal.party.balance.table_moments`: in memory
    or out of core), ``rows`` the table row of each request row (None: every row in order).
    Returns the moments and how many entries of each column were clipped (over the whole table).
    """
    scales = np.array([public_scale(b, "bounds") for b in bounds])

    def standardise(X: NDArray[np.float64]) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
        clipped = [clip(X[:, j], *b) for j, b in enumerate(bounds)]
        Z = (np.column_stack([values for values, _ in clipped]) - scales[:, 0]) / scales[:, 1]
        return Z, np.array([k for _, k in clipped], dtype=np.int64)

    moments, n_clipped = table_moments(table, columns, arms, weights[None, :], rows, standardise)
    return moments, [int(k) for k in n_clipped]


@operation(OPERATION, parameters={"epsilon", "delta", "columns", "bounds"}, differentially_private=True,
           out_of_core=True)
def dp_weighted_moments(party: Party, request: Message) -> Message:
    """(epsilon, delta)-DP weighted per-arm moments of the party's covariates (module docstring).

    Request params: ``study``, ``epsilon``, ``delta`` (0 < delta < 1/n), ``columns`` (covariates,
    in reply order) and ``bounds`` (one public ``[lo, hi]`` per column). Request arrays: ``arms``
    (0/1 per row), ``weights`` (>= 0 per row), optional ``rows``.
    Reply params: ``covariates``, ``center`` and ``scale`` (per column), ``sigma``,
    ``sensitivity``, ``epsilon``, ``delta``. Reply arrays: the fields of
    :class:`~collabcausal.estimators.balance.ArmMoments` of ``z = (clip(x) - center) / scale``: ``sum_w``
    and ``sum_w2`` exact (public), ``sum_wx`` and ``sum_wx2`` with ``N(0, sigma^2)`` noise.
    """
    p = request.params
    if "epsilon" not in p or "delta" not in p:
        raise InputError(f"{OPERATION} needs epsilon and delta", _FIX)
    eps = check_epsilon(request_number(p["epsilon"], "epsilon", OPERATION), f"epsilon of {OPERATION}")
    delta = check_delta(request_number(p["delta"], "delta", OPERATION), f"delta of {OPERATION}")
    n = party.table.n_subjects
    if not 0.0 < delta < 1.0 / n:
        raise InputError(f"delta {delta:g} of {OPERATION} is not in (0, 1/n = 1/{n})", "e.g. delta = 1e-6")
    names, raw_bounds = p.get("columns"), p.get("bounds")
    if not isinstance(names, list) or not names or not isinstance(raw_bounds, list) or len(raw_bounds) != len(names):
        raise InputError(f"{OPERATION} needs columns and one (low, high) bound per column", _FIX)
    names = [str(c) for c in names]
    bounds = [check_bounds(b, f"bounds of {c!r}") for c, b in zip(names, raw_bounds, strict=True)]
    scales = np.array([public_scale(b, f"bounds of {c!r}") for c, b in zip(names, bounds, strict=True)])
    for name in names:
        column_index(party.table, name)  # an unknown column is refused before the charge
    rows = selected_rows(party, request)
    subjects = np.arange(n) if rows is None else rows
    arms = check_treatment(request.array("arms"), "arms", n=subjects.size)
    weights = check_vector(request.array("weights"), "weights", n=subjects.size)
    if (weights < 0.0).any():
        raise InputError("weights contain negative values", "send non-negative weights")
    max_weight = max_subject_weight(subjects, weights)
    sensitivity = moments_sensitivity(len(names), max_weight)
    if not (math.isfinite(sensitivity) and sensitivity > 0.0):
        raise InputError(f"the weights and bounds give sensitivity {sensitivity:g}", "send positive, finite ones")
    with np.errstate(over="ignore"):
        if not math.isfinite(float(np.sum(weights * weights))):  # sum_w2 and sum_wx2 stay finite below
            raise InputError("the weights' squares overflow (sum_w2 would be infinite)", "send smaller weights")
    sigma = analytic_gaussian_sigma(sensitivity, eps, delta)
    charge = require_ledger(party, OPERATION).charge(
        OPERATION, eps, delta, study=str(p.get("study", "")), details={"columns": names, "max_weight": max_weight}
    )
    exact, n_clipped = standardised_moments(party.table, names, bounds, arms, weights, rows)
    annotate_clipping(party, charge, names, n_clipped)
    noisy = gaussian(np.stack([exact.sum_wx, exact.sum_wx2]), sensitivity, eps, delta)
    arrays: dict[str, NDArray[np.float64]] = {
        "sum_w": exact.sum_w,
        "sum_w2": exact.sum_w2,
        "sum_wx": noisy[0],
        "sum_wx2": noisy[1],
    }
    params = {
        "covariates": names,
        "center": scales[:, 0].tolist(),
        "scale": scales[:, 1].tolist(),
        "sigma": sigma,
        "sensitivity": sensitivity,
        "epsilon": eps,
        "delta": delta,
    }
    return Message(OPERATION, params, arrays)

