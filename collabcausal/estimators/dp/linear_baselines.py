"""DP linear and logistic regression with individual-level access: the baselines of paper 001.

All three take features already mapped to ``[-1, 1]`` and a scaled outcome in ``[-1, 1]``
(entries outside are clipped) and add an intercept column; :class:`DPTwoModel` does the scaling.

* :class:`FunctionalMechanismRegression`: Zhang et al. (2012), the paper's reference [24]. The
  least-squares objective ``sum_i (y_i - z_i'w)^2`` is a polynomial in w with coefficients
  ``-2 sum y z_j``, ``sum z_j^2`` and ``2 sum z_j z_l`` (j < l); each gets ``Lap(Δ/eps)`` with
  ``Δ = 2 (2D + D²)`` (D = features + intercept): ``2D + D²`` bounds one subject's L1 contribution
  to those coefficients when |z_j|, |y| <= 1, and a substituted subject removes one contribution
  and adds another (Zhang et al.'s ``Δ = 2 max sum |λ|``; the constant ``sum y²`` does not move
  the minimiser and is not released). The noisy quadratic may be indefinite: as in their section 5 we
  drop its non-positive eigen-directions (spectral trimming) before minimising.
* :class:`ObjectivePerturbationLogistic`: Chaudhuri, Monteleoni, Sarwate (2011), Algorithm 2,
  reference [16]; for a binary outcome. Features are further divided by ``sqrt(D)`` so
  ``||z|| <= 1``. Its guarantee is theirs: replace-one neighbours, exact minimisation.
* :class:`AdaSSPRegression`: Wang (2018), "Revisiting differentially private linear regression",
  Algorithm 2 (AdaSSP): noisy sufficient statistics with an adaptive ridge. Each of its three
  releases is (eps/3, delta/3)-DP; we calibrate them with the analytic Gaussian mechanism for
  substitution of one row x (``||x||² <= B² = D``): the smallest eigenvalue of X'X moves by at most
  B² (Weyl: ``xx' - x~x~'`` has eigenvalues in [-B², B²]), the Gram matrix by at most sqrt(2) B² in
  Frobenius norm (``|x|^4 + |x~|^4 - 2 (x'x~)² <= 2 B^4``) and X'y by at most 2 B.

Every ``predict`` returns the model's estimate of the scaled outcome's conditional mean.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.optimize import minimize
from sklearn.base import BaseEstimator
from sklearn.preprocessing import PolynomialFeatures

from collabcausal.errors import InputError, NumericalError
from collabcausal.estimators.dp.mechanisms import analytic_gaussian_sigma, draw_noise, gaussian, laplace
from collabcausal.estimators.validation import (
    check_bounds,
    check_delta,
    check_epsilon,
    check_is_fitted,
    check_matrix,
    check_treatment,
    check_vector,
)


class _ScaledLinearModel(BaseEstimator):
    """Shared plumbing: clip to [-1, 1], add the intercept, predict ``[1, z] @ coef_``."""

    rng: np.random.Generator | None

    def _design(self, Z: ArrayLike, n: int | None = None) -> NDArray[np.float64]:
        arr = np.clip(check_matrix(Z, "Z", n_rows=n), -1.0, 1.0)
        return np.column_stack([np.ones(arr.shape[0]), arr])

    def _target(self, y: ArrayLike, n: int) -> NDArray[np.float64]:
        return np.clip(check_vector(y, "y", n=n), -1.0, 1.0)

    def predict(self, Z: ArrayLike) -> NDArray[np.float64]:
        """The scaled outcome's conditional mean at each row of ``Z``."""
        check_is_fitted(self, "coef_")
        return self._design(Z) @ self.coef_


class FunctionalMechanismRegression(_ScaledLinearModel):
    """Epsilon-DP least squares by the functional mechanism (Zhang et al. 2012, Algorithm 1).

    Parameters
    ----------
    epsilon : float
    rng : numpy Generator, optional
        Insecure reproducible noise (simulations); ``None`` draws from OpenDP.
    """

    def __init__(self, epsilon: float, *, rng: np.random.Generator | None = None) -> None:
        self.epsilon = epsilon
        self.rng = rng

    def fit(self, Z: ArrayLike, y: ArrayLike) -> FunctionalMechanismRegression:
        """Release the noisy objective's coefficients and minimise it."""
        eps = check_epsilon(self.epsilon)
        A = self._design(Z)
        t = self._target(y, A.shape[0])
        d = A.shape[1]
        upper = np.triu_indices(d, 1)
        gram = A.T @ A
        coefs = np.concatenate([-2.0 * (A.T @ t), np.diag(gram), 2.0 * gram[upper]])
        noisy = laplace(coefs, 2.0 * (2.0 * d + d * d), eps, rng=self.rng)
        b = -noisy[:d] / 2.0
        M = np.diag(noisy[d : 2 * d])
        M[upper] = noisy[2 * d :] / 2.0
        M = np.triu(M) + np.triu(M, 1).T
        vals, vecs = np.linalg.eigh(M)
        keep = vals > 1e-10 * max(np.abs(vals).max(), 1.0)
        self.coef_ = vecs[:, keep] @ ((vecs[:, keep].T @ b) / vals[keep])
        self.n_trimmed_ = int(d - keep.sum())
        return self


