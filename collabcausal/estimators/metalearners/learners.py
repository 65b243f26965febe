"""Meta-learners for the conditional average treatment effect tau(x) = E[Y(1) - Y(0) | X = x].

S-, T-, X- (Künzel et al. 2019), DR- (Kennedy 2020) and R-learners (Nie & Wager 2020) with any
scikit-learn-style base learners, in the API users know from EconML: ``fit(Y, T, X=...,
inference=None | "bootstrap")``, ``effect(X)``, ``effect_interval(X, alpha=)``, ``ate(X)``,
``ate_interval(X, alpha=)`` (each interval a ``(lower, upper)`` tuple), ``att()``, ``summary()`` and
``cate_feature_names()``. Every learner is a scikit-learn ``BaseEstimator`` (``clone``,
``get_params``/``set_params``); fitted on a DataFrame, it keeps the column names
(``feature_names_in_``) and uses them in ``summary()``.

The two-stage learners (DR, R) take a sample-splitting plan from
:mod:`collabcausal.estimators.metalearners.splits`: cross-fitting by default, or the disjoint
split of paper 000 (Algorithm 1) that the differentially private meta-algorithm relies on.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from sklearn.base import BaseEstimator, clone
from threadpoolctl import ThreadpoolController

from collabcausal.errors import InputError
from collabcausal.estimators.metalearners.inference import BootstrapInference, replicate
from collabcausal.estimators.metalearners.splits import Round, check_arms, cross_fit_plan, disjoint_plan
from collabcausal.estimators.results import EffectEstimate, wald_interval
from collabcausal.estimators.validation import check_features, check_is_fitted, check_treatment, check_vector
from collabcausal.randomness import SeedLike

if TYPE_CHECKING:
    import pandas as pd

DEFAULT_CLIP = 0.01


@cache
def _thread_pools() -> ThreadpoolController:
    """The process's BLAS/OpenMP thread pools, found once (a fresh search costs milliseconds per fit)."""
    return ThreadpoolController()


def _predict_proba(model, X: NDArray[np.float64]) -> NDArray[np.float64]:
    """P(T = 1 | X) from a classifier (``predict_proba``) or a regressor (``predict``)."""
    if hasattr(model, "predict_proba"):
        return np.asarray(model.predict_proba(X))[:, 1]
    return np.asarray(model.predict(X), dtype=float)


def _linear_final(learner: Any) -> NDArray[np.float64] | None:
    """``[intercept, coef...]`` of a learner's final model of tau^ when it is linear, else None."""
    final = getattr(learner, "model_final_", None)
    coef = getattr(final, "coef_", None)
    if coef is None or np.ndim(coef) != 1:
        return None
    return np.r_[float(getattr(final, "intercept_", 0.0)), np.asarray(coef, dtype=float)]


def _with_t(X: NDArray[np.float64], t: float | NDArray) -> NDArray[np.float64]:
    return np.column_stack([X, np.broadcast_to(np.asarray(t, dtype=float), (X.shape[0],))])


