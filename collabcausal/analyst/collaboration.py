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

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from collabcausal.errors import InputError, NumericalError
from collabcausal.estimators.blocks import GRAM_BLOCK, column_means, row_blocks
from collabcausal.estimators.small_systems import solve

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


ColumnBlocks = NDArray[np.float64] | Sequence[NDArray[np.float64]]
"""A row group's representation: one array, or its parties' arrays in column-group order."""


class AnchorGram:
    """The anchor-centred Gram matrix of A~ = [A~_1 ... A~_c], accumulated over blocks of anchor rows.

    Everything the collaborative representation needs from the anchor images: their column means
    (the centres of the module docstring) and the Gram matrix of the centred A~ (M x M, M the
    summed widths). Blocks are added as they arrive and can be dropped at once, so A~ (r x M,
    r up to 10^7) is never held whole. The Gram matrix is accumulated around the column means of
    the first block (shifted data, corrected by the sums at the end), which agrees with centring on
    the final means up to float round-off.

    Attributes
    ----------
    widths : tuple of tuple of int
        m~_ij per row group, per party in column-group order (set by the first block).
    rows : int
        Anchor rows added so far.
    """

    def __init__(self) -> None:
        self.widths: tuple[tuple[int, ...], ...] = ()
        self.rows = 0
        self._shifts: list[NDArray[np.float64]] = []
        self._sums = np.zeros(0)
        self._gram = np.zeros((0, 0))

    def add(self, a_tilde: Sequence[ColumnBlocks]) -> None:
        """Add one block of anchor rows: per row group, the same rows of its parties' A~_ij.

        Raises
        ------
        InputError
            An empty block, the parties' blocks differ in rows, or their widths differ from the first block's.
        """
        parts = [_column_blocks(a) for a in a_tilde]
        if not parts or (self.rows and len(parts) != len(self.widths)):
            raise InputError("every block of A~ must list the same row groups", "pass one block per row group")
        rows = parts[0][0].shape[0] if parts[0] else 0
        for i, As in enumerate(parts):
            fits = rows >= 1 and bool(As) and all(a.ndim == 2 and a.shape[0] == rows for a in As)
            if not fits or (self.rows and tuple(a.shape[1] for a in As) != self.widths[i]):
                raise InputError(
                    f"row group {i}: anchor representations of shapes {[a.shape for a in As]} do not fit anchors "
                    f"of {rows} rows" + (f" and the widths {self.widths[i]}" if self.rows else ""),
                    "send A~ of every party from the same reducers and the same anchor rows",
                )
        flat = [a for As in parts for a in As]
        if not self.rows:
            self.widths = tuple(tuple(a.shape[1] for a in As) for As in parts)
            self._shifts = [column_means(a) for a in flat]
            width = sum(a.shape[1] for a in flat)
            self._sums, self._gram = np.zeros(width), np.zeros((width, width))
        gram, sums = _centred_gram(flat, self._shifts)
        self._gram += gram
        self._sums += sums
        self.rows += rows

    def centres(self) -> list[list[NDArray[np.float64]]]:
        """The column means of A~_ij over the anchor rows added, per row group and party."""
        offsets = itertools.pairwise(itertools.accumulate((w for ws in self.widths for w in ws), initial=0))
        sums = [self._sums[lo:hi] for lo, hi in offsets]
        means = iter([shift + total / self.rows for shift, total in zip(self._shifts, sums, strict=True)])
        return [[next(means) for _ in ws] for ws in self.widths]

    def gram(self) -> NDArray[np.float64]:
        """The Gram matrix of the anchor-centred A~ over the anchor rows added."""
        return self._gram - np.outer(self._sums, self._sums) / self.rows


