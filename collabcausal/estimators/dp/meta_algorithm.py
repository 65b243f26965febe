"""Differentially private CATE learners: paper 000's meta-algorithm with DP-EBM base learners.

Paper 000, Algorithm 1 (and Algorithm 2 for the DR-learner): the sample is split uniformly at
random into disjoint parts, one per first-stage module and one for the second stage (default
(0.25, 0.25, 0.5) for DR and R); each module is (eps, delta)-DP on its own part, the data
transformation between the stages is 1-stable, so by parallel composition (Theorem 3.3,
Remark 3.4) the whole release (e^, mu^, tau^) is (eps, delta)-DP. The S-learner has one module on
the whole sample.

Base learners are interpret's DP-EBMs (Nori et al. 2021). Their privacy needs public bounds:
every feature's range (``privacy_bounds``) and, for regressions, the target's range
(``privacy_target_min`` / ``privacy_target_max``); without them interpret would read the ranges
off the private data. The adapters here always pass declared bounds and clip inputs and targets to
them (clipping is per-record post-processing of the data, so it does not change the DP argument).
interpret calibrates for add/remove one record; the adapters ask it for the budget converted to
substitution (:func:`substitution_dp_ebm_budget`), and refuse ``sample_weight``, which interpret
would read off the data (the DP R-learner's final stage is therefore fitted unweighted).

Target bounds of the second stage follow from the declared outcome range [lo, hi] and the
propensity clip c: |psi_DR| <= (hi - lo)(1 + 1/c) and |Y~/T~|_R <= (hi - lo)/c. Users may declare
tighter pseudo-outcome bounds (values are clipped to them: biased where clipped, still DP).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.optimize import brentq
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin

from collabcausal.errors import InputError, PolicyError
from collabcausal.estimators.dp import mechanisms
from collabcausal.estimators.dp.clipping import clipping_warnings, count_outside
from collabcausal.estimators.metalearners import DRLearner, RLearner, SLearner
from collabcausal.estimators.metalearners.splits import check_arms, sklearn_seed
from collabcausal.estimators.validation import (
    check_binary_labels,
    check_bounds,
    check_delta,
    check_epsilon,
    check_is_fitted,
    check_matrix,
)
from collabcausal.estimators.validation import check_treatment as _check_treatment
from collabcausal.estimators.validation import check_vector as _check_vector
from collabcausal.randomness import SeedLike

Learner = Literal["dr", "r", "s"]
DEFAULT_SPLIT = (0.25, 0.25, 0.5)
DEFAULT_DP_CLIP = 0.1


INTERPRET_BIN_BUDGET_FRAC = 0.1
"""interpret's default share of epsilon spent on private binning (the rest goes to boosting)."""

SUBSTITUTION_FACTOR_BINNING = math.sqrt(2.0)
SUBSTITUTION_FACTOR_BOOSTING = 2.0


def gdp_mu(epsilon: float, delta: float) -> float:
    """The mu of a mu-GDP mechanism that is exactly (epsilon, delta)-DP.

    Dong, Roth & Su (2022), Corollary 2.13: mu-GDP is (eps, delta(eps))-DP for all eps with
    delta(eps) = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2), the Balle & Wang (2018) curve of
    a Gaussian with sensitivity 1 and sd 1/mu; so mu = 1 / analytic_gaussian_sigma(1, eps, delta)
    (rounded down by the 1e-9 safety factor of that function).
    """
    return 1.0 / mechanisms.analytic_gaussian_sigma(1.0, epsilon, delta)


def gdp_epsilon(mu: float, delta: float) -> float:
    """The smallest epsilon at which a mu-GDP mechanism is (epsilon, delta)-DP (inverse of :func:`gdp_mu`)."""
    if mechanisms.gaussian_delta(1.0 / mu, 1.0, 0.0) <= delta:
        raise InputError(f"mu {mu:g} is (0, {delta:g})-DP already", "ask for a smaller delta")
    hi = 1.0
    while mechanisms.gaussian_delta(1.0 / mu, 1.0, hi) > delta:
        hi *= 2.0
    return float(brentq(lambda e: mechanisms.gaussian_delta(1.0 / mu, 1.0, e) - delta, 0.0, hi, xtol=1e-14, rtol=1e-13))