class _CATELearner(BaseEstimator):
    """Shared door checks, the EconML-style effects, averages and intervals, and the summary table.

    Subclasses implement ``_fit(Y, T, X)`` (returning self, setting ``X_train_``/``T_train_``)
    and ``_effect(X)`` on checked arrays.
    """

    def fit(
        self, Y: ArrayLike, T: ArrayLike, *, X: ArrayLike, inference: str | BootstrapInference | None = None
    ) -> _CATELearner:
        """Fit tau^ on outcomes ``Y``, treatment ``T`` (0/1) and covariates ``X``; returns self.

        Parameters
        ----------
        Y, T : array-like of shape (n,)
        X : array-like or DataFrame of shape (n, m)
            A DataFrame's column names are kept (``feature_names_in_``, ``summary()``).
        inference : None, "bootstrap" or BootstrapInference
            None: point estimates only (the DR-learner still has its analytic ATE interval).
            "bootstrap": EconML's bootstrap, 100 refits on resamples stratified by arm, pivot
            intervals; a :class:`BootstrapInference` sets the number, type, seed and workers.

        Notes
        -----
        The base learners are fitted with one BLAS thread: on the tall, narrow designs of a CATE
        learner (n subjects by a few covariates) a BLAS thread pool costs more than it saves, and
        on a loaded machine its waiting threads cost several times the fit (DR-learner, 10^5 x 10,
        2 cores: ``benchmarks/bench_drlearner.py``).
        """
        how = BootstrapInference.from_argument(inference)
        with _thread_pools().limit(limits=1, user_api="blas"):
            self._fit(Y, T, X)
        self.inference_ = how
        self.bootstrap_estimators_ = None if how is None else how.refit(self, *self._training_arrays(Y))
        return self

    def _training_arrays(self, Y: ArrayLike) -> tuple[NDArray, NDArray, NDArray]:
        return check_vector(Y, "Y", n=self.X_train_.shape[0]), self.T_train_, self.X_train_

    def _check_fit_input(self, Y: ArrayLike, T: ArrayLike, X: ArrayLike | None):
        if X is None:
            raise InputError("X is required for a CATE learner", "pass the covariates as X=...")
        Xa = check_features(self, X, reset=True)
        y = check_vector(Y, "Y", n=Xa.shape[0])
        t = check_treatment(T, "T", n=Xa.shape[0])
        return y, t, Xa

    def _fitted_check(self) -> None:
        check_is_fitted(self, "X_train_", "fit(Y, T, X=...)")

    def _check_query(self, X: ArrayLike) -> NDArray[np.float64]:
        self._fitted_check()
        return check_features(self, X, reset=False)

    def effect(self, X: ArrayLike) -> NDArray[np.float64]:
        """tau^(x) at each row of ``X``, shape (n,)."""
        return self._effect(self._check_query(X))

    def ate(self, X: ArrayLike | None = None) -> float:
        """Average of tau^ over ``X`` (default: the training covariates)."""
        self._fitted_check()
        return float(np.mean(self._effect(self.X_train_ if X is None else self._check_query(X))))

    def att(self) -> float:
        """Average of tau^ over the treated training subjects."""
        self._fitted_check()
        return float(np.mean(self._effect(self._treated_rows())))

    def effect_interval(self, X: ArrayLike, alpha: float = 0.05) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """``(lower, upper)`` bounds of tau^(x) at each row of ``X`` at level ``1 - alpha``, each shape (n,).

        Needs ``fit(..., inference="bootstrap")``.
        """
        Xq = self._check_query(X)
        boot = self._bootstrap("effect_interval")
        return self.inference_.interval(self._effect(Xq), replicate(boot, lambda est: est._effect(Xq)), alpha)

    def ate_interval(self, X: ArrayLike | None = None, alpha: float = 0.05) -> tuple[float, float]:
        """``(lower, upper)`` bounds of :meth:`ate` over ``X`` (default: the training covariates).

        From the bootstrap of ``fit(..., inference="bootstrap")``; without it, the DR-learner
        gives its analytic interval over the training subjects (:meth:`DRLearner.ate_inference`).
        """
        _, _, lower, upper = self._average_inference(None if X is None else self._check_query(X), alpha)
        if np.isnan(lower):
            self._bootstrap("ate_interval")
        return lower, upper

    def cate_feature_names(self) -> list[str]:
        """Covariate names, as EconML: the fitted DataFrame's columns, else ``X0, X1, ...``."""
        self._fitted_check()
        if hasattr(self, "feature_names_in_"):
            return [str(name) for name in self.feature_names_in_]
        return [f"X{j}" for j in range(self.n_features_in_)]

    def summary(self, alpha: float = 0.05) -> pd.DataFrame:
        """The fitted learner's estimates as a table, one row per quantity.

        Rows ``ate`` and ``att`` (averages of tau^ over the training subjects, all and treated),
        and, when the final model of tau^ is linear (``coef_``/``intercept_``, e.g. a
        ``LinearRegression`` final stage of the DR- or R-learner), ``cate_intercept`` and one
        ``cate_coef[<covariate>]`` row per covariate, named by :meth:`cate_feature_names`.
        Columns ``point_estimate``, ``stderr``, ``ci_lower``, ``ci_upper`` (level ``1 - alpha``);
        uncertainty is NaN where the learner was fitted without inference.
        """
        import pandas as pd

        self._fitted_check()
        rows = {
            "ate": self._average_inference(None, alpha),
            "att": self._average_inference(self._treated_rows(), alpha),
        }
        linear = _linear_final(self)
        if linear is not None:
            names = ["cate_intercept", *(f"cate_coef[{name}]" for name in self.cate_feature_names())]
            boot = self.bootstrap_estimators_
            reps = None if boot is None else replicate(boot, _linear_final)
            for j, name in enumerate(names):
                rows[name] = self._inference(linear[j], None if reps is None else reps[:, j], alpha)
        columns = ["point_estimate", "stderr", "ci_lower", "ci_upper"]
        table = pd.DataFrame.from_dict(rows, orient="index", columns=columns)
        table.index.name = f"{type(self).__name__} (n={self.X_train_.shape[0]}, alpha={alpha:g})"
        return table

    def _treated_rows(self) -> NDArray[np.float64]:
        return self.X_train_[self.T_train_ == 1]

    def _bootstrap(self, method: str) -> list[Any]:
        self._fitted_check()
        if self.bootstrap_estimators_ is None:
            raise InputError(
                f"{type(self).__name__}.{method} needs inference: the learner was fitted without it",
                'fit with inference="bootstrap" (or a BootstrapInference(...))',
            )
        return self.bootstrap_estimators_

    def _average_inference(self, X: NDArray | None, alpha: float) -> tuple[float, float, float, float]:
        """(point, stderr, lower, upper) of the mean of tau^ over ``X`` (None: the training subjects)."""
        Xq = self.X_train_ if X is None else X
        boot = self.bootstrap_estimators_
        reps = None if boot is None else replicate(boot, lambda est: est._effect(Xq).mean())
        return self._inference(float(self._effect(Xq).mean()), reps, alpha)

    def _inference(self, point: float, reps: NDArray | None, alpha: float) -> tuple[float, float, float, float]:
        if reps is None:
            return float(point), np.nan, np.nan, np.nan
        lower, upper = self.inference_.interval(point, reps, alpha)
        return float(point), float(reps.std(ddof=1)), lower, upper


