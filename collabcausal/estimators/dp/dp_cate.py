"""DP-CATE (paper 004): differentially private Neyman-orthogonal R- and DR-learners.

Stage 1 (on D~, half of the sample by default): propensity pi^ and outcome mu^(x, a), each
(eps/2, delta/2)-DP (DP-EBMs with declared bounds), so D~ spends (eps, delta) by basic composition.
Stage 2 (on the disjoint D, |D| = n) minimises the orthogonal loss of eqs. (3)-(6):
(1/n) sum rho(A_i, pi^(X_i)) l(g(X_i), phi(Z_i)) + Lambda(g), with
R-learner: rho = (a - pi)^2, phi = (y - mu(x, a)) / (a - pi) + mu(x, 1) - mu(x, 0)  (eq. 12);
DR-learner: rho = 1, phi = (a - pi)(y - mu(x, a)) / (pi (1 - pi)) + mu(x, 1) - mu(x, 0)  (eq. 22).
Stage 2 releases are (eps, delta)-DP on D, so the whole is (eps, delta)-DP (parallel composition).

Releases
--------
* :meth:`DPCATE.release` — finite queries (Theorem 1; NOT (eps, delta)-DP, see its docstring):
  g_D(x) + gamma(T, D) c(eps, delta, n) U,
  U ~ N(0, I_d), c = 5 sqrt(2 ln(n) ln(2/delta)) / (eps n), gamma the sample gross-error
  sensitivity sup_z ||h(x_query, x) rho (phi(z) - g(x))||_2 over the declared domain
  (Corollary 1: h = 2 J_theta H^-1 grad_theta g for a parametric second stage; Corollary 2:
  h = (L_rho + lambda I)^-1 K(., x) evaluated at the queries, for kernel ridge regression).
* :meth:`DPCATE.release_function` — the whole function (Theorem 3), second stage a Gaussian-kernel
  ridge regression with the Huber loss, plus r U(.) with U a Gaussian-process sample path
  (:mod:`collabcausal.estimators.dp.dp_cate_functional`).

Every release is charged to the ledger before it is computed: the nuisance stage and each release
are charged as subsets ``"nuisances"`` / ``"second_stage"`` of one partition (the split), so the
ledger composes them in parallel across the split and sequentially within a subset.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.linalg import lu_factor, lu_solve
from scipy.optimize import minimize
from sklearn.base import BaseEstimator, clone

from collabcausal.errors import InputError, PolicyError
from collabcausal.estimators.dp import mechanisms
from collabcausal.estimators.dp.clipping import clipping_warnings, count_outside
from collabcausal.estimators.dp.dp_cate_functional import GaussianProcessPath
from collabcausal.estimators.dp.meta_algorithm import DPEBMClassifier, DPEBMRegressor, refuse_seeded_noise_with_ledger
from collabcausal.estimators.metalearners.splits import check_arms, disjoint_plan
from collabcausal.estimators.validation import (
    check_bounds,
    check_delta,
    check_epsilon,
    check_is_fitted,
    check_matrix,
    check_treatment,
    check_vector,
)
from collabcausal.randomness import SeedLike, as_generator

SecondStage = Literal["krr", "linear", "functional"]
N_RANDOM_CANDIDATES = 1000
N_REFINED = 2
MAX_CORNER_DIM = 10
FINITE_QUERY_GUARANTEE = (
    "asymptotic (eps, delta) of paper 004 Lemma 5 with data-dependent gamma(T, D); not (eps, delta)-DP"
)


def c_factor(epsilon: float, delta: float, n: int) -> float:
    """c(eps, delta, n) = 5 sqrt(2 ln(n) ln(2/delta)) / (eps n)  (paper 004, Theorem 1)."""
    return 5.0 * np.sqrt(2.0 * np.log(n) * np.log(2.0 / delta)) / (epsilon * n)


def gaussian_kernel(A: ArrayLike, B: ArrayLike, bandwidth: float) -> NDArray[np.float64]:
    """exp(-||a - b||^2 / (2 h^2)); paper 004's kernel is this times (sqrt(2 pi) h)^-q."""
    A, B = np.asarray(A, float), np.asarray(B, float)
    d2 = (A**2).sum(1)[:, None] + (B**2).sum(1)[None, :] - 2.0 * A @ B.T
    return np.exp(-np.clip(d2, 0.0, None) / (2.0 * bandwidth**2))


