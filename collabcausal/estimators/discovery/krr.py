"""Gaussian-kernel ridge regression in one variable, as in paper 002, eq. 5.

The objective is ``(lam/2) ||w||^2 + (1/n) sum_i (w . phi(x_i) - y_i)^2`` with the Gaussian kernel
``k(u, v) = exp(-(u - v)^2 / (2 h^2))`` (bounded by 1). Setting the gradient to zero with
``w = sum_i alpha_i phi(x_i)`` gives ``(K + (n lam / 2) I) alpha = y``, solved by Cholesky.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.linalg import cho_factor, cho_solve
from sklearn.base import BaseEstimator

from collabcausal.errors import InputError
from collabcausal.estimators.validation import check_vector

PREDICT_BLOCK = 2048
LOO_WIDTHS: tuple[float, ...] = (0.05, 0.1, 0.2, 0.3, 0.5, 1.0)
LOO_REGULARIZATIONS: tuple[float, ...] = (1e-5, 1e-4, 1e-3, 1e-2, 1e-1)


def gaussian_kernel(u: NDArray[np.float64], v: NDArray[np.float64], width: float) -> NDArray[np.float64]:
    """``exp(-(u_i - v_j)^2 / (2 width^2))`` for 1-D ``u`` and ``v`` (values in (0, 1])."""
    diff = u[:, None] - v[None, :]
    return np.exp(-(diff * diff) / (2.0 * width * width))


def residual_bound(n_train: int, regularization: float) -> float:
    """Largest change of any test residual when one training point changes: ``8 / (n lam^{3/2})``.

    Paper 002, Theorem 5 (eq. 6); holds for ``lam <= 1``, ``|x|, |y| <= 1`` and a kernel bounded by 1.
    """
    return 8.0 / (n_train * regularization**1.5)


class GaussianKRR(BaseEstimator):
    """Kernel ridge regression of paper 002, eq. 5.

    Parameters
    ----------
    regularization : float
        ``lam`` in eq. 5, in (0, 1] (Theorem 5 needs ``lam <= 1``).
    width : float
        Gaussian kernel bandwidth ``h`` (in the units of the scaled inputs, which lie in [-1, 1]).

    Attributes
    ----------
    x_train_ : ndarray of shape (n,)
    dual_coef_ : ndarray of shape (n,)
        ``alpha`` with ``f(x) = sum_i alpha_i k(x, x_i)``.
    fitted_ : ndarray of shape (n,)
        ``f`` at the training inputs, ``K alpha = y - (n lam / 2) alpha`` by eq. 5's normal equations (no second
        kernel product).
    """

    def __init__(self, regularization: float = 1e-3, width: float = 0.3) -> None:
        self.regularization = regularization
        self.width = width

    def fit(self, x: ArrayLike, y: ArrayLike) -> GaussianKRR:
        """Solve ``(K + (n lam / 2) I) alpha = y``."""
        if not 0.0 < self.regularization <= 1.0:
            raise InputError(
                f"regularization must lie in (0, 1], got {self.regularization!r}", "pass e.g. regularization=1e-3"
            )
        if not self.width > 0.0:
            raise InputError(f"kernel width must be > 0, got {self.width!r}", "pass e.g. width=0.3")
        x_arr = check_vector(x, "x")
        y_arr = check_vector(y, "y", n=x_arr.size)
        n = x_arr.size
        gram = gaussian_kernel(x_arr, x_arr, self.width)
        gram[np.diag_indices(n)] += 0.5 * n * self.regularization
        self.x_train_ = x_arr
        self.dual_coef_ = cho_solve(cho_factor(gram, lower=True), y_arr)
        self.fitted_ = y_arr - 0.5 * n * self.regularization * self.dual_coef_
        return self

    def predict(self, x: ArrayLike) -> NDArray[np.float64]:
        """``f(x)``, computed in row blocks so memory stays ``O(block * n)``."""
        x_arr = check_vector(x, "x")
        out = np.empty_like(x_arr)
        for start in range(0, x_arr.size, PREDICT_BLOCK):
            block = x_arr[start : start + PREDICT_BLOCK]
            out[start : start + block.size] = gaussian_kernel(block, self.x_train_, self.width) @ self.dual_coef_
        return out


def loo_select(
    x: ArrayLike,
    y: ArrayLike,
    widths: Sequence[float] = LOO_WIDTHS,
    regularizations: Sequence[float] = LOO_REGULARIZATIONS,
) -> tuple[float, float]:
    """The ``(width, lam)`` pair of the grid with the smallest leave-one-out squared error.

    For eq. 5's solution the fitted values are ``H y`` with ``H = K (K + c I)^{-1}``,
    ``c = n lam / 2``, and the leave-one-out residual is ``(y_i - (H y)_i) / (1 - H_ii)``
    (the usual closed form for linear smoothers). One eigendecomposition ``K = Q diag(d) Q^T``
    per width serves every ``lam``: ``H = Q diag(d / (d + c)) Q^T``. The choice depends on
    ``(x, y)``: use it only where those rows are not protected (e.g. the training split under
    test-set privacy).
    """
    x_arr = check_vector(x, "x")
    y_arr = check_vector(y, "y", n=x_arr.size)
    n = x_arr.size
    best = (np.inf, float(widths[0]), float(regularizations[0]))
    for width in widths:
        d, q = np.linalg.eigh(gaussian_kernel(x_arr, x_arr, float(width)))
        d = np.clip(d, 0.0, None)
        qty = q.T @ y_arr
        q2 = q * q
        for lam in regularizations:
            shrink = d / (d + 0.5 * n * float(lam))
            fitted = q @ (shrink * qty)
            leverage = np.minimum(q2 @ shrink, 1.0 - 1e-12)
            error = float(np.mean(((y_arr - fitted) / (1.0 - leverage)) ** 2))
            if error < best[0]:
                best = (error, float(width), float(lam))
    return best[1], best[2]