def substitution_dp_ebm_budget(epsilon: float, delta: float) -> tuple[float, float]:
    """The (epsilon, bin_budget_frac) to give interpret so that DP-EBM is (epsilon, delta)-DP under substitution.

    interpret (0.7) calibrates DP-EBM (Nori et al. 2021, Algorithm 2) for add/remove-one-record with
    Gaussian-DP accounting, in two parts: private binning gets eps_b = f eps and delta/2
    (f = ``bin_budget_frac``; noise sd sqrt(d)/mu(eps_b, delta/2) on d per-feature histograms of
    L2 sensitivity 1), boosting gets eps_t = (1 - f) eps and delta/2 (sd sqrt(T) R lr /
    mu(eps_t, delta/2) on T per-bin residual sums of sensitivity R lr, R the target range, 1 for
    classifiers); the parts compose basically to (eps, delta).

    Proof sketch for substitution (the project's relation). A Gaussian query with L2 sensitivity
    k Delta and noise calibrated for Delta is (k mu)-GDP where the add/remove query was mu-GDP, and
    GDP composes as sqrt(sum mu_i^2), so each part's mu scales by its factor k:

    * binning: a substituted record leaves one histogram cell and enters another: the change is
      e_a - e_b, L2 norm sqrt(2) (0 if a = b); k = sqrt(2);
    * boosting: its residual r1 leaves bin a, the new residual r2 (|r1|, |r2| <= R) enters bin b:
      sqrt(r1^2 + r2^2) <= sqrt(2) R if a != b, but |r2 - r1| <= 2R if a = b; k = 2.

    Each part therefore needs interpret's mu to be mu(part's eps, delta/2) / k. We ask interpret
    for eps'_b = gdp_epsilon(mu(f eps, delta/2) / sqrt(2), delta/2) and eps'_t = gdp_epsilon(mu((1 - f)
    eps, delta/2) / 2, delta/2) through ``epsilon = eps'_b + eps'_t`` and ``bin_budget_frac =
    eps'_b / (eps'_b + eps'_t)``: interpret's own calibration then adds exactly the noise a
    substitution-calibrated Gaussian needs, and the release is (f eps + (1 - f) eps, delta/2 +
    delta/2) = (eps, delta)-DP under substitution. Residuals within |r| <= R are interpret's
    assumption (its add/remove proof rests on it too).

    Returns
    -------
    (epsilon, bin_budget_frac) : tuple of float
        The arguments for ``DPExplainableBoosting{Regressor,Classifier}``; ``delta`` is passed unchanged.
    """
    eps, half_delta = check_epsilon(epsilon), check_delta(delta) / 2.0
    f = INTERPRET_BIN_BUDGET_FRAC
    eps_bin = gdp_epsilon(gdp_mu(f * eps, half_delta) / SUBSTITUTION_FACTOR_BINNING, half_delta)
    eps_boost = gdp_epsilon(gdp_mu((1.0 - f) * eps, half_delta) / SUBSTITUTION_FACTOR_BOOSTING, half_delta)
    return eps_bin + eps_boost, eps_bin / (eps_bin + eps_boost)


def refuse_seeded_noise_with_ledger(seeded: bool) -> None:
    """A :class:`PolicyError` when a release with reproducible noise would be charged to a ledger.

    Seeded noise (``noise_seed``, ``noise_rng``) is for experiments: anyone holding the seed can
    subtract the noise, so the release is not DP and must never be recorded as a DP charge.
    """
    if seeded:
        raise PolicyError(
            "a release with reproducible noise (noise_seed / noise_rng) is not DP and cannot be charged to a ledger",
            "drop the noise seed (fresh OpenDP / interpret noise), or pass ledger=None for a seeded experiment",
        )


def _interpret_kwargs(epsilon: float, delta: float, bounds: Sequence[tuple[float, float]], n_jobs: int,
                      noise_seed: int | None) -> dict:
    interpret_epsilon, bin_budget_frac = substitution_dp_ebm_budget(epsilon, delta)
    return {
        "random_state": noise_seed,
        "epsilon": interpret_epsilon,
        "bin_budget_frac": bin_budget_frac,
        "delta": delta,
        "feature_types": ["continuous"] * len(bounds),
        "privacy_bounds": {j: (float(lo), float(hi)) for j, (lo, hi) in enumerate(bounds)},
        "n_jobs": n_jobs,
    }


