"""DP CATE on the collaborative representation of a DC-QE study (papers 003 + 004).

After :func:`collabcausal.analyst.dcqe.run_dcqe` (over an in-process grid in a simulation, or the
gRPC grid in a deployment: the function only sees the :class:`DCQEResult`), the analyst holds
(X^, T, Y). To release heterogeneous effects beyond the study it runs paper 004's DP-CATE on that
table and releases either the CATE at requested query points (Theorem 1) or a DP function
(Theorem 3), every release charged to the study's ledger before it is computed.

What the guarantee covers: (eps, delta)-DP with respect to one subject's row of (X^, T, Y), with the
representation maps (f_ij, G_i) held fixed and the declared bounds of X^ enforced by clipping. The
maps themselves are fitted on all subjects and are not DP (paper 003, section 4.2; DESIGN.md,
threat model), so this is not a DP guarantee about the parties' raw tables.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike

from collabcausal.analyst.dcqe import DCQEResult
from collabcausal.errors import InputError
from collabcausal.estimators.dp.dp_cate import DPCATE, PrivateCATEFunction, PrivateRelease, check_query_points
from collabcausal.randomness import SeedLike


def dp_cate_on_representation(
    result: DCQEResult,
    *,
    feature_bounds: Sequence[tuple[float, float]],
    outcome_bounds: tuple[float, float],
    epsilon: float,
    delta: float = 1e-5,
    ledger,
    learner: Literal["r", "dr"] = "r",
    second_stage: Literal["krr", "linear", "functional"] = "functional",
    query_points: ArrayLike | None = None,
    seed: SeedLike = None,
    **options,
) -> PrivateRelease | PrivateCATEFunction:
    """Fit DP-CATE on (X^, T, Y) and release it.

    Parameters
    ----------
    result : DCQEResult
        A finished DC-QE run.
    feature_bounds : sequence of (low, high)
        Declared domain of every column of X^ (m^ pairs).
    outcome_bounds : (low, high)
        Declared range of Y.
    epsilon, delta : float
        Privacy of the release (the nuisance stage and the release are charged as disjoint
        subsets of one split, see :mod:`collabcausal.estimators.dp.dp_cate`).
    ledger : PrivacyLedger
        The study's ledger (required: every release is charged).
    second_stage : {"functional", "krr", "linear"}
        "functional" returns a :class:`PrivateCATEFunction`; the others need ``query_points``
        and return a :class:`PrivateRelease`.
    query_points : array, optional
        Points of the representation space (m^ columns) for a finite release.
    seed : int or Generator, optional
        Seed of the sample split.
    **options
        Further :class:`DPCATE` parameters (bandwidth, ridge, huber, clip, nuisance_split).
    """
    if ledger is None:
        raise InputError("no ledger was given for a DP CATE release", "pass the study's PrivacyLedger")
    if second_stage != "functional" and query_points is None:
        raise InputError(f"a {second_stage!r} release needs query_points", "pass the points, or use 'functional'")
    X_hat = result.representation.X_hat
    if len(feature_bounds) != X_hat.shape[1]:
        raise InputError(
            f"{len(feature_bounds)} feature bounds for a representation with {X_hat.shape[1]} columns",
            "declare one (low, high) pair per column of X^",
        )
    if query_points is not None:
        check_query_points(query_points, feature_bounds)
    model = DPCATE(learner, second_stage, epsilon=epsilon, delta=delta, feature_bounds=feature_bounds,
                   outcome_bounds=outcome_bounds, ledger=ledger, random_state=seed, **options)
    model.fit(result.outcome, result.treatment, X=np.asarray(X_hat))
    if second_stage == "functional":
        return model.release_function()
    return model.release(query_points)
