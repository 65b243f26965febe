"""The additive-noise-model direction test (paper 002, Algorithm 1; Mooij et al. 2016).

Split the pairs into a training and a test set, scale both variables into [-1, 1], fit kernel ridge
regressions ``f: x -> y`` and ``g: y -> x`` on the training set, compute test residuals
``r_Y = y' - f(x')`` and ``r_X = x' - g(y')``, and score the dependence of ``(x', r_Y)`` and
``(y', r_X)``. The direction with the smaller score wins.

Two non-private extensions (:class:`AdditiveNoiseModel` parameters ``noise`` and ``in_sample``):

* **location-scale noise** ``Y = f(X) + g(X) N`` (Immer, Schultheiss, Vogt, Schölkopf, Bühlmann &
  Marx, "On the identifiability and estimation of causal location-scale noise models", ICML 2023,
  LOCI): after the mean regression, a second regression of the log squared residuals on the input
  estimates ``log g^2`` (the two-step estimate of multiplicative heteroscedasticity, Harvey,
  Econometrica 44, 1976), rescaled so that the standardised residuals ``(y - f(x)) / g(x)`` have mean
  square 1 on the rows it was fitted on; the scores then test the standardised residuals (LOCI-H with
  HSIC) or compare the Gaussian likelihoods of both directions (LOCI-M, :func:`~.scores.likelihood_score`);
* **in-sample** residuals: regress on all rows and score the same rows, as causal-learn's ANM and
  LOCI do, instead of a held-out half.

The score ``likelihood_hsic`` combines the two models: the location-scale likelihood (``likelihood_kde``)
decides when Vuong's test calls its preference significant (``|z| >= likelihood_z``); otherwise the additive
noise model decides by HSIC if its residuals pass the HSIC independence test at ``independence_level`` in the
direction it prefers (the ANM's own acceptance rule, Mooij et al. 2016, section 3), and the likelihood
decides if they do not.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
from numpy.typing import ArrayLike, NDArray
from sklearn.base import BaseEstimator

from collabcausal.errors import InputError
from collabcausal.estimators.discovery.gp import fit_gp, fitted_params
from collabcausal.estimators.discovery.krr import LOO_REGULARIZATIONS, LOO_WIDTHS, GaussianKRR, loo_select
from collabcausal.estimators.discovery.scaling import UnitScaler
from collabcausal.estimators.discovery.scores import (
    hsic_log_pvalue,
    hsic_pvalue,
    hsic_score,
    iqr_score,
    kendall_score,
    likelihood_rows,
    spearman_score,
    variance_score,
    vuong_statistic,
)
from collabcausal.estimators.validation import check_vector
from collabcausal.randomness import SeedLike, as_generator

SCORES: tuple[str, ...] = (
    "spearman", "kendall", "hsic", "hsic_p", "iqr", "variance", "likelihood", "likelihood_kde", "likelihood_kde_in",
    "likelihood_hsic",
)
LIKELIHOOD_DENSITIES: dict[str, str] = {
    "likelihood": "gaussian", "likelihood_kde": "kde", "likelihood_kde_in": "kde-in"
}
"""The likelihood scores and the cause's marginal density each uses (:func:`.scores.marginal_nll`)."""
FALLBACK_LIKELIHOOD = "likelihood_kde"
"""The likelihood that ``likelihood_hsic`` keeps unless it falls back to the ANM (module docstring)."""
REGRESSIONS: tuple[str, ...] = ("krr", "gp")
NOISE_MODELS: tuple[str, ...] = ("additive", "location-scale")
RELATIVE_FLOOR = 1e-6
"""Squared residuals are floored at this times their mean (plus 1e-12) before their log is regressed."""
MIN_TEST_POINTS = 10
X_TO_Y, Y_TO_X = "x->y", "y->x"


