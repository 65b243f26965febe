"""DP CATE on the collaborative representation of a DC-QE study (papers 003 + 004).

After :func:`collabcausal.analyst.dcqe.run_dcqe` (over an in-process grid in a simulation, or the
gRPC grid in a deployment: the function only sees the :class:`DCQEResult`), the analyst holds
(X^, T, Y). To release heterogeneous effects beyond the study it runs paper 004's DP-CATE on that
table and releases a DP function (Theorem 3), charged to the study's ledger before it is computed.
The finite-query release (Theorem 1) is not offered: its noise scale is data-dependent, so it is
not (eps, delta)-DP (see :meth:`collabcausal.estimators.dp.dp_cate.DPCATE.release`).

What the guarantee covers, exactly: (eps, delta)-DP under substitution of ONE ROW of the table
(X^, T, Y) that the analyst holds, with the representation maps (f_ij, G_i) treated as fixed and
public, and the declared bounds of X^ enforced by clipping. It is NOT subject-level DP: the maps are
fitted on all subjects' data (paper 003, section 4.2; DESIGN.md, threat model), so changing one
subject in a party's raw table changes the maps and therefore every row of X^, and nothing here
bounds that. Nor does it protect the parties' raw tables from the analyst, who already holds X^.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np

from collabcausal.analyst.dcqe import DCQEResult
from collabcausal.errors import InputError
from collabcausal.estimators.dp.dp_cate import DPCATE, PrivateCATEFunction
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
    seed: SeedLike = None,
    **options,
) -> PrivateCATEFunction:
    """Fit DP-CATE on (X^, T, Y) and release its DP function (paper 004, Theorem 3).

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
    seed : int or Generator, optional
        Seed of the sample split.
    **options
        Further :class:`DPCATE` parameters (bandwidth, ridge, huber, clip, nuisance_split).
    """
    if ledger is None:
        raise InputError("no ledger was given for a DP CATE release", "pass the study's PrivacyLedger")
    X_hat = result.representation.X_hat
    if len(feature_bounds) != X_hat.shape[1]:
        raise InputError(
            f"{len(feature_bounds)} feature bounds for a representation with {X_hat.shape[1]} columns",
            "declare one (low, high) pair per column of X^",
        )
    model = DPCATE(learner, "functional", epsilon=epsilon, delta=delta, feature_bounds=feature_bounds,
                   outcome_bounds=outcome_bounds, ledger=ledger, random_state=seed, **options)
    model.fit(result.outcome, result.treatment, X=np.asarray(X_hat))
    return model.release_function()