def _fit_interpret(model, X: NDArray[np.float64], y: NDArray, noise_seed: int | None):
    """``model.fit(X, y)``; with a ``noise_seed`` the caller chose seeded noise (documented NOT private),
    so interpret's per-fit "Privacy violation: using a fixed random_state" warning is not repeated."""
    with warnings.catch_warnings():
        if noise_seed is not None:
            warnings.filterwarnings("ignore", message="Privacy violation: using a fixed random_state")
        return model.fit(X, y)


def _clip_features(X: ArrayLike, bounds: Sequence[tuple[float, float]]) -> NDArray[np.float64]:
    Xa = check_matrix(X, "X")
    if Xa.shape[1] != len(bounds):
        raise InputError(
            f"X has {Xa.shape[1]} columns but {len(bounds)} feature bounds were declared",
            "declare one (low, high) pair per covariate",
        )
    lo, hi = np.asarray(bounds, dtype=float).T
    return np.clip(Xa, lo, hi)


class DPEBMRegressor(RegressorMixin, BaseEstimator):
    """interpret's DPExplainableBoostingRegressor with declared, enforced bounds.

    Parameters
    ----------
    epsilon, delta : float
        The module's privacy parameters.
    feature_bounds : sequence of (low, high)
        Public range of every column of X (values outside are clipped).
    target_bounds : (low, high)
        Public range of the target (clipped; passed as privacy_target_min / max). Predictions are
        clipped to it as well (post-processing).
    n_jobs : int
        interpret's worker count (1 keeps shared machines responsive).
    noise_seed : int, optional
        Seed of interpret's noise. None (default) draws fresh noise; an int reproduces it, for
        seeded experiments only: NOT private.
    """

    def __init__(self, epsilon: float = 1.0, delta: float = 1e-5, feature_bounds=(), target_bounds=(0.0, 1.0),
                 n_jobs: int = 1, noise_seed: int | None = None) -> None:
        self.epsilon = epsilon
        self.delta = delta
        self.feature_bounds = feature_bounds
        self.target_bounds = target_bounds
        self.n_jobs = n_jobs
        self.noise_seed = noise_seed

    def fit(self, X: ArrayLike, y: ArrayLike, sample_weight: ArrayLike | None = None) -> DPEBMRegressor:
        """Fit on clipped data. ``sample_weight`` is refused: interpret would leak it.

        interpret scales DP-EBM's noise by the observed ``max(sample_weight)`` and places private
        bin edges with the exact weight sum, both functions of the private data (issue 11, item 2).
        """
        from interpret.privacy import DPExplainableBoostingRegressor

        if sample_weight is not None:
            raise PolicyError(
                "DP-EBM refuses sample_weight: interpret scales its noise by the observed max weight, which leaks it",
                "fit unweighted (the DP R-learner regresses Y~/T~ without weights)",
            )
        lo, hi = check_bounds(self.target_bounds, "target_bounds")
        model = DPExplainableBoostingRegressor(
            **_interpret_kwargs(self.epsilon, self.delta, self.feature_bounds, self.n_jobs, self.noise_seed),
            privacy_target_min=lo,
            privacy_target_max=hi,
        )
        self.model_ = _fit_interpret(model, _clip_features(X, self.feature_bounds), np.clip(y, lo, hi), self.noise_seed)
        return self

    def predict(self, X: ArrayLike) -> NDArray[np.float64]:
        lo, hi = self.target_bounds
        return np.clip(self.model_.predict(_clip_features(X, self.feature_bounds)), lo, hi)


class DPEBMClassifier(ClassifierMixin, BaseEstimator):
    """interpret's DPExplainableBoostingClassifier with declared, enforced feature bounds (parameters as
    :class:`DPEBMRegressor`)."""

    def __init__(self, epsilon: float = 1.0, delta: float = 1e-5, feature_bounds=(), n_jobs: int = 1,
                 noise_seed: int | None = None) -> None:
        self.epsilon = epsilon
        self.delta = delta
        self.feature_bounds = feature_bounds
        self.n_jobs = n_jobs
        self.noise_seed = noise_seed

    def fit(self, X: ArrayLike, y: ArrayLike) -> DPEBMClassifier:
        """Fit on clipped data; a target of one class (a one-arm split) is refused before interpret runs."""
        from interpret.privacy import DPExplainableBoostingClassifier

        check_binary_labels(y, "y")

        model = DPExplainableBoostingClassifier(**_interpret_kwargs(self.epsilon, self.delta, self.feature_bounds,
                                                                    self.n_jobs, self.noise_seed))
        self.model_ = _fit_interpret(model, _clip_features(X, self.feature_bounds), np.asarray(y).astype(int),
                                     self.noise_seed)
        self.classes_ = self.model_.classes_
        return self

    def predict_proba(self, X: ArrayLike) -> NDArray[np.float64]:
        return self.model_.predict_proba(_clip_features(X, self.feature_bounds))

    def predict(self, X: ArrayLike) -> NDArray:
        return self.model_.predict(_clip_features(X, self.feature_bounds))