def median_heuristic(values: NDArray[np.float64], max_points: int = 1000) -> float:
    """Median distance between distinct values (Gretton et al., 2005), on at most ``max_points`` of them.

    A deterministic subsample (every k-th value) keeps the cost ``O(max_points^2)``.
    """
    v = values[:: max(1, values.size // max_points)]
    gaps = np.abs(v[:, None] - v[None, :])[np.triu_indices(v.size, k=1)]
    gaps = gaps[gaps > 0]
    return float(np.median(gaps)) if gaps.size else 1.0


def check_score(score: str) -> str:
    """One of :data:`SCORES` (case-insensitive)."""
    key = str(score).lower()
    if key not in SCORES:
        raise InputError(f"unknown dependence score {score!r}", f"use one of {list(SCORES)}")
    return key


def decide(score_xy: float, score_yx: float) -> str:
    """``x->y`` if ``s_{X->Y} < s_{Y->X}``, else ``y->x`` (paper 002, Algorithm 1, line 9; ties go to ``y->x``)."""
    return X_TO_Y if score_xy < score_yx else Y_TO_X


def check_pair(x: ArrayLike, y: ArrayLike, test_size: float) -> tuple[NDArray[np.float64], NDArray[np.float64], int]:
    """Validate a cause-effect pair and the split; return ``x``, ``y`` and the test size ``m``.

    Only public facts are checked (finite values, n and the test size), never the data's values:
    a refusal that depends on them (e.g. "column is constant") would be an exact, un-noised answer
    about private rows. Without public bounds the training split's range scales the data and a
    constant training split is refused there (:meth:`AdditiveNoiseModel.fit`).
    """
    x_arr = check_vector(x, "x")
    y_arr = check_vector(y, "y", n=x_arr.size)
    if not 0.0 < test_size < 1.0:
        raise InputError(f"test_size must lie in (0, 1), got {test_size!r}", "pass e.g. test_size=0.5")
    m = round(test_size * x_arr.size)
    if m < MIN_TEST_POINTS or x_arr.size - m < 2:
        raise InputError(
            f"{x_arr.size} pairs give {m} test points, fewer than the minimum {MIN_TEST_POINTS}",
            "use more pairs or a larger test_size",
        )
    return x_arr, y_arr, int(m)


@dataclass(frozen=True)
class DirectionScores:
    """Exact (non-private) scores of both directions.

    Attributes
    ----------
    score : str
    score_xy, score_yx : float
        ``s(x', r_Y)`` and ``s(y', r_X)``.
    direction : str
        ``"x->y"`` or ``"y->x"``.
    """

    score: str
    score_xy: float
    score_yx: float
    direction: str

    @property
    def margin(self) -> float:
        """``s_{Y->X} - s_{X->Y}``: positive favours ``x->y``."""
        return self.score_yx - self.score_xy


class AdditiveNoiseModel(BaseEstimator):
    """Fit the two regressions of paper 002, Algorithm 1, and score their test residuals.

    Parameters
    ----------
    regression : "krr" or "gp"
        ``"krr"``: paper 002's kernel ridge regression (eq. 5) with ``kernel_width`` and
        ``regularization``. ``"gp"``: Mooij et al. (2016)'s GP regression with marginal-likelihood
        hyperparameters (:mod:`~collabcausal.estimators.discovery.gp`), tuned on the training split
        (so non-private or test-set privacy only); ``kernel_width`` and ``regularization`` unused.
    regularization : float or "loo"
        ``lam`` of the kernel ridge regression, eq. 5, in (0, 1]; ``"loo"`` picks it per direction
        from :data:`~collabcausal.estimators.discovery.krr.LOO_REGULARIZATIONS` by closed-form
        leave-one-out error on the training split (:func:`~collabcausal.estimators.discovery.krr.loo_select`).
    kernel_width : float or "loo"
        Bandwidth of the regression kernel on the scaled [-1, 1] inputs; ``"loo"`` as above.
        Tuned values depend on the training rows, so a release protecting them refuses them;
        test-set privacy allows them.
    hsic_widths : (float, float) or "median"
        Gaussian bandwidths of the HSIC kernels on the input and on the residual. Fixed widths keep
        the HSIC sensitivities of a private release; ``"median"`` (the median heuristic of Gretton
        et al., 2005, on the test values) is for non-private scores only.
    test_size : float
        Fraction of the pairs in the test set (ignored when ``in_sample``).
    noise : "additive" or "location-scale"
        ``"location-scale"`` also regresses ``log g^2`` (module docstring, LOCI) with the same regression
        and parameters rule as the mean, and scores the standardised residuals. Non-private only: the
        private releases' sensitivities assume residuals bounded by the [-1, 1] scale.
    in_sample : bool
        Regress on all rows and score the residuals of the same rows (as causal-learn's ANM and LOCI
        do). Non-private only: the regression is tuned on the rows it scores (:meth:`data_tuned`).
    x_bounds, y_bounds : (float, float), optional
        Public bounds of each variable, used to scale into [-1, 1] (values outside are clipped).
        Without them the training split's range is used, which is fine for test-set privacy only.
    likelihood_z : float
        ``likelihood_hsic`` only: the ``|z|`` of Vuong's test (:func:`~.scores.vuong_statistic` of the per-row
        ``likelihood_kde`` differences) from which the likelihood decides without looking at the ANM; ``inf``
        consults the ANM on every pair. Default 1.96: the two-sided 5% level.
    independence_level : float
        ``likelihood_hsic`` only: the ANM's HSIC independence test (:func:`hsic_pvalue`, ``hsic_widths``) must
        give a p-value above this in its preferred direction for the ANM to decide.
    random_state : int or Generator, optional
        Seeds the train/test split.

    Attributes
    ----------
    x_test_, y_test_ : ndarray of shape (m,)
        Scaled test inputs.
    residual_y_, residual_x_ : ndarray of shape (m,)
        ``y' - f(x')`` and ``x' - g(y')``; for ``noise="location-scale"`` divided by the fitted scale.
    log_scale_y_, log_scale_x_ : ndarray of shape (m,)
        Log of the fitted noise scale at the test inputs: the location-scale fit, or for additive noise
        the constant ``(1/2) log`` of the mean squared training residual (the likelihood scores use it).
    n_train_, m_test_ : int
    regression_params_ : ((float, float), (float, float))
        ``(kernel_width, regularization)`` used by ``f: x -> y`` and by ``g: y -> x``; for
        ``regression="gp"`` the fitted ``(length scale, noise variance)``.
    """

    def __init__(
        self,
        *,
        regression: str = "krr",
        regularization: float | str = 1e-3,
        kernel_width: float | str = 0.3,
        hsic_widths: tuple[float, float] | str = (0.3, 0.1),
        test_size: float = 0.5,
        noise: str = "additive",
        in_sample: bool = False,
        x_bounds: tuple[float, float] | None = None,
        y_bounds: tuple[float, float] | None = None,
        likelihood_z: float = 1.96,
        independence_level: float = 0.05,
        random_state: SeedLike = None,
    ) -> None:
        self.regression = regression
        self.regularization = regularization
        self.kernel_width = kernel_width
        self.hsic_widths = hsic_widths
        self.test_size = test_size
        self.noise = noise
        self.in_sample = in_sample
        self.x_bounds = x_bounds
        self.y_bounds = y_bounds
        self.likelihood_z = likelihood_z
        self.independence_level = independence_level
        self.random_state = random_state

    def fit(self, x: ArrayLike, y: ArrayLike) -> AdditiveNoiseModel:
        """Split (unless ``in_sample``), scale, regress both ways and store the test residuals."""
        x_arr, y_arr, m = check_pair(x, y, self.test_size)
        if self.regression not in REGRESSIONS:
            raise InputError(f"unknown regression {self.regression!r}", f"use one of {list(REGRESSIONS)}")
        if self.noise not in NOISE_MODELS:
            raise InputError(f"unknown noise model {self.noise!r}", f"use one of {list(NOISE_MODELS)}")
        n_total = x_arr.size
        if self.in_sample:
            test = train = np.arange(n_total)
            m = n_total
        else:
            order = as_generator(self.random_state).permutation(n_total)
            test, train = order[:m], order[m:]
        x_scaler = self._scaler(self.x_bounds, x_arr[train], "x_bounds")
        y_scaler = self._scaler(self.y_bounds, y_arr[train], "y_bounds")
        x_s, y_s = x_scaler.transform(x_arr), y_scaler.transform(y_arr)
        self.x_test_, self.y_test_ = x_s[test], y_s[test]
        # in-sample: the very arrays, so each regression predicts its rows once (:meth:`_regress`)
        x_train, y_train = (self.x_test_, self.y_test_) if self.in_sample else (x_s[train], y_s[train])
        self.residual_y_, self.log_scale_y_, f_params = self._residuals(x_train, y_train, self.x_test_, self.y_test_)
        self.residual_x_, self.log_scale_x_, g_params = self._residuals(y_train, x_train, self.y_test_, self.x_test_)
        self.regression_params_ = (f_params, g_params)
        self.n_train_, self.m_test_ = int(train.size), int(m)
        self._exact: dict[str, DirectionScores] = {}
        self._rows: dict[str, tuple[NDArray[np.float64], NDArray[np.float64]]] = {}
        return self

    def data_tuned(self, split: str) -> bool:
        """True when a parameter was chosen from the ``"train"`` or ``"test"`` split's values.

        ``"loo"`` regression parameters come from the training split, ``"median"`` HSIC widths from
        the test split; a private release must not protect a split its parameters were tuned on.
        ``in_sample`` fits the regression on the scored rows: tuned on both.
        """
        if self.in_sample:
            return True
        if split == "train":
            return self.regression == "gp" or "loo" in (self.kernel_width, self.regularization)
        return self.hsic_widths == "median"

    def _residuals(
        self, inputs: NDArray[np.float64], targets: NDArray[np.float64], test_in: NDArray[np.float64],
        test_out: NDArray[np.float64],
    ) -> tuple[NDArray[np.float64], NDArray[np.float64], tuple[float, float]]:
        """Test residuals of ``targets`` on ``inputs``, the log noise scale at ``test_in``, the mean's parameters.

        Location-scale: ``log g^2`` is regressed on the log squared training residuals (floored at
        :data:`RELATIVE_FLOOR` times their mean) and shifted by ``log mean(r^2 / exp(log g^2))`` over the
        training rows, so the standardised training residuals have mean square 1 (module docstring).
        """
        fitted, predicted, params = self._regress(inputs, targets, test_in)
        squares = (targets - fitted) ** 2
        squares += RELATIVE_FLOOR * float(np.mean(squares)) + 1e-12
        residual = test_out - predicted
        if self.noise == "additive":
            return residual, np.full(test_in.size, 0.5 * np.log(np.mean(squares))), params
        log_var_fit, log_var_test, _ = self._regress(inputs, np.log(squares), test_in)
        log_scale = 0.5 * (log_var_test + np.log(np.mean(squares * np.exp(-log_var_fit))))
        return residual * np.exp(-log_scale), log_scale, params

    def _regress(
        self, inputs: NDArray[np.float64], targets: NDArray[np.float64], test_in: NDArray[np.float64]
    ) -> tuple[NDArray[np.float64], NDArray[np.float64], tuple[float, float]]:
        """The regression of ``targets`` on ``inputs``: fitted values, predictions at ``test_in``, parameters.

        ``test_in is inputs`` (in-sample) reuses the fitted values as the predictions.
        """
        if self.regression == "gp":
            model = fit_gp(inputs, targets)
            fitted = model.predict(inputs[:, None])
            predicted = fitted if test_in is inputs else model.predict(test_in[:, None])
            return fitted, predicted, fitted_params(model)
        width, lam = self._regression_params(inputs, targets)
        krr = GaussianKRR(lam, width).fit(inputs, targets)
        return krr.fitted_, krr.fitted_ if test_in is inputs else krr.predict(test_in), (width, lam)

    def _regression_params(self, inputs: NDArray[np.float64], targets: NDArray[np.float64]) -> tuple[float, float]:
        """``(kernel_width, regularization)``: the fixed values, or the leave-one-out choice for ``"loo"`` ones."""
        width, lam = self.kernel_width, self.regularization
        for name, value in (("kernel_width", width), ("regularization", lam)):
            if isinstance(value, str) and value != "loo":
                raise InputError(f"{name} must be a number or 'loo', got {value!r}", f"pass e.g. {name}='loo'")
        if width != "loo" and lam != "loo":
            return float(width), float(lam)
        widths = LOO_WIDTHS if width == "loo" else (float(width),)
        lams = LOO_REGULARIZATIONS if lam == "loo" else (float(lam),)
        return loo_select(inputs, targets, widths, lams)

    @staticmethod
    def _scaler(bounds: tuple[float, float] | None, train_values: NDArray[np.float64], name: str) -> UnitScaler:
        if bounds is not None:
            return UnitScaler.from_bounds(bounds, name)
        lo, hi = float(train_values.min()), float(train_values.max())
        if lo == hi:
            raise InputError(f"the training split is constant (no {name})", "declare public bounds or use more pairs")
        return UnitScaler(lo, hi)

    def _hsic_widths(self, a: NDArray[np.float64], b: NDArray[np.float64]) -> tuple[float, float]:
        if self.hsic_widths == "median":
            return median_heuristic(a), median_heuristic(b)
        if isinstance(self.hsic_widths, str):
            raise InputError(
                f"hsic_widths must be two numbers or 'median', got {self.hsic_widths!r}", "pass (0.3, 0.1)"
            )
        return float(self.hsic_widths[0]), float(self.hsic_widths[1])

    def pair_score(self, score: str, a: NDArray[np.float64], b: NDArray[np.float64]) -> float:
        """``s(a, b)`` for an input ``a`` and its residual ``b`` (the likelihood scores need :meth:`scores`)."""
        key = check_score(score)
        if key in LIKELIHOOD_DENSITIES or key == "likelihood_hsic":
            raise InputError(f"the {key} score needs the fitted noise scales", "call scores() on a fitted model")
        if key in ("hsic", "hsic_p"):
            width_a, width_b = self._hsic_widths(a, b)
            if key == "hsic_p":  # -log p of the independence test: smaller is more independent
                return -hsic_log_pvalue(a, b, width_a=width_a, width_b=width_b)
            return hsic_score(a, b, width_a=width_a, width_b=width_b)
        return {"spearman": spearman_score, "kendall": kendall_score, "iqr": iqr_score, "variance": variance_score}[
            key
        ](a, b)

    def independence_pvalues(self) -> tuple[float, float]:
        """Exact HSIC independence-test p-values of ``(x', r_Y)`` and ``(y', r_X)`` (:func:`hsic_pvalue`)."""
        out = []
        for a, b in ((self.x_test_, self.residual_y_), (self.y_test_, self.residual_x_)):
            width_a, width_b = self._hsic_widths(a, b)
            out.append(hsic_pvalue(a, b, width_a=width_a, width_b=width_b))
        return out[0], out[1]

    def scores(self, score: str = "hsic") -> DirectionScores:
        """Exact scores ``s(x', r_Y)``, ``s(y', r_X)`` and the non-private decision (computed once per score).

        The likelihood scores (:func:`~collabcausal.estimators.discovery.scores.likelihood_score`) use the
        standardised residuals and log scales of each direction instead of :meth:`pair_score`;
        ``likelihood_hsic`` returns the scores of whichever of ``likelihood_kde`` and the additive residuals' HSIC
        decided (:meth:`_likelihood_or_anm`).
        """
        key = check_score(score)
        if key == "likelihood_hsic":
            return self._likelihood_or_anm()
        if key not in self._exact:
            if key in LIKELIHOOD_DENSITIES:
                s_xy, s_yx = (float(np.mean(rows)) for rows in self._likelihood_rows(key))
            else:
                s_xy = self.pair_score(key, self.x_test_, self.residual_y_)
                s_yx = self.pair_score(key, self.y_test_, self.residual_x_)
            self._exact[key] = DirectionScores(key, s_xy, s_yx, decide(s_xy, s_yx))
        return self._exact[key]

    def _directions(self) -> tuple[tuple[NDArray[np.float64], ...], tuple[NDArray[np.float64], ...]]:
        """``(input, stored residual, log scale)`` of ``x->y`` and of ``y->x``."""
        return (self.x_test_, self.residual_y_, self.log_scale_y_), (self.y_test_, self.residual_x_, self.log_scale_x_)

    def _likelihood_rows(self, key: str) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """Per-row negative log-likelihoods (:func:`likelihood_rows`) of ``x->y`` and ``y->x`` for a likelihood score
        (computed once per score); their means are the score (:func:`~.scores.likelihood_score`)."""
        if key not in self._rows:
            rows_xy, rows_yx = (likelihood_rows(a, self._standardised(r, s), s, density=LIKELIHOOD_DENSITIES[key])
                                for a, r, s in self._directions())
            self._rows[key] = (rows_xy, rows_yx)
        return self._rows[key]

    def _standardised(self, residual: NDArray[np.float64], log_scale: NDArray[np.float64]) -> NDArray[np.float64]:
        """``residual / g``: the stored residual itself for location-scale noise (already standardised)."""
        return residual if self.noise == "location-scale" else residual * np.exp(-log_scale)

    def _additive(self, residual: NDArray[np.float64], log_scale: NDArray[np.float64]) -> NDArray[np.float64]:
        """``residual * g``: the mean regression's own residual (the stored one itself for additive noise)."""
        return residual * np.exp(log_scale) if self.noise == "location-scale" else residual

    def _likelihood_or_anm(self) -> DirectionScores:
        """``likelihood_hsic`` (module docstring): the likelihood, or the ANM where Vuong's test finds no preference.

        ``z`` is :func:`vuong_statistic` of the per-row differences of :func:`likelihood_rows` (x->y minus y->x);
        below ``likelihood_z`` in absolute value the HSIC of each input with its mean regression's residual is
        compared, and the ANM's direction stands when its HSIC test p-value exceeds ``independence_level``.
        """
        if "likelihood_hsic" not in self._exact:
            rows_xy, rows_yx = self._likelihood_rows(FALLBACK_LIKELIHOOD)
            chosen = self.scores(FALLBACK_LIKELIHOOD)
            if abs(vuong_statistic(rows_xy - rows_yx)) < self.likelihood_z:
                inputs, residuals = zip(*((a, self._additive(r, s)) for a, r, s in self._directions()), strict=True)
                s_xy, s_yx = (self.pair_score("hsic", a, r) for a, r in zip(inputs, residuals, strict=True))
                anm = DirectionScores("hsic", s_xy, s_yx, decide(s_xy, s_yx))
                k = 0 if anm.direction == X_TO_Y else 1
                width_a, width_b = self._hsic_widths(inputs[k], residuals[k])
                if hsic_pvalue(inputs[k], residuals[k], width_a=width_a, width_b=width_b) > self.independence_level:
                    chosen = anm
            self._exact["likelihood_hsic"] = replace(chosen, score="likelihood_hsic")
        return self._exact["likelihood_hsic"]
