"""The party's private dimensionality reduction f_ij (paper 003, eq. 30; DESIGN.md step 2).

:class:`StandardizedPCA` standardizes with the party's own mean and standard deviation, then
projects on the leading principal components. It is fitted on the party's rows only, and the
fitted object never leaves the party: only its outputs X~ = f(X) and A~ = f(X_anc) do.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from collabcausal.errors import InputError
from collabcausal.estimators.blocks import ColumnMoments, centred_row_blocks
from collabcausal.estimators.validation import check_matrix


class StandardizedPCA:
    """Standardize, then PCA to ``n_components`` (an int, or a fraction of explained variance).

    Parameters
    ----------
    n_components : int or float
        An int ``k >= 1`` keeps ``k`` components (at most the number of columns); a float in
        ``(0, 1]`` keeps the fewest components explaining at least that share of the variance.

    Attributes
    ----------
    mean_, scale_ : ndarray
        Column means and standard deviations (a zero deviation is replaced by 1).
    components_ : ndarray of shape (n_components_, n_features)
        Principal axes, signs fixed so each axis's largest loading is positive.
    explained_variance_ratio_ : ndarray
    n_components_ : int
    """

    def __init__(self, n_components: int | float = 1.0) -> None:
        self.n_components = n_components

    def fit(self, X: ArrayLike, y: object = None) -> StandardizedPCA:
        """Fit on the party's rows."""
        return self._fit(check_matrix(X, "X"))

    def _fit(self, X: NDArray[np.float64]) -> StandardizedPCA:
        """Fit on rows already checked by :func:`check_matrix`."""
        return self.fit_moments(ColumnMoments.of(X))  # accumulated block by block: no standardized copy of X

    def fit_moments(self, moments: ColumnMoments) -> StandardizedPCA:
        """Fit from the party's row count, means and centred Gram (a table read out of core merges its blocks')."""
        if moments.n < 2:
            raise InputError("PCA needs at least 2 subjects", "add subjects")
        n, gram = moments.n, moments.gram
        self.mean_ = moments.mean
        scale = np.sqrt(np.diag(gram) / n)
        self.scale_ = np.where(scale > 0, scale, 1.0)
        eigval, eigvec = np.linalg.eigh(gram / np.outer(self.scale_, self.scale_) / (n - 1))  # ascending
        eigval, eigvec = np.clip(eigval[::-1], 0.0, None), eigvec[:, ::-1]
        total = eigval.sum()
        ratio = eigval / total if total > 0 else np.zeros_like(eigval)
        k = self._n_kept(ratio, gram.shape[0])
        axes = eigvec[:, :k].T
        signs = np.sign(axes[np.arange(k), np.argmax(np.abs(axes), axis=1)])
        self.components_ = axes * signs[:, None]
        self.explained_variance_ratio_ = ratio[:k]
        self.n_components_ = k
        return self

    def transform(self, X: ArrayLike) -> NDArray[np.float64]:
        """Project rows (the party's own or the anchor's) with the fitted map, block by block of rows."""
        X = check_matrix(X, "X")
        if X.shape[1] != self.mean_.size:
            raise InputError(f"X has {X.shape[1]} columns, the reducer was fitted on {self.mean_.size}", "pass those")
        return self._project(X)

    def fit_transform(self, X: ArrayLike, y: object = None) -> NDArray[np.float64]:
        """Fit, then transform the same rows (checked once)."""
        X = check_matrix(X, "X")
        return self._fit(X)._project(X)

    def _project(self, X: NDArray[np.float64]) -> NDArray[np.float64]:
        """The fitted map on checked rows of the fitted width, centred block by block in one cache-sized buffer."""
        out = np.empty((X.shape[0], self.n_components_))
        axes = (self.components_ / self.scale_).T  # standardizing folded into the projection
        for rows, block in centred_row_blocks(X, self.mean_):
            np.matmul(block, axes, out=out[rows])
        return out

    def _n_kept(self, ratio: NDArray[np.float64], n_features: int) -> int:
        k = self.n_components
        if isinstance(k, (int, np.integer)) and not isinstance(k, bool):
            if not 1 <= k <= n_features:
                raise InputError(
                    f"n_components={k} is outside 1..{n_features} (the party's covariates)",
                    f"choose at most {n_features} components",
                )
            return int(k)
        if isinstance(k, float) and 0.0 < k <= 1.0:
            return int(min(np.searchsorted(np.cumsum(ratio), k - 1e-12) + 1, n_features))
        raise InputError(
            f"n_components must be an int >= 1 or a float in (0, 1], got {k!r}",
            "pass e.g. 3, or 0.9 for 90% of the variance",
        )