class AdaSSPRegression(_ScaledLinearModel):
    """(Epsilon, delta)-DP ridge regression by AdaSSP (Wang 2018, Algorithm 2).

    Parameters
    ----------
    epsilon, delta : float
    rho : float
        Failure probability of the eigenvalue bound that sets the ridge (Wang's default 0.05).
    rng : numpy Generator, optional
    """

    def __init__(
        self, epsilon: float, delta: float, *, rho: float = 0.05, rng: np.random.Generator | None = None
    ) -> None:
        self.epsilon = epsilon
        self.delta = delta
        self.rho = rho
        self.rng = rng

    def fit(self, Z: ArrayLike, y: ArrayLike) -> AdaSSPRegression:
        """Noisy min-eigenvalue, Gram matrix and cross-products; solve the adaptive ridge."""
        eps = check_epsilon(self.epsilon) / 3.0
        total_delta = _positive(check_delta(self.delta))
        delta = total_delta / 3.0
        A = self._design(Z)
        t = self._target(y, A.shape[0])
        d = A.shape[1]
        bx2 = float(d)
        gram = A.T @ A
        sigma = analytic_gaussian_sigma(bx2, eps, delta)
        lam_min = float(np.linalg.eigvalsh(gram)[0])
        noisy_min = gaussian(lam_min, bx2, eps, delta, rng=self.rng).item()
        lam_min_tilde = max(noisy_min - sigma * math.sqrt(math.log(6.0 / total_delta)), 0.0)
        lam = max(0.0, math.sqrt(d * math.log(2.0 * d * d / self.rho)) * sigma - lam_min_tilde)
        upper = np.triu_indices(d)
        noisy_gram = np.zeros((d, d))
        noisy_gram[upper] = gaussian(gram[upper], math.sqrt(2.0) * bx2, eps, delta, rng=self.rng)
        noisy_gram = noisy_gram + np.triu(noisy_gram, 1).T
        noisy_xty = gaussian(A.T @ t, 2.0 * math.sqrt(bx2), eps, delta, rng=self.rng)
        try:
            self.coef_ = np.linalg.solve(noisy_gram + lam * np.eye(d), noisy_xty)
        except np.linalg.LinAlgError as exc:
            raise NumericalError(f"AdaSSP's noisy system is singular ({exc})", "use more data or a larger eps") from exc
        self.ridge_ = lam
        return self


class ObjectivePerturbationLogistic(_ScaledLinearModel):
    """Epsilon-DP logistic regression by objective perturbation (Chaudhuri et al. 2011, Alg. 2).

    ``fit(Z, y)`` takes labels in {-1, +1} (the scaled binary outcome); ``predict`` returns
    ``2 P(y = 1 | z) - 1``, the scaled outcome's conditional mean.

    Parameters
    ----------
    epsilon : float
    regularization : float
        Lambda of their Algorithm 2 (the paper's tuned ``C`` is its inverse up to n).
    rng : numpy Generator, optional
    """

    def __init__(
        self, epsilon: float, *, regularization: float = 1e-3, rng: np.random.Generator | None = None
    ) -> None:
        self.epsilon = epsilon
        self.regularization = regularization
        self.rng = rng

    def _design(self, Z: ArrayLike, n: int | None = None) -> NDArray[np.float64]:
        A = super()._design(Z, n)
        return A / math.sqrt(A.shape[1])

    def fit(self, Z: ArrayLike, y: ArrayLike) -> ObjectivePerturbationLogistic:
        """Minimise the logistic loss plus ridge plus the random linear term ``b'w / n``."""
        eps = check_epsilon(self.epsilon)
        lam = check_epsilon(self.regularization, "regularization")
        A = self._design(Z)
        labels = np.where(check_vector(y, "y", n=A.shape[0]) > 0, 1.0, -1.0)
        n, d = A.shape
        c = 0.25
        eps_prime = eps - math.log(1.0 + 2.0 * c / (n * lam) + c * c / (n * n * lam * lam))
        extra = 0.0
        if eps_prime <= 0:
            extra = c / (n * math.expm1(eps / 4.0)) - lam
            eps_prime = eps / 2.0
        norm = np.abs(draw_noise("laplace", 2.0 / eps_prime, d, rng=self.rng)).sum()
        direction = draw_noise("gaussian", 1.0, d, rng=self.rng)
        b = norm * direction / np.linalg.norm(direction)

        def objective(w: NDArray[np.float64]) -> tuple[float, NDArray[np.float64]]:
            margin = labels * (A @ w)
            loss = np.logaddexp(0.0, -margin).mean() + 0.5 * (lam + extra) * w @ w + b @ w / n
            grad = -(A.T @ (labels * _sigmoid(-margin))) / n + (lam + extra) * w + b / n
            return float(loss), grad

        result = minimize(objective, np.zeros(d), jac=True, method="L-BFGS-B", options={"gtol": 1e-10})
        self.coef_ = result.x
        return self

    def predict(self, Z: ArrayLike) -> NDArray[np.float64]:
        return 2.0 * _sigmoid(super().predict(Z)) - 1.0