def _check_feature_bounds(feature_bounds) -> list[tuple[float, float]]:
    if feature_bounds is None or len(feature_bounds) == 0:
        raise InputError("feature_bounds were not declared", "declare a public (low, high) range for every covariate")
    return [check_bounds(b, f"feature_bounds[{j}]") for j, b in enumerate(feature_bounds)]


def pseudo_outcome_bound(learner: Learner, outcome_bounds: tuple[float, float], clip: float) -> float:
    """Worst-case |second-stage target| from the outcome range and the propensity clip c.

    DR: |mu1 - mu0| + |Y - mu|/c <= (hi - lo)(1 + 1/c); R: |Y~ / T~| <= (hi - lo)/c.
    """
    span = outcome_bounds[1] - outcome_bounds[0]
    return span * (1 + 1 / clip) if learner == "dr" else span / clip


class DPCATELearner(BaseEstimator):
    """Paper 000's (eps, delta)-DP CATE learner with DP-EBM base learners (Algorithms 1-2).

    Parameters
    ----------
    learner : {"dr", "r", "s"}
    epsilon, delta : float
        Privacy of the whole release (each module gets the same (eps, delta); parallel composition).
    feature_bounds : sequence of (low, high)
        Public range of every covariate.
    outcome_bounds : (low, high)
        Public range of Y (required: the sensitivity is undefined without it).
    split : (float, float, float)
        Disjoint split fractions (propensity, outcome, final) for DR and R.
    clip : float
        Propensity clip c.
    pseudo_outcome_bounds : (low, high), optional
        Declared range of the second-stage target; default the worst case of
        :func:`pseudo_outcome_bound`.
    ledger : optional
        A :class:`collabcausal.ledger.PrivacyLedger`; charged (eps, delta) once, before fitting.
    random_state : int or Generator, optional
        Seed of the sample split (the split is not a release).
    n_jobs : int
        interpret's worker count per model.
    noise_seed : int, optional
        Seed of the DP-EBMs' noise (module k gets ``noise_seed + k``). None (default) draws fresh
        noise; an int reproduces it, for seeded experiments only: NOT private, so refused with a
        ``ledger`` (:func:`refuse_seeded_noise_with_ledger`).

    Attributes
    ----------
    clipping_ : tuple of ClipCount
        How many outcomes, covariate rows and (DR, R) second-stage targets the declared bounds
        clipped (:mod:`collabcausal.estimators.dp.clipping`; not DP: the data holder's diagnostic).
    warnings_ : tuple of str
        One line per count above 5%, also issued as a ``ClippingWarning``.
    """

    def __init__(
        self,
        learner: Learner = "dr",
        *,
        epsilon: float,
        delta: float = 1e-5,
        feature_bounds: Sequence[tuple[float, float]] | None = None,
        outcome_bounds: tuple[float, float] | None = None,
        split: Sequence[float] = DEFAULT_SPLIT,
        clip: float = DEFAULT_DP_CLIP,
        pseudo_outcome_bounds: tuple[float, float] | None = None,
        ledger=None,
        random_state: SeedLike = None,
        n_jobs: int = 1,
        noise_seed: int | None = None,
    ) -> None:
        self.learner = learner
        self.epsilon = epsilon
        self.delta = delta
        self.feature_bounds = feature_bounds
        self.outcome_bounds = outcome_bounds
        self.split = split
        self.clip = clip
        self.pseudo_outcome_bounds = pseudo_outcome_bounds
        self.ledger = ledger
        self.random_state = random_state
        self.n_jobs = n_jobs
        self.noise_seed = noise_seed

    def _build(self, eps: float, delta: float, fb: list, ob: tuple[float, float]):
        kw = {"epsilon": eps, "delta": delta, "n_jobs": self.n_jobs}

        def seed(k: int) -> int | None:
            return None if self.noise_seed is None else int(self.noise_seed) + k

        if self.learner == "s":
            return SLearner(DPEBMRegressor(feature_bounds=[*fb, (0.0, 1.0)], target_bounds=ob, noise_seed=seed(0),
                                           **kw))
        if self.pseudo_outcome_bounds is None:
            bound = pseudo_outcome_bound(self.learner, ob, self.clip)
            pb = (-bound, bound)
        else:
            pb = check_bounds(self.pseudo_outcome_bounds, "pseudo_outcome_bounds")
        propensity = DPEBMClassifier(feature_bounds=fb, noise_seed=seed(0), **kw)
        final = DPEBMRegressor(feature_bounds=fb, target_bounds=pb, noise_seed=seed(2), **kw)
        common = {"split": tuple(self.split), "clip": self.clip, "random_state": self.random_state}
        if self.learner == "dr":
            outcome = DPEBMRegressor(feature_bounds=[*fb, (0.0, 1.0)], target_bounds=ob, noise_seed=seed(1), **kw)
            return DRLearner(propensity, outcome, final, **common)
        outcome = DPEBMRegressor(feature_bounds=fb, target_bounds=ob, noise_seed=seed(1), **kw)
        return RLearner(outcome, propensity, final, weighted=False, **common)

    def fit(self, Y: ArrayLike, T: ArrayLike, *, X: ArrayLike) -> DPCATELearner:
        """Charge the ledger (eps, delta) once, then run the split learner."""
        if self.learner not in ("dr", "r", "s"):
            raise InputError(f"unknown learner {self.learner!r}", "use 'dr', 'r' or 's'")
        eps, delta = check_epsilon(self.epsilon), check_delta(self.delta)
        fb = _check_feature_bounds(self.feature_bounds)
        if self.outcome_bounds is None:
            raise InputError(
                "outcome_bounds were not declared: the sensitivity of every outcome model is undefined",
                "declare a public (low, high) range for Y, e.g. outcome_bounds=(0, 1)",
            )
        ob = check_bounds(self.outcome_bounds, "outcome_bounds")
        model = self._build(eps, delta, fb, ob)
        n = check_matrix(X, "X").shape[0]
        _check_vector(Y, "Y", n=n)  # validated before the charge, not inside the learners after it
        t = _check_treatment(T, "T", n=n)
        if self.learner != "s":
            model.set_params(random_state=sklearn_seed(self.random_state))  # fit re-draws the plan checked here
            check_arms(t, model.plan(n), model.arm_nuisances)
        if self.ledger is not None:
            refuse_seeded_noise_with_ledger(self.noise_seed is not None)
            self.ledger.charge(
                f"dp_cate_meta_{self.learner}",
                eps,
                delta,
                details={"paper": "000", "split": list(self.split) if self.learner != "s" else [1.0]},
            )
        self.model_ = model.fit(Y, T, X=X)
        self._report_clipping(Y, fb, ob, model)
        return self

    def _report_clipping(self, Y: ArrayLike, fb: list, ob: tuple[float, float], model) -> None:
        """``clipping_`` (outcomes, covariate rows, second-stage targets) and ``warnings_`` (> 5% clipped).

        Counts of the private data: a diagnostic for the data holder, NOT part of the DP release.
        """
        counts = [count_outside(Y, ob, "outcomes"), count_outside(model.X_train_, fb, "covariate rows")]
        if self.learner != "s":
            target = model.model_final_.target_bounds
            counts.append(count_outside(model.pseudo_outcome_, target, "second-stage pseudo-outcomes"))
        self.clipping_ = tuple(counts)
        self.warnings_ = clipping_warnings(self.clipping_)

    def effect(self, X: ArrayLike) -> NDArray[np.float64]:
        """tau^(x) (post-processing of the DP release)."""
        check_is_fitted(self, "model_", "fit(Y, T, X=...)")
        return self.model_.effect(X)

    def ate(self, X: ArrayLike) -> float:
        """Mean of tau^ over the given (public or already released) covariates."""
        return float(np.mean(self.effect(X)))
