"""Passes over tall (n x m) arrays block by block of rows, so a pass allocates no (n x m) temporary.

At 10^6-10^7 subjects an elementwise expression such as ``(X - mean) / scale`` would allocate as
much memory as X itself, twice; the same pass over blocks of :data:`ROW_BLOCK` rows allocates a
few megabytes and gives the same rows (each row's arithmetic does not depend on the blocking).
The estimators' tall designs ``[1, (X - center) W]`` are never formed either (:class:`AffineDesign`):
their products are taken from X.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

ROW_BLOCK = 1 << 16
"""Rows per block (a block of 10 float64 columns is 5 MB)."""


GRAM_BLOCK = 1 << 13
"""Rows per block of the Gram matrices (a block of 11 columns is 0.7 MB): the centred or weighted
copy of a block is still in the cache when the product reads it, which halves their time. The same
holds for any centred block multiplied at once (the reducer's projection, the collaborative X^)."""


def row_blocks(n: int, rows: int = ROW_BLOCK) -> Iterator[slice]:
    """Consecutive slices of at most ``rows`` rows covering ``range(n)``."""
    for lo in range(0, n, rows):
        yield slice(lo, min(lo + rows, n))


def column_means(X: NDArray[np.float64]) -> NDArray[np.float64]:
    """The mean of each column of ``X``, as products with a vector of ones block by block.

    A third of the time of ``X.mean(axis=0)``, whose reduction over the rows of a C-ordered array
    adds a few columns at a time; the sums differ by rounding only.
    """
    ones = np.ones(min(GRAM_BLOCK, X.shape[0]))
    sums = (ones[: rows.stop - rows.start] @ X[rows] for rows in row_blocks(X.shape[0], GRAM_BLOCK))
    out = _block_sum(sums, X.shape[1])
    out /= X.shape[0]
    return out


def centred_row_blocks(
    X: NDArray[np.float64], center: NDArray[np.float64]
) -> Iterator[tuple[slice, NDArray[np.float64]]]:
    """``(rows, X[rows] - center)`` for blocks of :data:`GRAM_BLOCK` rows, each block written into one reused buffer.

    A block is valid until the next one is asked for: use it at once (a product, a sum).
    """
    buffer = np.empty((min(GRAM_BLOCK, X.shape[0]), X.shape[1]))
    for rows in row_blocks(X.shape[0], GRAM_BLOCK):
        block = buffer[: rows.stop - rows.start]
        np.subtract(X[rows], center, out=block)
        yield rows, block


def centred_gram(X: NDArray[np.float64], center: NDArray[np.float64]) -> NDArray[np.float64]:
    """``(X - center)' (X - center)``, accumulated block by block (no centred copy of X)."""
    return _block_sum((block.T @ block for _, block in centred_row_blocks(X, center)), (X.shape[1], X.shape[1]))


def _block_sum(products: Iterator[NDArray[np.float64]], shape: int | tuple[int, int]) -> NDArray[np.float64]:
    """The sum of the per-block ``products`` (new arrays), added into the first: one block (n <= :data:`GRAM_BLOCK`)
    is returned as it is, with no sum into zeros (zeros of ``shape`` when there is no block)."""
    out = next(products, None)
    if out is None:
        return np.zeros(shape)
    for product in products:
        out += product
    return out


class AffineDesign:
    """The tall design ``[1, (X - center) W]`` of an estimator, never formed: its products are taken from X.

    Formed, the design of 10^7 subjects and 10 covariates would take 0.9 GB beside X. Products
    with a vector are products of X with a vector (:meth:`dot`, :meth:`tdot`); the Gram matrices
    write each block of :data:`GRAM_BLOCK` design rows into one reused buffer (0.7 MB), still in
    the cache when the product reads it.

    Parameters
    ----------
    X : ndarray of shape (n, m)
        The covariates (held by reference).
    center : ndarray of shape (m,)
    W : ndarray of shape (m, k) or (m,)
        A matrix the centred rows are multiplied by, or (1-D) per-column divisors of the centred rows.
    intercept : bool, default True
        Lead with a column of ones.

    Attributes
    ----------
    shape : (int, int)
        ``(n, k + 1)`` with the intercept, ``(n, k)`` without (k = m for 1-D ``W``).
    """

    def __init__(
        self, X: NDArray[np.float64], center: NDArray[np.float64], W: NDArray[np.float64], intercept: bool = True
    ) -> None:
        self.X, self.center, self.W = X, center, W
        self._first = int(intercept)
        self.shape = (X.shape[0], self._first + (W.shape[1] if W.ndim == 2 else W.shape[0]))
        self._single: NDArray[np.float64] | None = None

    def blocks(self) -> Iterator[tuple[slice, NDArray[np.float64]]]:
        """``(rows, design[rows])`` for blocks of :data:`GRAM_BLOCK` rows, each written into one reused buffer.

        A block is valid until the next one is asked for: use it at once (a product, a sum), and
        never write into it. A design of one block (n <= :data:`GRAM_BLOCK`, at most 0.7 MB) is
        formed at the first pass and kept: a Newton fit's every iteration reads the same rows.
        """
        if self._single is not None:
            yield slice(0, self.shape[0]), self._single
            return
        buffer = np.empty((min(GRAM_BLOCK, self.shape[0]), self.shape[1]))
        buffer[:, : self._first] = 1.0
        for rows, centred in centred_row_blocks(self.X, self.center):
            block = buffer[: centred.shape[0]]
            if self.W.ndim == 2:
                np.matmul(centred, self.W, out=block[:, self._first :])
            else:
                np.divide(centred, self.W, out=block[:, self._first :])
            if rows.stop == self.shape[0] and rows.start == 0:
                block.setflags(write=False)
                self._single = block
            yield rows, block

    def dot(self, v: NDArray[np.float64]) -> NDArray[np.float64]:
        """``design @ v``, shape (n,), as ``X u + (v_0 - center' u)`` with ``u`` the rest of ``v`` mapped back by ``W``.

        One product of X with a vector and no design block: the centring moves into the constant,
        which costs a relative rounding of about ``eps |center| / sd`` on each value (negligible
        unless a column's mean dwarfs its spread by many orders of magnitude).
        """
        u = self._body(v[self._first :])
        out = self.X @ u
        out += (v[0] if self._first else 0.0) - self.center @ u
        return out

    def tdot(self, r: NDArray[np.float64]) -> NDArray[np.float64]:
        """``design.T @ r``, shape (k + 1,): ``sum(r)`` and ``W' (X' r - center sum(r))``, as in :meth:`dot`."""
        total = r.sum()
        moment = r @ self.X - self.center * total
        if not self._first:
            return self._body(moment) if self.W.ndim == 1 else self.W.T @ moment
        out = np.empty(self.shape[1])
        out[0] = total
        if self.W.ndim == 1:
            np.divide(moment, self.W, out=out[1:])
        else:
            np.matmul(self.W.T, moment, out=out[1:])
        return out

    def _body(self, v: NDArray[np.float64]) -> NDArray[np.float64]:
        """``W v`` (or ``v / W`` for per-column divisors): a vector over the design's body columns mapped to X's."""
        return self.W @ v if self.W.ndim == 2 else v / self.W

    def weighted_gram(self, w: NDArray[np.float64]) -> NDArray[np.float64]:
        """``sum_k w_k d_k d_k'`` over the rows d_k of the design."""
        return _block_sum((block.T @ (block * w[rows, None]) for rows, block in self.blocks()), (self.shape[1],) * 2)

    def take(self, mask: NDArray[np.bool_]) -> NDArray[np.float64]:
        """The rows of the design where ``mask`` is True, formed (a subset for a dense solver)."""
        return np.concatenate([block[mask[rows]] for rows, block in self.blocks()])


@dataclass(frozen=True)
class ColumnMoments:
    """Row count, column means and centred Gram matrix of a set of rows.

    The moments of two disjoint sets merge exactly (Chan, Golub & LeVeque 1979, eq. 2.1 in its matrix
    form): a table read block by block out of core gets the moments of the whole from those of its
    blocks, without the cancellation of an uncentred sum of squares.

    Attributes
    ----------
    n : int
    mean : ndarray of shape (m,)
    gram : ndarray of shape (m, m)
        ``(X - mean)' (X - mean)``.
    """

    n: int
    mean: NDArray[np.float64]
    gram: NDArray[np.float64]

    @classmethod
    def of(cls, X: NDArray[np.float64]) -> ColumnMoments:
        """The moments of the rows of ``X``, block by block (:func:`column_means`, :func:`centred_gram`)."""
        mean = column_means(X)
        return cls(int(X.shape[0]), mean, centred_gram(X, mean))

    def merge(self, other: ColumnMoments) -> ColumnMoments:
        """The moments of the union of the two sets of rows."""
        n = self.n + other.n
        shift = other.mean - self.mean
        return ColumnMoments(
            n,
            self.mean + shift * (other.n / n),
            self.gram + other.gram + np.outer(shift, shift) * (self.n * other.n / n),
        )