class SLearner(_CATELearner):
    """One outcome model on (X, T); tau^(x) = mu^(x, 1) - mu^(x, 0) (Künzel et al. 2019).

    Parameters
    ----------
    overall_model : regressor
        Fitted on ``[X, T]`` with T as the last column.
    """

    def __init__(self, overall_model) -> None:
        self.overall_model = overall_model

    def _fit(self, Y: ArrayLike, T: ArrayLike, X: ArrayLike) -> SLearner:
        y, t, Xa = self._check_fit_input(Y, T, X)
        self.model_ = clone(self.overall_model).fit(_with_t(Xa, t), y)
        self.X_train_, self.T_train_ = Xa, t
        return self

    def _effect(self, X: NDArray[np.float64]) -> NDArray[np.float64]:
        return self.model_.predict(_with_t(X, 1.0)) - self.model_.predict(_with_t(X, 0.0))


class TLearner(_CATELearner):
    """One outcome model per arm; tau^(x) = mu^_1(x) - mu^_0(x) (Künzel et al. 2019)."""

    def __init__(self, models) -> None:
        self.models = models

    def _fit(self, Y: ArrayLike, T: ArrayLike, X: ArrayLike) -> TLearner:
        y, t, Xa = self._check_fit_input(Y, T, X)
        self.models_ = tuple(clone(self.models).fit(Xa[t == arm], y[t == arm]) for arm in (0, 1))
        self.X_train_, self.T_train_ = Xa, t
        return self

    def _effect(self, X: NDArray[np.float64]) -> NDArray[np.float64]:
        return self.models_[1].predict(X) - self.models_[0].predict(X)


class XLearner(_CATELearner):
    """X-learner (Künzel et al. 2019, eqs. 5-7).

    Stage 1 fits mu_0, mu_1 per arm; imputed effects D1 = Y - mu_0(X) (treated) and
    D0 = mu_1(X) - Y (controls) are regressed on X per arm; the two are blended with the
    propensity: tau^(x) = e(x) tau_0(x) + (1 - e(x)) tau_1(x).
    """

    def __init__(self, models, cate_models=None, propensity_model=None, clip: float = DEFAULT_CLIP) -> None:
        self.models = models
        self.cate_models = cate_models
        self.propensity_model = propensity_model
        self.clip = clip

    def _fit(self, Y: ArrayLike, T: ArrayLike, X: ArrayLike) -> XLearner:
        y, t, Xa = self._check_fit_input(Y, T, X)
        mu = [clone(self.models).fit(Xa[t == arm], y[t == arm]) for arm in (0, 1)]
        cate = self.models if self.cate_models is None else self.cate_models
        treated, control = t == 1, t == 0
        self.tau_ = (
            clone(cate).fit(Xa[control], mu[1].predict(Xa[control]) - y[control]),
            clone(cate).fit(Xa[treated], y[treated] - mu[0].predict(Xa[treated])),
        )
        if self.propensity_model is None:
            self.propensity_ = None
            self.treated_share_ = float(t.mean())
        else:
            self.propensity_ = clone(self.propensity_model).fit(Xa, t)
        self.X_train_, self.T_train_ = Xa, t
        return self

    def _effect(self, X: NDArray[np.float64]) -> NDArray[np.float64]:
        if self.propensity_ is None:
            e = np.full(X.shape[0], self.treated_share_)
        else:
            e = np.clip(_predict_proba(self.propensity_, X), self.clip, 1 - self.clip)
        return e * self.tau_[0].predict(X) + (1 - e) * self.tau_[1].predict(X)