def collaborative_representation(
    x_tilde: Sequence[ColumnBlocks],
    a_tilde: Sequence[ColumnBlocks] | AnchorGram,
    n_components: int | None = None,
) -> CollaborativeRepresentation:
    """Build X^ from per-row-group intermediate representations.

    Parameters
    ----------
    x_tilde : sequence of ndarray, or of sequences of ndarray
        X~_i (n_i x m~_i) per row group: one array, or the parties' X~_ij in column-group order,
        used side by side without being copied together.
    a_tilde : sequence of ndarray, or of sequences of ndarray, or AnchorGram
        A~_i (r x m~_i), in the same column order (and the same blocks), or their
        :class:`AnchorGram` accumulated over blocks of anchor rows. X~_i and A~_i are centred on
        the column means of A~_i (see the module docstring).
    n_components : int, optional
        m^; defaults to the smallest m~_i (each row group can reproduce at most that many
        independent directions).

    Raises
    ------
    NumericalError
        m^ exceeds the rank of A~ or of some A~_i.

    Notes
    -----
    Everything follows from the Gram matrix of the stacked, anchor-centred A~ = [A~_1 ... A~_c]
    (r x M), accumulated over blocks of anchor rows (:class:`AnchorGram`): A~'A~ = V S^2 V' gives
    the singular values and V, the left singular vectors are U1 = A~ V1 S1^-1, so
    A~_i' U1 = (A~'A~)_i V1 S1^-1 (the row group's rows of the Gram matrix) and
    G_i = (A~_i'A~_i)^-1 (A~'A~)_i V1 S1^-1. Neither A~ nor U1 (r x M and r x m^, r up to 10^7)
    is formed, and X^ is written block by block.
    """
    anchor = a_tilde
    if not isinstance(anchor, AnchorGram):
        anchor = AnchorGram()
        if a_tilde:
            anchor.add(a_tilde)
    if len(x_tilde) != len(anchor.widths) or not x_tilde:
        raise InputError("x_tilde and a_tilde must list the same row groups", "pass one block per row group")
    x_parts = [_column_blocks(x) for x in x_tilde]
    r = anchor.rows
    for i, (xs, a_widths) in enumerate(zip(x_parts, anchor.widths, strict=True)):
        n_i = xs[0].shape[0]
        if not all(x.shape[0] == n_i for x in xs) or tuple(x.shape[1] for x in xs) != a_widths:
            raise InputError(
                f"row group {i}: representation shapes {(n_i, sum(x.shape[1] for x in xs))} and "
                f"{(r, sum(a_widths))} do not fit anchors of {r} rows",
                "send X~ and A~ from the same reducers and the same anchor",
            )
    centres = anchor.centres()
    widths = [sum(ws) for ws in anchor.widths]
    k = min(widths) if n_components is None else int(n_components)
    gram = anchor.gram()
    s, V = _gram_eig(gram)
    rank = int((s > RANK_RTOL * s[0]).sum()) if s.size and s[0] > 0 else 0
    if not 1 <= k <= rank:
        raise NumericalError(
            f"m^ = {k} collaborative components requested but the anchor representations of r = {r} rows have "
            f"rank {rank}",
            f"choose m^ between 1 and {rank} ({COMPONENTS_OPTION})" if rank >= 1 else f"use more {ANCHORS_OPTION}",
        )
    to_u1 = V[:, :k] / s[:k]  # U1 = A~ to_u1
    maps = []
    offsets = list(itertools.accumulate(widths, initial=0))
    for i in range(len(widths)):
        cols = slice(offsets[i], offsets[i + 1])
        gram_i = gram[cols, cols]
        s_i = np.sqrt(np.clip(np.linalg.eigvalsh(gram_i), 0.0, None))
        rank_i = int((s_i > RANK_RTOL * s_i.max()).sum()) if s_i.size and s_i.max() > 0 else 0
        if rank_i < widths[i]:
            raise NumericalError(
                f"row group {i}: anchor representation A~_{i} has rank {rank_i} < {widths[i]} columns",
                f"lower m~ (party_components in study.toml, simulate --party-components) or use more {ANCHORS_OPTION}",
            )
        # Least squares min ||U1 - A~_i G|| through its normal equations (A~_i has full rank).
        maps.append(solve(gram_i, gram[cols] @ to_u1))
    bounds = list(itertools.accumulate((xs[0].shape[0] for xs in x_parts), initial=0))
    X_hat = np.empty((bounds[-1], k))
    for i, (xs, cs) in enumerate(zip(x_parts, centres, strict=True)):
        buffer = np.empty((widths[i], min(GRAM_BLOCK, xs[0].shape[0])))
        for rows in row_blocks(xs[0].shape[0], GRAM_BLOCK):
            block = _centred_block(xs, cs, rows, buffer)
            np.matmul(block, maps[i], out=X_hat[bounds[i] + rows.start : bounds[i] + rows.stop])
    blocks = tuple(X_hat[bounds[i] : bounds[i + 1]] for i in range(len(x_parts)))
    return CollaborativeRepresentation(X_hat, blocks, tuple(maps), s)


def _column_blocks(blocks: ColumnBlocks) -> list[NDArray[np.float64]]:
    """A row group's representation as a list of 2-D column blocks."""
    if isinstance(blocks, np.ndarray):
        return [blocks]
    return [np.asarray(b) for b in blocks]


def _centred_block(
    parts: Sequence[NDArray[np.float64]],
    centres: Sequence[NDArray[np.float64]],
    rows: slice,
    buffer: NDArray[np.float64],
) -> NDArray[np.float64]:
    """Rows ``rows`` of the column blocks placed side by side, each minus its centre, written into ``buffer``.

    ``buffer`` is (total width, at least as many rows as ``rows``) and holds the block transposed:
    each party's few columns are written as contiguous rows of it, three times faster than into
    a narrow column slice of a row-major block when the parties are many. The leading
    ``rows`` of its transpose are returned (a column-major view, which BLAS reads as it is).
    """
    block = buffer[:, : rows.stop - rows.start]
    start = 0
    for p, c in zip(parts, centres, strict=True):
        np.subtract(p[rows].T, c[:, None], out=block[start : start + p.shape[1]])
        start += p.shape[1]
    return block.T


def _centred_gram(
    parts: Sequence[NDArray[np.float64]], centres: Sequence[NDArray[np.float64]]
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Gram matrix and column sums of the column blocks side by side, each minus its centre, block by block of rows."""
    width = sum(p.shape[1] for p in parts)
    gram, sums = np.zeros((width, width)), np.zeros(width)
    n = parts[0].shape[0]
    buffer, ones = np.empty((width, min(GRAM_BLOCK, n))), np.ones(min(GRAM_BLOCK, n))
    for rows in row_blocks(n, GRAM_BLOCK):
        block = _centred_block(parts, centres, rows, buffer)
        gram += block.T @ block
        sums += ones[: block.shape[0]] @ block
    return gram, sums


def _gram_eig(gram: NDArray[np.float64]) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Singular values (descending) and right singular vectors of A from its Gram matrix A^T A."""
    lam, V = np.linalg.eigh(gram)  # ascending
    return np.sqrt(np.clip(lam[::-1], 0.0, None)), V[:, ::-1]
