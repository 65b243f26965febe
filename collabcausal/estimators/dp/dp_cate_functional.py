"""DP-CATE for functional queries (paper 004, Theorem 3; supplement C, Algorithms 1-2).

The released function is g_D(.) + r U(.), with U a zero-mean Gaussian process whose covariance is
the Gaussian kernel. A :class:`GaussianProcessPath` draws one sample path lazily: the first query
(any number of points) is a draw from the prior N(0, K) (Algorithm 1, batch mode); every later
query is drawn from the posterior given all earlier draws (Algorithm 2, iterative mode), so the
answers of any query sequence have exactly the joint distribution of one sample path evaluated at
all the points. Repeated points return the value already drawn.

The data-dependent sum g + r U is formed inside the DP core's vetted sampler
(:func:`collabcausal.estimators.dp.mechanisms.perturb`, OpenDP) in whitened coordinates: with R a
root of the (conditional) covariance C and m the conditional mean of U,

    g + r (m + R z) = R (v + r z),   v = R^-1 (g + r m),   z ~ N(0, I),

so OpenDP adds N(0, r^2 I) to v and rounds exactly, and the product with R (a function of the
public query points and kernel only) is post-processing. The distribution is the same as
g + r U; no numpy sampler and no float64 ``value + noise`` of ours touches a private release.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.linalg import cho_factor, cho_solve

from collabcausal.estimators.dp import mechanisms

JITTER = 1e-10


def _covariance_root(C: NDArray[np.float64]) -> NDArray[np.float64]:
    """An invertible R with R R^T = C + jitter: Cholesky, else an eigen-root with a floored spectrum."""
    C = 0.5 * (C + C.T)
    jitter = JITTER * (max(1.0, float(np.abs(np.diag(C)).max())) if C.size else 1.0)
    try:
        return np.linalg.cholesky(C + jitter * np.eye(C.shape[0]))
    except np.linalg.LinAlgError:
        vals, vecs = np.linalg.eigh(C)
        return vecs * np.sqrt(np.clip(vals, 0.0, None) + jitter)


class GaussianProcessPath:
    """One lazily drawn sample path of a zero-mean GP U with covariance ``kernel``.

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
        self.released_: NDArray[np.float64] = np.zeros(0)

    def __call__(self, X: ArrayLike, center: ArrayLike | None = None, scale: float = 1.0) -> NDArray[np.float64]:
        """``center + scale * U(x)`` at the rows of ``X`` (default: U itself), consistent with every earlier call.

        ``center`` holds one value per row of ``X`` and ``scale`` must be the same function and
        number on every call of one path (the :class:`PrivateCATEFunction` passes g_D and r): a
        repeated point returns the number released before.
        """
        X = np.asarray(X, dtype=float)
        c = np.zeros(X.shape[0]) if center is None else np.asarray(center, dtype=float).reshape(X.shape[0])
        out = np.empty(X.shape[0])
        known = self._lookup(X)
        hit = known >= 0
        out[hit] = self.released_[known[hit]]
        if (~hit).any():
            new, first = np.unique(X[~hit], axis=0, return_index=True)
            self._draw(new, c[~hit][first], float(scale))
            out[~hit] = self.released_[self._lookup(X[~hit])]
        return out

    def _lookup(self, X: NDArray[np.float64]) -> NDArray[np.intp]:
        if self.points_ is None:
            return np.full(X.shape[0], -1)
        eq = (X[:, None, :] == self.points_[None, :, :]).all(axis=2)
        return np.where(eq.any(axis=1), eq.argmax(axis=1), -1)

    def _draw(self, new: NDArray[np.float64], center: NDArray[np.float64], scale: float) -> None:
        """Algorithm 1 (no history: prior) or Algorithm 2 (posterior given the history), through OpenDP.

        Releases R (v + scale z) with v = R^-1 (center + scale m) (module docstring) and remembers
        U = (release - center) / scale for later conditioning.
        """
        K_new = self.kernel(new, new)
        if self.points_ is None:
            mean, cov = np.zeros(new.shape[0]), K_new
        else:
            K_old = self.kernel(self.points_, self.points_)
            K_cross = self.kernel(self.points_, new)
            factor = cho_factor(K_old + JITTER * np.eye(K_old.shape[0]) * max(1.0, float(np.diag(K_old).max())))
            mean = K_cross.T @ cho_solve(factor, self.values_)
            cov = K_new - K_cross.T @ cho_solve(factor, K_cross)
        root = _covariance_root(cov)
        whitened = np.linalg.solve(root, center + scale * mean)
        released = root @ mechanisms.perturb("gaussian", whitened, scale, rng=self.rng)
        self.points_ = new.copy() if self.points_ is None else np.vstack([self.points_, new])
        self.values_ = np.concatenate([self.values_, (released - center) / scale])
        self.released_ = np.concatenate([self.released_, released])