class _TwoStageLearner(_CATELearner):
    """Nuisances per a splitting plan, then a final regression on transformed data.

    Subclasses name their nuisances, fit them on given rows and turn (Y, T, nuisance
    predictions) into the final stage's target and weights (paper 000, Algorithm 1: the data
    transformation T followed by the module B).
    """

    nuisance_names: tuple[str, ...] = ()
    arm_nuisances: tuple[str, ...] = ("propensity",)  # nuisances trained on T (need both arms: check_arms)
    weighted: bool = True  # pass the transform's weights (if any) to the final model

    def plan(self, n: int, T: ArrayLike | None = None) -> tuple[Round, ...]:
        """The splitting plan for ``n`` subjects (checks that every part is large enough).

        Cross-fitting folds are stratified on ``T`` when it is given (``fit`` always gives it), as
        in EconML; the disjoint split of paper 000 never is (see :mod:`.splits`).
        """
        if self.split is not None:
            return disjoint_plan(n, self.nuisance_names, self.split, self.random_state)
        return cross_fit_plan(n, self.nuisance_names, self.cv, self.random_state, strata=T)

    def _fit(self, Y: ArrayLike, T: ArrayLike, X: ArrayLike) -> _TwoStageLearner:
        y, t, Xa = self._check_fit_input(Y, T, X)
        self.plan_ = self.plan(Xa.shape[0], t)
        check_arms(t, self.plan_, self.arm_nuisances)
        self.nuisances_ = []
        rows, targets, weights = [], [], []
        for rnd in self.plan_:
            subsets = {}  # cross-fitting trains every nuisance on the same rows: one copy of them
            fitted = {}
            for name, idx in rnd.train.items():
                if id(idx) not in subsets:
                    subsets[id(idx)] = (Xa[idx], t[idx], y[idx])
                fitted[name] = self._fit_nuisance(name, *subsets[id(idx)])
            self.nuisances_.append(fitted)
            ev = rnd.evaluate
            target, weight = self._transform(fitted, Xa[ev], t[ev], y[ev])
            rows.append(ev)
            targets.append(target)
            weights.append(weight)
        order = np.concatenate(rows)
        self.final_rows_ = order
        self.pseudo_outcome_ = np.concatenate(targets)
        self.final_weights_ = None if weights[0] is None else np.concatenate(weights)
        final = clone(self.model_final)
        if self.final_weights_ is None or not self.weighted:
            final.fit(Xa[order], self.pseudo_outcome_)
        else:
            final.fit(Xa[order], self.pseudo_outcome_, sample_weight=self.final_weights_)
        self.model_final_ = final
        self.X_train_, self.T_train_ = Xa, t
        return self

    def _effect(self, X: NDArray[np.float64]) -> NDArray[np.float64]:
        return np.asarray(self.model_final_.predict(X), dtype=float)

    def _propensity(self, fitted: dict, X: NDArray[np.float64]) -> NDArray[np.float64]:
        return np.clip(_predict_proba(fitted["propensity"], X), self.clip, 1 - self.clip)