def orthogonal_terms(learner: str, a, pi, mu0, mu1, y) -> tuple[NDArray, NDArray]:
    """(rho, phi) of eqs. (4)-(5) for the R-learner (lambda = pi(1-pi)) or DR-learner (lambda = 1)."""
    mu_a = np.where(a == 1, mu1, mu0)
    if learner == "r":
        return (a - pi) ** 2, (y - mu_a) / (a - pi) + mu1 - mu0
    return np.ones_like(pi), (a - pi) * (y - mu_a) / (pi * (1 - pi)) + mu1 - mu0


def check_query_points(X: ArrayLike, bounds: ArrayLike) -> NDArray[np.float64]:
    """Query points as a matrix, refused when a point lies outside the declared box ``bounds``."""
    box = np.asarray(bounds, dtype=float)
    Xq = check_matrix(X, "query points")
    if Xq.shape[1] != box.shape[0]:
        raise InputError(
            f"query points have {Xq.shape[1]} columns, expected {box.shape[0]}",
            "pass points with the fitted covariates",
        )
    outside = ((Xq < box[:, 0]) | (Xq > box[:, 1])).any(axis=1)
    if outside.any():
        raise InputError(
            f"{int(outside.sum())} query point(s) lie outside the declared domain (first: row {int(outside.argmax())})",
            "query inside feature_bounds: the sensitivity is only valid on the declared domain",
        )
    return Xq


@dataclass(frozen=True)
class PrivateRelease:
    """A finite-query release: the query points and their noisy estimates.

    NOT (eps, delta)-DP: the noise is scaled by the sample gross-error sensitivity gamma(T, D),
    which depends on the data; paper 004's Lemma 5 bounds it only asymptotically, under regularity
    conditions. ``guarantee`` says so; the model keeps the scale as ``sensitivity_`` /
    ``noise_scale_`` for the data holder's own diagnostics.
    """

    points: NDArray[np.float64]
    estimates: NDArray[np.float64]
    epsilon: float
    delta: float
    guarantee: str = FINITE_QUERY_GUARANTEE


class PrivateCATEFunction:
    """g_D(.) + r U(.) (Theorem 3): query it any number of times at no further privacy cost.

    The object lives with the data holder (it contains the second-stage fit); only its answers
    are released. ``noise_scale`` multiplies a unit-variance GP with covariance
    exp(-||x - x'||^2 / (2 h^2)).
    """

    def __init__(self, owner: DPCATE, noise_scale: float, rng: np.random.Generator | None) -> None:
        self._owner = owner
        self.noise_scale = noise_scale
        self.path = GaussianProcessPath(lambda A, B: gaussian_kernel(A, B, owner.bandwidth_), rng)

    def __call__(self, X: ArrayLike) -> NDArray[np.float64]:
        Xq = self._owner._check_domain(X)
        return self.path(Xq, center=self._owner._predict(Xq), scale=self.noise_scale)


