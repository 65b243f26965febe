"""Meta-learners for the conditional average treatment effect tau(x) = E[Y(1) - Y(0) | X = x].

S-, T-, X- (Künzel et al. 2019), DR- (Kennedy 2020) and R-learners (Nie & Wager 2020) with any
scikit-learn-style base learners, in the API users know from EconML: ``fit(Y, T, X=...)``,
``effect(X)``, ``ate()``, ``att()`` and, for the DR-learner, ``ate_interval()``.

The two-stage learners (DR, R) take a sample-splitting plan from
:mod:`collabcausal.estimators.metalearners.splits`: cross-fitting by default, or the disjoint
split of paper 000 (Algorithm 1) that the differentially private meta-algorithm relies on.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike, NDArray
from sklearn.base import clone

from collabcausal.errors import InputError
from collabcausal.estimators.metalearners.splits import Round, cross_fit_plan, disjoint_plan
from collabcausal.estimators.results import EffectEstimate, wald_interval
from collabcausal.estimators.validation import check_matrix, check_treatment, check_vector
from collabcausal.randomness import SeedLike

DEFAULT_CLIP = 0.01


def _predict_proba(model, X: NDArray[np.float64]) -> NDArray[np.float64]:
    """P(T = 1 | X) from a classifier (``predict_proba``) or a regressor (``predict``)."""
    if hasattr(model, "predict_proba"):
        return np.asarray(model.predict_proba(X))[:, 1]
    return np.asarray(model.predict(X), dtype=float)


def _with_t(X: NDArray[np.float64], t: float | NDArray) -> NDArray[np.float64]:
    return np.column_stack([X, np.broadcast_to(np.asarray(t, dtype=float), (X.shape[0],))])


class _CATELearner:
    """Shared door checks, the EconML-style averages, and the fitted-state guard."""

    def _check_fit_input(self, Y: ArrayLike, T: ArrayLike, X: ArrayLike | None):
        if X is None:
            raise InputError("X is required for a CATE learner", "pass the covariates as X=...")
        Xa = check_matrix(X, "X")
        y = check_vector(Y, "Y", n=Xa.shape[0])
        t = check_treatment(T, "T", n=Xa.shape[0])
        return y, t, Xa

    def _fitted_check(self) -> None:
        if not hasattr(self, "X_train_"):
            raise InputError(f"{type(self).__name__} is not fitted", "call fit(Y, T, X=...) first")

    def _check_query(self, X: ArrayLike) -> NDArray[np.float64]:
        self._fitted_check()
        Xq = check_matrix(X, "X")
        if Xq.shape[1] != self.X_train_.shape[1]:
            raise InputError(
                f"X has {Xq.shape[1]} columns but the learner was fitted on {self.X_train_.shape[1]}",
                "pass the same covariates, in the same order",
            )
        return Xq

    def effect(self, X: ArrayLike) -> NDArray[np.float64]:
        """tau^(x) at each row of ``X``."""
        return self._effect(self._check_query(X))

    def ate(self, X: ArrayLike | None = None) -> float:
        """Average of tau^ over ``X`` (default: the training covariates)."""
        self._fitted_check()
        return float(np.mean(self.effect(self.X_train_ if X is None else X)))

    def att(self) -> float:
        """Average of tau^ over the treated training subjects."""
        self._fitted_check()
        return float(np.mean(self.effect(self.X_train_[self.T_train_ == 1])))


class SLearner(_CATELearner):
    """One outcome model on (X, T); tau^(x) = mu^(x, 1) - mu^(x, 0) (Künzel et al. 2019).

    Parameters
    ----------
    overall_model : regressor
        Fitted on ``[X, T]`` with T as the last column.
    """

    def __init__(self, overall_model) -> None:
        self.overall_model = overall_model

    def fit(self, Y: ArrayLike, T: ArrayLike, *, X: ArrayLike) -> SLearner:
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

    def fit(self, Y: ArrayLike, T: ArrayLike, *, X: ArrayLike) -> TLearner:
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

    def fit(self, Y: ArrayLike, T: ArrayLike, *, X: ArrayLike) -> XLearner:
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

    def plan(self, n: int, T: ArrayLike | None = None) -> tuple[Round, ...]:
        """The splitting plan for ``n`` subjects (checks that every part is large enough).

        Cross-fitting folds are stratified on ``T`` when it is given (``fit`` always gives it), as
        in EconML; the disjoint split of paper 000 never is (see :mod:`.splits`).
        """
        if self.split is not None:
            return disjoint_plan(n, self.nuisance_names, self.split, self.random_state)
        return cross_fit_plan(n, self.nuisance_names, self.cv, self.random_state, strata=T)

    def fit(self, Y: ArrayLike, T: ArrayLike, *, X: ArrayLike) -> _TwoStageLearner:
        y, t, Xa = self._check_fit_input(Y, T, X)
        self.plan_ = self.plan(Xa.shape[0], t)
        self.nuisances_ = []
        rows, targets, weights = [], [], []
        for rnd in self.plan_:
            fitted = {name: self._fit_nuisance(name, Xa[idx], t[idx], y[idx]) for name, idx in rnd.train.items()}
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
        if self.final_weights_ is None:
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

    def ate_interval(self, alpha: float = 0.05) -> EffectEstimate:
        """AIPW estimate of the ATE: the mean pseudo-outcome with a normal interval.

        Robins et al. (1994); with cross-fitting the mean of psi is the DML estimator of
        Chernozhukov et al. (2018), with standard error sd(psi)/sqrt(n).
        """
        self._fitted_check()
        psi = self.pseudo_outcome_
        est, se = float(psi.mean()), float(psi.std(ddof=1) / np.sqrt(psi.size))
        lo, hi = wald_interval(est, se, alpha)
        treated = int(self.T_train_[self.final_rows_].sum())
        return EffectEstimate(est, se, lo, hi, "ate", "dr-learner", treated, int(psi.size) - treated)


class RLearner(_TwoStageLearner):
    """R-learner (Nie & Wager 2020; paper 000, section 3.1).

    Residuals Y~ = Y - eta(X), T~ = T - e(X); the final stage minimises
    sum (Y~ - T~ tau(X))^2, i.e. a regression of Y~/T~ on X with weights T~^2.
    The final model must accept ``sample_weight``.
    """

    nuisance_names = ("propensity", "outcome")

    def __init__(
        self,
        model_y,
        model_t,
        model_final,
        *,
        cv: int = 2,
        split: Sequence[float] | None = None,
        clip: float = DEFAULT_CLIP,
        random_state: SeedLike = None,
    ) -> None:
        self.model_y = model_y
        self.model_t = model_t
        self.model_final = model_final
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