class DRLearner(_TwoStageLearner):
    """Doubly robust learner (Kennedy 2020; paper 000, section 3.1).

    Pseudo-outcome psi = mu(1,X) - mu(0,X) + T (Y - mu(1,X)) / e(X) - (1-T)(Y - mu(0,X)) / (1 - e(X)),
    regressed on X by ``model_final``. The outcome model is one regression on [X, T] (the joint
    response surface of paper 000).

    Parameters
    ----------
    model_propensity : classifier (or regressor of T)
    model_regression : regressor fitted on ``[X, T]``
    model_final : regressor of psi on X
    cv : int
        Cross-fitting folds when ``split`` is None (1 = no splitting), stratified on T as in
        EconML (with an integer ``random_state`` the folds are EconML's for the same seed).
    split : (float, float, float), optional
        Disjoint split fractions (propensity, outcome, final), e.g. paper 000's (0.25, 0.25, 0.5).
    clip : float
        Propensities are clipped to [clip, 1 - clip].
    random_state : int or Generator, optional
        Seed of the split.
    """

    nuisance_names = ("propensity", "outcome")
    arm_nuisances = ("propensity", "outcome")  # the outcome model takes T as a feature

    def __init__(
        self,
        model_propensity,
        model_regression,
        model_final,
        *,
        cv: int = 2,
        split: Sequence[float] | None = None,
        clip: float = DEFAULT_CLIP,
        random_state: SeedLike = None,
    ) -> None:
        self.model_propensity = model_propensity
        self.model_regression = model_regression
        self.model_final = model_final
        self.cv = cv
        self.split = split
        self.clip = clip
        self.random_state = random_state

    def _fit_nuisance(self, name: str, X, t, y):
        if name == "propensity":
            return clone(self.model_propensity).fit(X, t)
        return clone(self.model_regression).fit(_with_t(X, t), y)

    def _transform(self, fitted: dict, X, t, y):
        e = self._propensity(fitted, X)
        mu1 = fitted["outcome"].predict(_with_t(X, 1.0))
        mu0 = fitted["outcome"].predict(_with_t(X, 0.0))
        psi = mu1 - mu0 + t * (y - mu1) / e - (1 - t) * (y - mu0) / (1 - e)
        return psi, None

    def ate_inference(self, alpha: float = 0.05) -> EffectEstimate:
        """AIPW estimate of the ATE: the mean pseudo-outcome with a normal interval.

        Robins et al. (1994); with cross-fitting the mean of psi is the DML estimator of
        Chernozhukov et al. (2018), with standard error sd(psi)/sqrt(n). Needs no bootstrap;
        :meth:`ate_interval` and :meth:`summary` use it when the learner was fitted without one.
        """
        self._fitted_check()
        psi = self.pseudo_outcome_
        est, se = float(psi.mean()), float(psi.std(ddof=1) / np.sqrt(psi.size))
        lo, hi = wald_interval(est, se, alpha)
        treated = int(self.T_train_[self.final_rows_].sum())
        return EffectEstimate(est, se, lo, hi, "ate", "dr-learner", treated, int(psi.size) - treated)

    def _average_inference(self, X: NDArray | None, alpha: float) -> tuple[float, float, float, float]:
        if X is None and self.bootstrap_estimators_ is None:
            res = self.ate_inference(alpha)
            return res.estimate, res.se, res.ci_low, res.ci_high
        return super()._average_inference(X, alpha)


class RLearner(_TwoStageLearner):
    """R-learner (Nie & Wager 2020; paper 000, section 3.1).

    Residuals Y~ = Y - eta(X), T~ = T - e(X); the final stage minimises
    sum (Y~ - T~ tau(X))^2, i.e. a regression of Y~/T~ on X with weights T~^2.
    The final model must accept ``sample_weight`` unless ``weighted=False``.

    Parameters
    ----------
    model_y, model_t, model_final : estimators
        Outcome regression eta, propensity e, and the final regression of Y~/T~ on X.
    weighted : bool
        True (default) passes the R-loss weights T~^2 to ``model_final``; False regresses Y~/T~
        on X unweighted (the U-learner: with the true nuisances E[Y~/T~ | X] = tau(X) as well).
        The DP learner needs False: a DP base learner cannot take data-dependent weights
        (docs/cate.md, "The DP R-learner's final stage"). ``final_weights_`` holds T~^2 either way.
    cv, split, clip, random_state
        As in :class:`DRLearner`.
    """

    nuisance_names = ("propensity", "outcome")

    def __init__(
        self,
        model_y,
        model_t,
        model_final,
        *,
        weighted: bool = True,
        cv: int = 2,
        split: Sequence[float] | None = None,
        clip: float = DEFAULT_CLIP,
        random_state: SeedLike = None,
    ) -> None:
        self.model_y = model_y
        self.model_t = model_t
        self.model_final = model_final
        self.weighted = weighted
        self.cv = cv
        self.split = split
        self.clip = clip
        self.random_state = random_state

    def _fit_nuisance(self, name: str, X, t, y):
        if name == "propensity":
            return clone(self.model_t).fit(X, t)
        return clone(self.model_y).fit(X, y)

    def _transform(self, fitted: dict, X, t, y):
        t_res = t - self._propensity(fitted, X)
        y_res = y - fitted["outcome"].predict(X)
        return y_res / t_res, t_res**2
