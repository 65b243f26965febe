"""DP-CATE for functional queries (paper 004, Theorem 3; supplement C, Algorithms 1-2).

The released function is g_D(.) + r U(.), with U a zero-mean Gaussian process whose covariance is
the Gaussian kernel. A :class:`GaussianProcessPath` draws one sample path lazily: the first query
(any number of points) is a draw from the prior N(0, K) (Algorithm 1, batch mode); every later
query is drawn from the posterior given all earlier draws (Algorithm 2, iterative mode), so the
answers of any query sequence have exactly the joint distribution of one sample path evaluated at
all the points. Repeated points return the value already drawn.

Correlated noise is built from i.i.d. standard normals drawn by the DP core's vetted sampler
(:mod:`collabcausal.estimators.dp.mechanisms`, OpenDP) times a Cholesky factor of the
(conditional) covariance; no other sampler is used for released noise.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray
from scipy.linalg import cho_factor, cho_solve

from collabcausal.estimators.dp import mechanisms

JITTER = 1e-10


def standard_normals(size: int, rng: np.random.Generator | None = None) -> NDArray[np.float64]:
    """i.i.d. N(0, 1) from the DP core's :func:`~collabcausal.estimators.dp.mechanisms.draw_noise`.

    ``rng=None``: OpenDP's sampler (private). A numpy ``rng`` makes the noise reproducible and
    therefore NOT private (seeded experiments only).
    """
    return mechanisms.draw_noise("gaussian", 1.0, (int(size),), rng=rng)


def _covariance_root(C: NDArray[np.float64]) -> NDArray[np.float64]:
    """A factor R with R R^T = C: Cholesky with a relative jitter, else a clipped eigen-root."""
    C = 0.5 * (C + C.T)
    scale = max(1.0, float(np.abs(np.diag(C)).max())) if C.size else 1.0
    try:
        return np.linalg.cholesky(C + JITTER * scale * np.eye(C.shape[0]))
    except np.linalg.LinAlgError:
        vals, vecs = np.linalg.eigh(C)
        return vecs * np.sqrt(np.clip(vals, 0.0, None))


class GaussianProcessPath:
    """One lazily drawn sample path of a zero-mean GP with covariance ``kernel``.

    Parameters
    ----------
    kernel : callable
        ``kernel(A, B) -> (len(A), len(B))`` covariance matrix.
    rng : numpy Generator, optional
        Only for seeded experiments (not private); default OpenDP's sampler.
    """

    def __init__(self, kernel: Callable[[NDArray, NDArray], NDArray], rng: np.random.Generator | None = None) -> None:
        self.kernel = kernel
        self.rng = rng
        self.points_: NDArray[np.float64] | None = None
        self.values_: NDArray[np.float64] = np.zeros(0)

    def __call__(self, X: NDArray[np.float64]) -> NDArray[np.float64]:
        """U(x) at the rows of ``X``, consistent with every earlier call."""
        X = np.asarray(X, dtype=float)
        out = np.empty(X.shape[0])
        known = self._lookup(X)
        hit = known >= 0
        out[hit] = self.values_[known[hit]]
        new = np.unique(X[~hit], axis=0) if (~hit).any() else X[:0]
        if new.shape[0]:
            drawn = self._draw(new)
            self._remember(new, drawn)
            idx = self._lookup(X[~hit])
            out[~hit] = self.values_[idx]
        return out

    def _lookup(self, X: NDArray[np.float64]) -> NDArray[np.intp]:
        if self.points_ is None:
            return np.full(X.shape[0], -1)
        eq = (X[:, None, :] == self.points_[None, :, :]).all(axis=2)
        return np.where(eq.any(axis=1), eq.argmax(axis=1), -1)

    def _draw(self, new: NDArray[np.float64]) -> NDArray[np.float64]:
        """Algorithm 1 (no history: prior) or Algorithm 2 (posterior given the history)."""
        K_new = self.kernel(new, new)
        if self.points_ is None:
            mean, cov = np.zeros(new.shape[0]), K_new
        else:
            K_old = self.kernel(self.points_, self.points_)
            K_cross = self.kernel(self.points_, new)
            factor = cho_factor(K_old + JITTER * np.eye(K_old.shape[0]) * max(1.0, float(np.diag(K_old).max())))
            mean = K_cross.T @ cho_solve(factor, self.values_)
            cov = K_new - K_cross.T @ cho_solve(factor, K_cross)
        return mean + _covariance_root(cov) @ standard_normals(new.shape[0], self.rng)

    def _remember(self, new: NDArray[np.float64], drawn: NDArray[np.float64]) -> None:
        self.points_ = new.copy() if self.points_ is None else np.vstack([self.points_, new])
        self.values_ = np.concatenate([self.values_, drawn])