def _positive(delta: float) -> float:
    if delta == 0.0:
        raise InputError("AdaSSP needs delta > 0, got 0", "pass e.g. delta=1e-6")
    return delta


def _sigmoid(z: NDArray[np.float64]) -> NDArray[np.float64]:
    return 0.5 * (1.0 + np.tanh(0.5 * z))


class DPTwoModel(BaseEstimator):
    """A two-model (T-learner) uplift estimator from two DP regressions (paper 001's eps-TM).

    Covariates are clipped to ``x_bounds`` and mapped to ``[-1, 1]``, expanded to polynomial
    features of ``degree`` (still in ``[-1, 1]``), and the outcome is clipped to ``y_bounds`` and
    mapped to ``[-1, 1]``. One regression per arm: the arms are disjoint subjects, so the model is
    as private as each regression (parallel composition).

    Parameters
    ----------
    make_regressor : callable
        ``make_regressor() -> model`` with ``fit(Z, y)`` / ``predict(Z)`` on scaled data, e.g.
        ``lambda: FunctionalMechanismRegression(eps)``.
    degree : int
    x_bounds : sequence of (low, high)
        One per covariate.
    y_bounds : (low, high)
    """

    def __init__(
        self,
        make_regressor: Callable[[], _ScaledLinearModel],
        degree: int,
        x_bounds: list[tuple[float, float]],
        y_bounds: tuple[float, float],
    ) -> None:
        self.make_regressor = make_regressor
        self.degree = degree
        self.x_bounds = x_bounds
        self.y_bounds = y_bounds

    def fit(self, X: ArrayLike, t: ArrayLike, y: ArrayLike) -> DPTwoModel:
        """Fit the treated-arm and control-arm regressions."""
        Z = self._features(X)
        treat = check_treatment(t, n=Z.shape[0])
        lo, hi = check_bounds(self.y_bounds, "y_bounds")
        scaled = (np.clip(check_vector(y, "y", n=Z.shape[0]), lo, hi) - lo) / (hi - lo) * 2.0 - 1.0
        self.models_ = [self.make_regressor().fit(Z[treat == arm], scaled[treat == arm]) for arm in (0, 1)]
        return self

    def predict(self, X: ArrayLike) -> NDArray[np.float64]:
        """Uplift ``mu_1(x) - mu_0(x)`` in outcome units."""
        check_is_fitted(self, "models_")
        Z = self._features(X)
        lo, hi = check_bounds(self.y_bounds, "y_bounds")
        return (self.models_[1].predict(Z) - self.models_[0].predict(Z)) * (hi - lo) / 2.0

    def _features(self, X: ArrayLike) -> NDArray[np.float64]:
        arr = check_matrix(X, "X")
        box = np.array([check_bounds(b, "x_bounds") for b in self.x_bounds], dtype=np.float64).reshape(-1, 2)
        if box.shape[0] != arr.shape[1]:
            raise InputError(f"{arr.shape[1]} covariates but {box.shape[0]} x_bounds", "give one (low, high) each")
        unit = (np.clip(arr, box[:, 0], box[:, 1]) - box[:, 0]) / (box[:, 1] - box[:, 0]) * 2.0 - 1.0
        return PolynomialFeatures(int(self.degree), include_bias=False).fit_transform(unit)