class DPCATE(BaseEstimator):
    """Paper 004's DP-CATE for the R- or DR-learner.

    Parameters
    ----------
    learner : {"r", "dr"}
    second_stage : {"krr", "linear", "functional"}
        Kernel ridge regression (Corollary 2), a linear model [1, x] (Corollary 1), or the
        Huber-loss Gaussian-kernel ridge regression of Theorem 3.
    epsilon, delta : float
        Privacy of the fit plus one release.
    feature_bounds : sequence of (low, high)
        The declared domain of X (data clipped to it; queries outside it refused).
    outcome_bounds : (low, high)
        The declared range of Y (required).
    bandwidth : float, optional
        Gaussian kernel bandwidth h; default sqrt(q) times the median feature range / 2.
    ridge : float
        lambda of the second stage, for the unit-height kernel exp(-||.||^2 / 2h^2) (and for theta).
    huber : float
        Huber threshold k of the functional second stage; its Lipschitz constant L = k.
    nuisance_split : float
        Share of the sample for stage 1 (D~).
    clip : float
        Propensities clipped to [clip, 1 - clip] (keeps rho and phi bounded).
    model_propensity, model_outcome : estimators, optional
        Non-private nuisance models (for the non-private baseline; the result is then NOT DP, and
        a ledger is refused).
    ledger : optional
        The party's :class:`~collabcausal.ledger.PrivacyLedger`; only the DP-EBM nuisances
        and :meth:`release_function` are charged to it (:meth:`release` is refused with a ledger).
    random_state : int or Generator, optional
        Seed of the split and of the sup search (not of released noise).
    noise_rng : numpy Generator, optional
        Makes released noise reproducible (experiments only: NOT private, so refused with a ``ledger``).
    """

    def __init__(
        self,
        learner: Literal["r", "dr"] = "r",
        second_stage: SecondStage = "krr",
        *,
        epsilon: float,
        delta: float = 1e-5,
        feature_bounds: Sequence[tuple[float, float]] | None = None,
        outcome_bounds: tuple[float, float] | None = None,
        bandwidth: float | None = None,
        ridge: float = 1e-2,
        huber: float = 1.0,
        nuisance_split: float = 0.5,
        clip: float = 0.05,
        model_propensity=None,
        model_outcome=None,
        ledger=None,
        random_state: SeedLike = None,
        noise_rng: np.random.Generator | None = None,
        n_jobs: int = 1,
    ) -> None:
        self.learner = learner
        self.second_stage = second_stage
        self.epsilon = epsilon
        self.delta = delta
        self.feature_bounds = feature_bounds
        self.outcome_bounds = outcome_bounds
        self.bandwidth = bandwidth
        self.ridge = ridge
        self.huber = huber
        self.nuisance_split = nuisance_split
        self.clip = clip
        self.model_propensity = model_propensity
        self.model_outcome = model_outcome
        self.ledger = ledger
        self.random_state = random_state
        self.noise_rng = noise_rng
        self.n_jobs = n_jobs

    # ---- checks -------------------------------------------------------------------------
    def _check_params(self) -> None:
        if self.learner not in ("r", "dr"):
            raise InputError(f"unknown learner {self.learner!r}", "use 'r' or 'dr'")
        if self.second_stage not in ("krr", "linear", "functional"):
            raise InputError(f"unknown second stage {self.second_stage!r}", "use 'krr', 'linear' or 'functional'")
        self.epsilon_, self.delta_ = check_epsilon(self.epsilon), check_delta(self.delta)
        if self.delta_ == 0.0:
            raise InputError("delta must be > 0 for DP-CATE (Gaussian noise)", "pass e.g. delta=1e-5")
        if not self.feature_bounds:
            raise InputError("feature_bounds were not declared", "declare a public (low, high) range per covariate")
        self.box_ = np.array([check_bounds(b, f"feature_bounds[{j}]") for j, b in enumerate(self.feature_bounds)])
        if self.outcome_bounds is None:
            raise InputError(
                "outcome_bounds were not declared: the sensitivity of the second stage is undefined",
                "declare a public (low, high) range for Y",
            )
        self.y_bounds_ = check_bounds(self.outcome_bounds, "outcome_bounds")
        self._check_ledger_use()
        for name in ("ridge", "huber"):
            if not float(getattr(self, name)) > 0:
                raise InputError(f"{name} must be > 0, got {getattr(self, name)!r}", f"pass a positive {name}")

    def _check_ledger_use(self) -> None:
        """Only (eps, delta)-DP work may be charged: DP-EBM nuisances and the functional release."""
        if self.ledger is None:
            return
        refuse_seeded_noise_with_ledger(self.noise_rng is not None)
        if self.model_propensity is not None or self.model_outcome is not None:
            raise PolicyError(
                "non-private nuisance models cannot be charged as a DP release",
                "drop model_propensity/model_outcome (DP-EBMs are used) or pass ledger=None",
            )
        if self.second_stage != "functional":
            raise PolicyError(
                "finite-query DP-CATE scales noise by the data-dependent gamma(T, D): not (eps, delta)-DP",
                "use second_stage='functional', or pass ledger=None",
            )

    def _check_fitted(self) -> None:
        check_is_fitted(self, "beta_", "fit(Y, T, X=...)")

    def _check_domain(self, X: ArrayLike) -> NDArray[np.float64]:
        self._check_fitted()
        return check_query_points(X, self.box_)

    def _charge(self, subset: str, operation: str, details: dict) -> None:
        if self.ledger is not None:
            self.ledger.charge(
                operation,
                self.epsilon_,
                self.delta_,
                partition=self.partition_,
                subset=subset,
                details={"paper": "004", **details},
            )

    # ---- fitting ------------------------------------------------------------------------
    def fit(self, Y: ArrayLike, T: ArrayLike, *, X: ArrayLike) -> DPCATE:
        """Split, fit the (eps/2, delta/2)-DP nuisances on D~ and the second stage on D."""
        self._check_params()
        Xa = check_matrix(X, "X")
        if Xa.shape[1] != self.box_.shape[0]:
            raise InputError(
                f"X has {Xa.shape[1]} columns but {self.box_.shape[0]} feature bounds were declared",
                "declare one (low, high) pair per covariate",
            )
        y = check_vector(Y, "Y", n=Xa.shape[0])
        a = check_treatment(T, "T", n=Xa.shape[0])
        # not DP: the data holder's diagnostic of what the declared bounds clip
        self.clipping_ = (count_outside(y, self.y_bounds_, "outcomes"), count_outside(Xa, self.box_, "covariate rows"))
        self.warnings_ = clipping_warnings(self.clipping_)
        y = np.clip(y, *self.y_bounds_)
        Xa = np.clip(Xa, self.box_[:, 0], self.box_[:, 1])
        rng = as_generator(self.random_state)
        share = float(self.nuisance_split)
        (rnd,) = disjoint_plan(Xa.shape[0], ("propensity_outcome",), (share, 1 - share), rng)
        tilde, d = rnd.train["propensity_outcome"], rnd.evaluate
        check_arms(a, (rnd,), ("propensity_outcome",))  # before the nuisances are charged
        self.partition_ = f"dp_cate:{uuid.uuid4().hex}"
        self.private_nuisances_ = self.model_propensity is None and self.model_outcome is None
        if self.private_nuisances_:
            self._charge("nuisances", f"dp_cate_nuisances_{self.learner}", {"n": int(tilde.size)})
        self._fit_nuisances(Xa[tilde], a[tilde], y[tilde])
        self.X_, self.a_, self.y_ = Xa[d], a[d], y[d]
        q = Xa.shape[1]
        span = float(np.median(self.box_[:, 1] - self.box_[:, 0]))
        self.bandwidth_ = float(self.bandwidth) if self.bandwidth is not None else 0.5 * span * np.sqrt(q)
        pi, mu0, mu1 = self._nuisances(self.X_)
        self.rho_, self.phi_ = orthogonal_terms(self.learner, self.a_, pi, mu0, mu1, self.y_)
        self._fit_second_stage()
        return self

    def _fit_nuisances(self, X, a, y) -> None:
        kw = {"epsilon": self.epsilon_ / 2, "delta": self.delta_ / 2, "n_jobs": self.n_jobs}
        fb = [tuple(b) for b in self.box_]
        prop, out = self.model_propensity, self.model_outcome
        if prop is None:
            prop = DPEBMClassifier(feature_bounds=fb, **kw)
        if out is None:
            out = DPEBMRegressor(feature_bounds=[*fb, (0.0, 1.0)], target_bounds=self.y_bounds_, **kw)
        self.propensity_ = clone(prop).fit(X, a)
        self.outcome_ = clone(out).fit(np.column_stack([X, a]), y)

    def _nuisances(self, X) -> tuple[NDArray, NDArray, NDArray]:
        pi = np.clip(self.propensity_.predict_proba(X)[:, 1], self.clip, 1 - self.clip)
        mu = [
            np.clip(self.outcome_.predict(np.column_stack([X, np.full(len(X), arm)])), *self.y_bounds_)
            for arm in (0.0, 1.0)
        ]
        return pi, mu[0], mu[1]

    def _basis(self, X) -> NDArray[np.float64]:
        return np.column_stack([np.ones(len(X)), X])

    def _fit_second_stage(self) -> None:
        n = self.X_.shape[0]
        if self.second_stage == "linear":
            B = self._basis(self.X_)
            self.hessian_ = 2.0 * (B.T * self.rho_) @ B / n + 2.0 * self.ridge * np.eye(B.shape[1])
            self.beta_ = np.linalg.solve(self.hessian_, 2.0 * (B.T @ (self.rho_ * self.phi_)) / n)
            return
        K = gaussian_kernel(self.X_, self.X_, self.bandwidth_)
        if self.second_stage == "krr":
            self.beta_ = np.linalg.solve(self.rho_[:, None] * K + n * self.ridge * np.eye(n), self.rho_ * self.phi_)
            self.operator_lu_ = lu_factor(self.ridge * np.eye(n) + K * self.rho_[None, :] / n)
            return
        self.beta_ = self._huber_krr(K)

    def _huber_krr(self, K: NDArray[np.float64], iterations: int = 50) -> NDArray[np.float64]:
        """argmin (1/n) sum rho_i Huber_k(g(x_i) - phi_i) + ridge ||g||^2 by IRLS (eq. 18)."""
        n = K.shape[0]
        beta = np.zeros(n)
        for _ in range(iterations):
            resid = K @ beta - self.phi_
            w = self.rho_ * np.minimum(1.0, self.huber / np.maximum(np.abs(resid), 1e-12))
            new = np.linalg.solve(w[:, None] * K + 2.0 * n * self.ridge * np.eye(n), w * self.phi_)
            if np.max(np.abs(new - beta)) < 1e-9 * (1.0 + np.max(np.abs(beta))):
                return new
            beta = new
        return beta

    def _predict(self, X: NDArray[np.float64]) -> NDArray[np.float64]:
        if self.second_stage == "linear":
            return self._basis(X) @ self.beta_
        return gaussian_kernel(X, self.X_, self.bandwidth_) @ self.beta_

    def effect(self, X: ArrayLike) -> NDArray[np.float64]:
        """The non-private second-stage estimate g_D(x): NOT a DP release (baselines, diagnostics)."""
        return self._predict(self._check_domain(X))

    # ---- finite queries (Theorem 1) -------------------------------------------------------
    def _influence_directions(self, Xq: NDArray, C: NDArray) -> NDArray[np.float64]:
        """h(g, x_query, x) for every candidate x (columns): Corollary 1 or 2 (sample versions)."""
        n = self.X_.shape[0]
        if self.second_stage == "linear":
            return 2.0 * self._basis(Xq) @ np.linalg.solve(self.hessian_, self._basis(C).T)
        Kxc = gaussian_kernel(self.X_, C, self.bandwidth_)
        V = lu_solve(self.operator_lu_, Kxc)
        Kq = gaussian_kernel(Xq, self.X_, self.bandwidth_)
        return (gaussian_kernel(Xq, C, self.bandwidth_) - (Kq * self.rho_[None, :]) @ V / n) / self.ridge

    def _worst_residual(self, C: NDArray) -> NDArray[np.float64]:
        """max over a in {0, 1}, y in the outcome range of |rho(a, pi(x)) (phi(z) - g(x))|."""
        pi, mu0, mu1 = self._nuisances(C)
        g = self._predict(C)
        worst = np.zeros(len(C))
        for arm in (0, 1):
            for y in self.y_bounds_:
                rho, phi = orthogonal_terms(self.learner, np.full(len(C), arm), pi, mu0, mu1, np.full(len(C), y))
                worst = np.maximum(worst, np.abs(rho * (phi - g)))
        return worst

    def sensitivity(self, X_query: ArrayLike, seed: SeedLike = None) -> float:
        """Sample gross-error sensitivity gamma(T, D) (eq. 11) over the declared domain, bounded above.

        gamma = sup_z ||h(x)|| |rho (phi - g)| <= sup_x ||h(x)|| * sup_z |rho (phi - g)|; the
        product of the two sups is what we use (it can only add noise). Each sup over x is
        numerical, as in the paper (supplement G.3): the training rows of D, 1000 uniform points
        of the box, its corners (q <= 10), then a bounded Powell search from the best few. A
        numerical sup can fall short of the true one; see docs/cate.md.
        """
        Xq = self._check_domain(X_query)
        rng = as_generator(self.random_state if seed is None else seed)
        lo, hi = self.box_[:, 0], self.box_[:, 1]
        parts = [self.X_, rng.uniform(lo, hi, size=(N_RANDOM_CANDIDATES, len(lo)))]
        if len(lo) <= MAX_CORNER_DIM:
            parts.append(np.array(list(itertools.product(*self.box_))))
        C = np.vstack(parts)

        def direction_norm(cands: NDArray) -> NDArray:
            return np.linalg.norm(self._influence_directions(Xq, cands), axis=0)

        return self._numerical_sup(direction_norm, C) * self._numerical_sup(self._worst_residual, C)

    def _numerical_sup(self, score, C: NDArray) -> float:
        values = score(C)
        best = float(values.max())
        bounds = list(zip(self.box_[:, 0], self.box_[:, 1], strict=True))
        for start in C[np.argsort(values)[-N_REFINED:]]:
            res = minimize(
                lambda x: -score(x[None, :])[0],
                start,
                method="Powell",
                bounds=bounds,
                options={"maxfev": 100, "xtol": 1e-3},
            )
            best = max(best, -float(res.fun))
        return best

    def release(self, X_query: ArrayLike, *, allow_noise_above_range: bool = False) -> PrivateRelease:
        """Noisy CATE at ``X_query`` (Theorem 1): g_D(x) + gamma c(eps, delta, n) U, U ~ N(0, I_d).

        A paper-004 reproduction, NOT an (eps, delta)-DP release: gamma(T, D) is computed from the
        data (Lemma 5 holds only asymptotically), so it is refused when a ledger is attached. It is
        also refused, before any noise is drawn, when the predicted noise sd gamma c(eps, delta, n)
        exceeds the declared outcome range: such a release carries no information about tau
        (Theorem 1's gamma is an L2 norm over all queries, so it grows with their number), unless
        ``allow_noise_above_range`` (reproducing paper 004's tables at its settings).
        """
        if self.second_stage == "functional":
            raise InputError(
                "release() needs second_stage 'krr' or 'linear'",
                "use release_function() for the functional second stage",
            )
        Xq = self._check_domain(X_query)
        self._check_ledger_use()
        self.sensitivity_ = self.sensitivity(Xq)
        self.noise_scale_ = self.sensitivity_ * c_factor(self.epsilon_, self.delta_, self.X_.shape[0])
        span = self.y_bounds_[1] - self.y_bounds_[0]
        if self.noise_scale_ > span and not allow_noise_above_range:
            raise InputError(
                f"DP-CATE finite queries at {len(Xq)} points: predicted noise sd {self.noise_scale_:.3g} exceeds the "
                f"declared outcome range {span:g}",
                "query fewer points, raise epsilon, use second_stage='functional' (or allow_noise_above_range=True)",
            )
        noisy = mechanisms.perturb("gaussian", self._predict(Xq), self.noise_scale_, rng=self.noise_rng)
        return PrivateRelease(Xq, noisy, self.epsilon_, self.delta_)

    # ---- functional release (Theorem 3) ---------------------------------------------------
    def function_noise_scale(self) -> tuple[float, float]:
        """(used, paper's) noise scale on the unit-height GP, from Theorem 3.

        Paper: r = sup rho * 4 L sqrt(2 ln(2/delta)) / ((sqrt(2 pi) h)^q lambda n eps) on a GP with
        covariance (sqrt(2 pi) h)^-q exp(...). With lambda_paper = kappa^2 * ridge (kappa^2 =
        (sqrt(2 pi) h)^-q, the same regression) this is sqrt(kappa^2) * S on the unit-height GP,
        S = sup rho 4 L sqrt(2 ln(2/delta)) / (ridge n eps). The usual RKHS stability bound
        ||f_D - f_D'||_H <= sup w L kappa / (lambda n) gives S itself; we use the larger of the two.
        """
        n, q = self.X_.shape
        sup_rho = (1.0 - self.clip) ** 2 if self.learner == "r" else 1.0
        s = sup_rho * 4.0 * self.huber * np.sqrt(2.0 * np.log(2.0 / self.delta_)) / (self.ridge * n * self.epsilon_)
        kappa = (np.sqrt(2.0 * np.pi) * self.bandwidth_) ** (-q / 2.0)
        return float(s * max(1.0, kappa)), float(s * kappa)

    def release_function(self) -> PrivateCATEFunction:
        """The DP CATE function of Theorem 3 (batch and iterative queries, Algorithms 1-2).

        Its ``noise_scale`` depends only on n, eps, delta, ridge, huber and clip (not on the data).
        """
        if self.second_stage != "functional":
            raise InputError(
                "release_function() needs second_stage='functional'",
                "refit with second_stage='functional' (Huber-loss Gaussian-kernel ridge)",
            )
        self._check_fitted()
        self._charge("second_stage", f"dp_cate_function_{self.learner}", {"bandwidth": self.bandwidth_})
        return PrivateCATEFunction(self, self.function_noise_scale()[0], self.noise_rng)
