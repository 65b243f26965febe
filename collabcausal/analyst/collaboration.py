"""Collaborative representations from intermediate ones (paper 003, eqs. 31-35; DESIGN.md 4-7).

Per row group i the analyst places the parties' intermediate representations side by side:
X~_i = [X~_i1 ... X~_id], A~_i = [A~_i1 ... A~_id]. The anchor representations of all row groups
form A~ = [A~_1, ..., A~_c] (r x sum_i m~_i); its truncated SVD A~ ~ U1 S1 V1^T keeps m^ left
singular vectors. G_i = pinv(A~_i) U1 solves min ||U1 - A~_i G_i|| and the collaborative
representation is X^_i = X~_i G_i, stacked over row groups.

Centring on the anchor (docs/dcqe.md, "Any row split"): every party standardizes on its own
rows, so f_ij is affine with a party-specific offset and a linear G_i cannot map row groups with
different means consistently. Before the SVD both X~_i and A~_i are shifted by the anchor mean of
A~_i (a quantity of the shared anchor, not of any party's rows); the offsets then cancel and, with
full-rank reducers, X^ = (X - mean(X_anc)) K with one K for all row groups, so propensities equal
the centralized ones for any row split.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from collabcausal.errors import InputError, NumericalError

RANK_RTOL = 1e-7  # singular values from a Gram matrix are accurate to ~1e-8 relative


@dataclass(frozen=True, eq=False)
class CollaborativeRepresentation:
    """The analyst's collaborative representation.

    Attributes
    ----------
    X_hat : ndarray of shape (n, m^)
        Row groups stacked in order.
    blocks : tuple of ndarray
        X^_i per row group (views into ``X_hat``).
    G : tuple of ndarray
        The maps G_i (m~_i x m^), applied to the anchor-centred X~_i - mean(A~_i).
    singular_values : ndarray
        All singular values of A~ (for diagnostics and choosing m^).
    """

    X_hat: NDArray[np.float64]
    blocks: tuple[NDArray[np.float64], ...]
    G: tuple[NDArray[np.float64], ...]
    singular_values: NDArray[np.float64]


# How a user sets m^ and r, named in the messages (the same code serves both commands).
COMPONENTS_OPTION = "[study] n_components in study.toml, simulate --components SETTING=K"
ANCHORS_OPTION = "anchor rows ([study] n_anchors in study.toml, simulate --anchors)"


def collaborative_representation(
    x_tilde: Sequence[NDArray[np.float64]],
    a_tilde: Sequence[NDArray[np.float64]],
    n_components: int | None = None,
) -> CollaborativeRepresentation:
    """Build X^ from per-row-group intermediate representations.

    Parameters
    ----------
    x_tilde : sequence of ndarray
        X~_i (n_i x m~_i), the row group's parties' representations side by side.
    a_tilde : sequence of ndarray
        A~_i (r x m~_i), in the same column order. Both are centred on the column means of A~_i
        before use (see the module docstring).
    n_components : int, optional
        m^; defaults to the smallest m~_i (each row group can reproduce at most that many
        independent directions).

    Raises
    ------
    NumericalError
        m^ exceeds the rank of A~ or of some A~_i.
    """
    if len(x_tilde) != len(a_tilde) or not x_tilde:
        raise InputError("x_tilde and a_tilde must list the same row groups", "pass one block per row group")
    r = a_tilde[0].shape[0]
    for i, (x, a) in enumerate(zip(x_tilde, a_tilde, strict=True)):
        if a.shape[0] != r or x.shape[1] != a.shape[1]:
            raise InputError(
                f"row group {i}: representation shapes {x.shape} and {a.shape} do not fit anchors of {r} rows",
                "send X~ and A~ from the same reducers and the same anchor",
            )
    centres = [a.mean(axis=0) for a in a_tilde]
    x_tilde = [x - c for x, c in zip(x_tilde, centres, strict=True)]
    a_tilde = [a - c for a, c in zip(a_tilde, centres, strict=True)]
    A = np.hstack(a_tilde)
    k = min(a.shape[1] for a in a_tilde) if n_components is None else int(n_components)
    # Thin SVD through the small Gram matrix: A^T A = V S^2 V^T and U = A V S^-1. It costs
    # O(r m^2), never forms an r x r matrix (r may be 10^6) and is exact enough for the
    # well-conditioned anchor representations; ranks are decided with RANK_RTOL accordingly.
    s, V = _gram_eig(A)
    rank = int((s > RANK_RTOL * s[0]).sum()) if s.size and s[0] > 0 else 0
    if not 1 <= k <= rank:
        raise NumericalError(
            f"m^ = {k} collaborative components requested but the anchor representations of r = {r} rows have "
            f"rank {rank}",
            f"choose m^ between 1 and {rank} ({COMPONENTS_OPTION})" if rank >= 1 else f"use more {ANCHORS_OPTION}",
        )
    U1 = (A @ V[:, :k]) / s[:k]
    maps = []
    for i, a in enumerate(a_tilde):
        gram = a.T @ a
        s_i = np.sqrt(np.clip(np.linalg.eigvalsh(gram), 0.0, None))
        rank_i = int((s_i > RANK_RTOL * s_i.max()).sum()) if s_i.size and s_i.max() > 0 else 0
        if rank_i < a.shape[1]:
            raise NumericalError(
                f"row group {i}: anchor representation A~_{i} has rank {rank_i} < {a.shape[1]} columns",
                f"lower m~ (party_components in study.toml, simulate --party-components) or use more {ANCHORS_OPTION}",
            )
        # Least squares min ||U1 - A~_i G|| through its normal equations (A~_i has full rank).
        maps.append(np.linalg.solve(gram, a.T @ U1))
    X_hat = np.vstack([x @ G for x, G in zip(x_tilde, maps, strict=True)])
    bounds = np.cumsum([0] + [x.shape[0] for x in x_tilde])
    blocks = tuple(X_hat[bounds[i] : bounds[i + 1]] for i in range(len(x_tilde)))
    return CollaborativeRepresentation(X_hat, blocks, tuple(maps), s)


def _gram_eig(A: NDArray[np.float64]) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Singular values (descending) and right singular vectors of A from A^T A."""
    lam, V = np.linalg.eigh(A.T @ A)
    order = np.argsort(lam)[::-1]
    return np.sqrt(np.clip(lam[order], 0.0, None)), V[:, order]
