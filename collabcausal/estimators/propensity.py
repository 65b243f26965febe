"""Propensity scores by logistic regression, solved to the optimum by Newton's method.

Paper 003 estimates e(x) = P(T = 1 | x) by a logistic regression on ``[1, X]`` (eq. 32, with the
collaborative representation in place of X). Collaborative representations are badly scaled (the
anchor's singular values grow like sqrt(r)), and a first-order solver stopped by a gradient
tolerance then returns an under-fitted model without complaint. :class:`LogisticPropensity`
therefore fits in whitened coordinates (centred, column-scaled, rotated and scaled by the SVD so
that the design has identity covariance), where Newton's method with a backtracking line search
converges in a handful of iterations whatever the scale of the input, and it raises
:class:`~collabcausal.errors.NumericalError` instead of returning a model that did not converge.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.special import expit
from sklearn.base import BaseEstimator, ClassifierMixin

from collabcausal.errors import InputError, NumericalError
from collabcausal.estimators.blocks import AffineDesign, centred_gram, column_means
from collabcausal.estimators.small_systems import solve
from collabcausal.estimators.validation import (
    check_binary_labels,
    check_bounds,
    check_features,
    check_is_fitted,
    check_vector,
)

_RANK_TOL = 1e-10  # relative singular-value cut below which columns count as collinear
_GRAM_TOL = 1e-12  # eigenvalue ratio of the Gram matrix above which its whitening is accurate
_SEPARATION_TOL = 1e-6  # every fitted propensity this close to the observed arm: complete separation
_OPEN_INTERVAL = (float(np.finfo(np.float64).tiny), float(np.nextafter(1.0, 0.0)))
"""Smallest and largest propensity: expit rounds a logit below -745 (above 37) to exactly 0 (1)."""


class LogisticPropensity(ClassifierMixin, BaseEstimator):
    """Logistic-regression propensity model P(T = 1 | x) fitted by Newton/IRLS.

    A scikit-learn binary classifier of the treatment (classes 0 and 1): ``predict_proba`` gives
    both columns, ``predict_propensity`` the treated column alone (the propensity score).

    Minimizes ``sum_k [log(1 + exp(eta_k)) - t_k eta_k] + (penalty / 2) ||coef||^2`` with
    ``eta = intercept + X coef`` (paper 003, eq. 32; the intercept is never penalized, so
    ``penalty = 1 / C`` matches scikit-learn's ``LogisticRegression(C=C)``).

    Parameters
    ----------
    penalty : float, default 0.0
        L2 strength on the coefficients in the original feature scale; 0 is the unpenalized
        maximum-likelihood fit (the paper's choice).
    fit_intercept : bool, default True
        Include the constant term.
    clip : (float, float) or None, default None
        Bounds applied to the predicted propensities, e.g. ``(0.01, 0.99)``.
    max_iter : int, default 100
        Maximum Newton iterations.
    tol : float, default 1e-10
        Convergence threshold on half the squared Newton decrement of the mean log-loss in the
        whitened coordinates (a bound on the sub-optimality of the mean loss, scale-free).

    Attributes
    ----------
    coef_ : ndarray of shape (m,)
        Coefficients in the original feature scale.
    intercept_ : float
        Intercept in the original feature scale (0.0 without an intercept).
    n_iter_ : int
        Newton iterations used.
    converged_ : bool
        True after a successful fit (a failed fit raises).
    classes_ : ndarray of shape (2,)
        The two labels of ``y``, control first: ``[0, 1]`` for a treatment coded 0/1.
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        Column names, when fitted on a DataFrame with string column names.

    Notes
    -----
    Fitted probabilities are invariant to invertible affine maps of X (unpenalized, with an
    intercept), which is what makes single-party DC-QE equal centralized analysis. An unpenalized
    fit that puts every subject within 1e-6 of its own arm is reported as complete separation
    (the maximum-likelihood estimate does not exist). Extreme propensities of some subjects only
    (quasi-complete separation, or legitimately extreme covariates such as LaLonde's PSID
    controls) are not an error: use ``clip`` and the balance diagnostics.
    """

    def __init__(
        self,
        penalty: float = 0.0,
        fit_intercept: bool = True,
        clip: tuple[float, float] | None = None,
        max_iter: int = 100,
        tol: float = 1e-10,
    ) -> None:
        self.penalty = penalty
        self.fit_intercept = fit_intercept
        self.clip = clip
        self.max_iter = max_iter
        self.tol = tol

    def fit(
        self, X: ArrayLike, y: ArrayLike, *, start_logit: ArrayLike | None = None, check_input: bool = True
    ) -> LogisticPropensity:
        """Fit the model on covariates ``X`` (n x m) and the treatment ``y``; returns self.

        ``y`` holds two labels (the treatment coded 0/1, or any two values as in scikit-learn);
        the larger one, ``classes_[1]``, is the treated arm whose probability is the propensity.

        ``start_logit`` (n,), optional, is a guess of the fitted logits, such as those of the
        full-sample fit for the subjects of a bootstrap resample: Newton starts from its
        least-squares projection onto the design (``D' start / n``: the whitened design has
        ``D'D = n I``) when that has a lower loss than the usual start (the intercept at the
        observed log-odds). The optimum is the same to the tolerance; on LaLonde's bootstrap
        replicates the iterations halve (8-9 to 4, issue 24).

        ``check_input=False`` (as scikit-learn's trees take it) skips the checks of ``X``, ``y`` and
        ``start_logit`` for a caller that made them: ``X`` a finite float64 matrix (as
        :func:`~collabcausal.estimators.validation.check_features` returns it, column names then
        recorded by that call), ``y`` a treatment as
        :func:`~collabcausal.estimators.validation.check_treatment` returns it (0/1, both arms) and
        ``start_logit`` a finite float64 vector of one entry per row.
        """
        self._check_params()
        if check_input:
            X = check_features(self, X, reset=True)
            self.classes_, t = check_binary_labels(y, "y", n=X.shape[0])
            start = None if start_logit is None else check_vector(start_logit, "start_logit", n=X.shape[0])
        else:
            self.n_features_in_ = X.shape[1]
            self.classes_, t, start = np.array([0, 1], dtype=y.dtype), y.astype(np.float64), start_logit
        n, m = X.shape
        center = column_means(X) if self.fit_intercept else np.zeros(m)
        gram = centred_gram(X, center)
        scale = np.sqrt(np.diag(gram) / n)
        scale[scale == 0.0] = 1.0
        W = self._whitening(X, center, gram, scale) / scale[:, None]  # original (centred) scale -> whitened
        D = AffineDesign(X, center, W, self.fit_intercept)  # [1, (X - center) W], never formed
        first = int(self.fit_intercept)
        P = self.penalty * (W.T @ W) if self.penalty > 0.0 else None  # ||coef||^2 = gamma' W'W gamma
        theta, n_iter = _newton(D, t, P, self.fit_intercept, self.max_iter, self.tol, start)
        gamma = theta[first:]
        b0 = theta[0] if self.fit_intercept else 0.0
        # Complete separation: the MLE does not exist and every subject is fitted to its own arm.
        # Extreme propensities of a few subjects alone are legitimate (e.g. LaLonde's PSID
        # controls with high earnings reach 1e-27) and are left to clipping and diagnostics.
        if self.penalty == 0.0 and _fitted_to_own_arm(D, theta, t):
            raise NumericalError(
                "the treatment is completely separated by the covariates: every subject gets a fitted "
                "propensity of 0 or 1 and the maximum-likelihood estimate does not exist",
                "drop or coarsen the covariates that predict treatment perfectly, or set penalty > 0",
            )
        self.coef_ = W @ gamma
        self.intercept_ = float(b0 - center @ self.coef_)
        self.n_iter_ = n_iter
        self.converged_ = True
        return self

    def decision_function(self, X: ArrayLike, check_input: bool = True) -> NDArray[np.float64]:
        """The linear predictor (logit of the propensity) ``intercept_ + X coef_``.

        ``check_input=False`` skips the checks of the fit and of ``X`` (the fitted model's finite
        float64 covariates, as :meth:`fit` takes them with ``check_input=False``).
        """
        if check_input:
            check_is_fitted(self, "coef_", "fit(X, t)")
            X = check_features(self, X, reset=False)
        return self.intercept_ + X @ self.coef_

    def predict_propensity(self, X: ArrayLike, check_input: bool = True) -> NDArray[np.float64]:
        """Propensity scores P(T = 1 | x), shape (n,), clipped to ``clip`` when given
        (``check_input`` as in :meth:`decision_function`).

        Always strictly inside (0, 1): under quasi-complete separation the logit of the separated
        subjects diverges (LaLonde's B-clb bootstrap resamples reach -4480), and expit rounds it to
        exactly 0 or 1, which the estimators refuse. Those subjects' propensities are kept at the
        smallest positive double (or the largest below 1), the limit the fit tends to: their
        weight in every estimator is then negligible, as in the limit.
        """
        e = expit(self.decision_function(X, check_input))
        lo, hi = _OPEN_INTERVAL if self.clip is None else self.clip
        return np.clip(e, lo, hi, out=e)

    def predict_proba(self, X: ArrayLike) -> NDArray[np.float64]:
        """Class probabilities as in scikit-learn, shape (n, 2): ``[1 - e(x), e(x)]`` (control, treated)."""
        e = self.predict_propensity(X)
        return np.column_stack([1.0 - e, e])

    def predict(self, X: ArrayLike) -> NDArray:
        """The more likely arm, a label of ``classes_`` (treated when the propensity exceeds 1/2)."""
        treated = self.decision_function(X) > 0.0
        return self.classes_[treated.astype(np.intp)]

    def __sklearn_tags__(self):  # scikit-learn's estimator tags
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = False  # a propensity model: two arms
        return tags

    def _check_params(self) -> None:
        if not (np.isfinite(self.penalty) and self.penalty >= 0.0):
            raise InputError(f"penalty must be a finite number >= 0, got {self.penalty!r}", "pass e.g. 0.0 or 1.0")
        if int(self.max_iter) < 1:
            raise InputError(f"max_iter must be >= 1, got {self.max_iter!r}", "pass e.g. max_iter=100")
        if not (np.isfinite(self.tol) and self.tol > 0.0):
            raise InputError(f"tol must be a finite number > 0, got {self.tol!r}", "pass e.g. tol=1e-10")
        if self.clip is not None:
            lo, hi = check_bounds(self.clip, "clip")
            if lo <= 0.0 or hi >= 1.0:
                raise InputError(f"clip must lie inside (0, 1), got {self.clip!r}", "pass e.g. clip=(0.01, 0.99)")

    def _whitening(
        self, X: NDArray[np.float64], center: NDArray[np.float64], gram: NDArray[np.float64], scale: NDArray[np.float64]
    ) -> NDArray[np.float64]:
        """W with ``((X - center) / scale) W`` of identity covariance; identity for rank-deficient penalized fits.

        ``gram`` is ``(X - center)' (X - center)`` (:func:`~collabcausal.estimators.blocks.centred_gram`).
        """
        n, m = X.shape
        if m == 0:
            return np.zeros((0, 0))
        lam, V = np.linalg.eigh((gram / n) / np.outer(scale, scale))  # fast path: the Gram matrix is well conditioned
        if lam[0] > _GRAM_TOL * lam[-1]:
            return V / np.sqrt(lam)
        _, s, Vt = np.linalg.svd((X - center) / scale, full_matrices=False)  # accurate rank decision
        rank_ok = s.size == m and s[-1] > _RANK_TOL * s[0]
        if rank_ok:
            return Vt.T * (np.sqrt(n) / s)
        if self.penalty > 0.0:
            return np.eye(m)
        raise NumericalError(
            f"the covariates are collinear (rank {int(np.sum(s > _RANK_TOL * s[0]))} of {m} columns"
            f"{' plus the intercept' if self.fit_intercept else ''}, {n} subjects)",
            "drop redundant or constant columns, or set penalty > 0",
        )


def _newton(
    D: AffineDesign,
    t: NDArray[np.float64],
    P: NDArray[np.float64] | None,
    intercept: bool,
    max_iter: int,
    tol: float,
    start_logit: NDArray[np.float64] | None = None,
) -> tuple[NDArray[np.float64], int]:
    """Damped Newton on the mean penalized log-loss over the design D (its first column 1 with an intercept).

    ``P`` is the penalty matrix of the coefficients after the intercept (None: unpenalized, whose
    terms are then skipped rather than added as zeros). Starts from the intercept at the observed
    log-odds, or from the projection ``D' start_logit / n`` when its loss is lower. Returns
    (theta, iterations) or raises.
    """
    n, k = D.shape
    Pfull = None
    if P is not None:
        Pfull = np.zeros((k, k))
        Pfull[k - P.shape[0] :, k - P.shape[0] :] = P
    theta = np.zeros(k)
    if intercept:
        p1 = t.sum() / n
        theta[0] = np.log(p1 / (1.0 - p1))

    def loss(th: NDArray[np.float64], eta: NDArray[np.float64]) -> float:
        mean = (_softplus(eta) - t * eta).sum() / n
        return float(mean if Pfull is None else mean + 0.5 * th @ Pfull @ th / n)

    eta = np.full(n, theta[0])  # D theta for theta = (intercept or 0, 0, ..., 0), as D.dot gives it exactly
    f = loss(theta, eta)
    if start_logit is not None:
        guess = D.tdot(start_logit) / n
        eta_guess = D.dot(guess)
        f_guess = loss(guess, eta_guess)
        if f_guess < f:
            theta, eta, f = guess, eta_guess, f_guess
    for it in range(1, int(max_iter) + 1):
        grad, hess = _score_and_information(D, eta, t)
        if Pfull is not None:
            grad += Pfull @ theta
            hess += Pfull
        grad /= n
        hess /= n
        try:
            descent = solve(hess, grad)  # minus the Newton step
        except np.linalg.LinAlgError:
            descent = np.linalg.lstsq(hess, grad, rcond=None)[0]
        decrement = float(grad @ descent)
        if not math.isfinite(decrement):
            raise NumericalError(
                "the logistic-regression Newton step is not finite",
                "check the covariates for extreme values or separation, or set penalty > 0",
            )
        if decrement / 2.0 <= tol:
            return theta - descent, it
        eta_descent = D.dot(descent)
        size = 1.0
        candidate, eta_new = theta - descent, eta - eta_descent  # the full step, the one usually taken
        while True:
            f_new = loss(candidate, eta_new)
            if f_new <= f - 0.25 * size * decrement:
                break
            size *= 0.5
            if size < 1e-12:
                raise NumericalError(
                    "the logistic-regression line search failed (no decrease along the Newton step)",
                    "check the covariates for extreme values, or drop one that separates the arms",
                )
            candidate, eta_new = theta - size * descent, eta - size * eta_descent
        theta, eta, f = candidate, eta_new, f_new
    raise NumericalError(
        f"the logistic regression did not converge in {max_iter} Newton iterations",
        "drop covariates that separate the arms (or, in Python, allow more iterations or a penalty)",
    )


def _score_and_information(
    D: AffineDesign, eta: NDArray[np.float64], t: NDArray[np.float64]
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """``D' (p - t)`` and ``D' diag(p (1 - p)) D`` with ``p = expit(eta)``, in one pass over D's blocks."""
    grad = hess = None
    for rows, block in D.blocks():
        p = expit(eta[rows])
        block_grad = (p - t[rows]) @ block
        p *= 1.0 - p  # the weights p (1 - p)
        block_hess = block.T @ (block * p[:, None])
        if grad is None:  # the first (for n <= GRAM_BLOCK the only) block: no sums of zeros
            grad, hess = block_grad, block_hess
        else:
            grad += block_grad
            hess += block_hess
    return grad, hess


def _fitted_to_own_arm(D: AffineDesign, theta: NDArray[np.float64], t: NDArray[np.float64]) -> bool:
    """Whether every subject's fitted propensity ``expit(D theta)`` is within ``_SEPARATION_TOL`` of its arm.

    Block by block of rows, stopping at the first block with a subject that is not (the usual
    case, so a fit that is not separated pays for one block only).
    """
    return all(np.all(np.abs(expit(block @ theta) - t[rows]) < _SEPARATION_TOL) for rows, block in D.blocks())


def _softplus(eta: NDArray[np.float64]) -> NDArray[np.float64]:
    """``log(1 + exp(eta))`` without overflow, as ``log1p(exp(-|eta|)) + max(eta, 0)``.

    The same values as ``np.logaddexp(0.0, eta)`` to an ulp, in a sixth of its time (numpy's
    ``exp`` and ``log1p`` are vectorized, ``logaddexp`` is not); the line search of :func:`_newton`
    compares these losses only.
    """
    out = np.abs(eta)
    np.negative(out, out=out)
    np.exp(out, out=out)
    np.log1p(out, out=out)
    out += np.maximum(eta, 0.0)
    return out
