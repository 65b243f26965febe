"""DC-QE on differentially private representations (docs/dcqe.md, "DP representations").

Each party releases once per study an (epsilon, delta)-DP representation of all its subjects
(:mod:`collabcausal.party.dp_representation`): rows ``x~ = f(x) + N(0, sigma_j^2 I)`` of a
data-independent map ``f``, and, from the label holder, ``t* = t + noise`` and ``y* = y + noise``
in the outcome's units (both unbiased for the true values). The analyst then:

1. builds the collaborative representation from the (exact, data-independent) anchor images as in
   plain DC-QE; its rows carry known Gaussian noise, covariance ``Sigma_i = G_i^T D_i G_i`` in row
   group ``i`` (``D_i`` the parties' noise variances);
2. estimates the effect with Horvitz-Thompson IPW on the unbiased surrogates (``t*`` replaces ``t``: the
   logistic score ``sum x (t* - e(x))`` and the weighted means stay unbiased estimating
   equations because the noise has mean zero given everything else);
3. corrects for the covariate noise by SIMEX (Cook & Stefanski 1994; Carroll et al. 2006,
   "Measurement Error in Nonlinear Models", ch. 5): the estimate is recomputed after adding extra
   noise ``N(0, lambda Sigma_i)`` for lambda in ``lambdas``, averaged over replicates, and a
   rational-linear function of lambda is fitted and extrapolated to lambda = -1 (no noise). SIMEX
   is chosen over regression calibration because it corrects any estimator, the effect itself as well as the propensity
   coefficients, while regression calibration with a linear calibration function leaves a
   logistic model's fitted probabilities unchanged (it only re-parametrizes them);
4. bootstraps the released rows within row groups (no new requests: no composition over
   replicates). The bootstrap captures the sampling variability of the subjects and the DP noise
   (drawn independently per row, it is resampled with its row); it does not capture the SIMEX
   extrapolation's model error, clipping bias, or the anchor's randomness (fixed for the study).

What the correction cannot do: confounders measured with noise leave residual confounding that
SIMEX reduces but, its extrapolant being approximate, does not remove exactly; at small epsilon the
noise dominates (see the privacy-utility table of ``benchmarks/bench_reconstruction.py``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy.optimize import OptimizeWarning, curve_fit

from collabcausal.analyst.collaboration import CollaborativeRepresentation, collaborative_representation
from collabcausal.analyst.dcqe import DCQEPlan, describe_parties
from collabcausal.analyst.grid import Grid
from collabcausal.errors import InputError, NumericalError, StudyFailedError
from collabcausal.estimators.dp.calibration import representation_sigma
from collabcausal.estimators.results import EffectEstimate
from collabcausal.estimators.validation import check_bounds, check_delta, check_epsilon
from collabcausal.messages import Message
from collabcausal.randomness import child_rng

MIN_POLE_DISTANCE = 0.2
"""The rational-linear SIMEX extrapolant is used only when its pole lies below lambda = -1.2."""

PROPENSITY_CLIP = {"ate": (0.01, 0.99), "att": (1e-9, 0.99)}
"""Propensity trimming per estimand. With a noisy treatment surrogate a weight t*/e or
(1 - t*) e/(1 - e) multiplies noise of sd sigma by 1/e or 1/(1 - e), so the weights that divide
by a propensity are bounded at 100 (ATE: both tails; ATT: controls' e <= 0.99, while a small e
only shrinks a control's weight and stays untrimmed, as in plain DC-QE)."""


@dataclass(frozen=True)
class DPRepresentationSpec:
    """What a study asks of the parties' DP representations, and how the analyst corrects them.

    Parameters
    ----------
    epsilon, delta : float
        Each party's release is (epsilon, delta)-DP (substitution of one subject).
    outcome_range : (low, high)
        Public outcome range; the label holder clips to it.
    clip_norm : float, optional
        Public norm bound C of a party's mapped row; default ``sqrt(m_j)`` (never binds).
    lambdas : sequence of float
        SIMEX noise multiples.
    simex_replicates : int
        Replicates per lambda.
    max_se_floor : float, optional
        Refuse the study before any request when :func:`se_floor` exceeds this; default a quarter
        of the outcome range's width (such an estimate cannot tell a plausible effect from zero,
        so the parties' budget would be spent for nothing). ``math.inf`` never refuses.
    """

    epsilon: float
    delta: float
    outcome_range: tuple[float, float]
    clip_norm: float | None = None
    lambdas: tuple[float, ...] = (0.5, 1.0, 1.5, 2.0)
    simex_replicates: int = 20
    max_se_floor: float | None = None

    def __post_init__(self) -> None:
        check_epsilon(self.epsilon)
        if check_delta(self.delta) <= 0.0:
            raise InputError("DP representations need delta > 0 (Gaussian mechanism)", "e.g. delta = 1e-6")
        object.__setattr__(self, "outcome_range", check_bounds(tuple(self.outcome_range), "outcome_range"))
        if not self.lambdas or min(self.lambdas) <= 0 or self.simex_replicates < 1:
            raise InputError("SIMEX needs positive lambdas and at least one replicate", "use the defaults")


@dataclass(frozen=True, eq=False)
class DPRelease:
    """What the analyst holds after one round of ``dp_representation`` requests.

    Attributes
    ----------
    x_tilde, a_tilde : tuple of ndarray
        Per row group, the parties' noisy rows and exact anchor images side by side.
    noise_var : tuple of ndarray
        Per row group, the noise variance of each column of ``x_tilde``.
    treatment, outcome : ndarray
        Unbiased noisy surrogates t* and y* (outcome in its units), stacked over row groups.
    sigma : dict of str to float
        Each party's noise standard deviation (in scaled units).
    """

    x_tilde: tuple[NDArray[np.float64], ...]
    a_tilde: tuple[NDArray[np.float64], ...]
    noise_var: tuple[NDArray[np.float64], ...]
    treatment: NDArray[np.float64]
    outcome: NDArray[np.float64]
    sigma: dict[str, float]

    @property
    def sizes(self) -> list[int]:
        """Subjects per row group."""
        return [x.shape[0] for x in self.x_tilde]


@dataclass(frozen=True, eq=False)
class DPStudyResult:
    """A DC-QE study on DP representations.

    Attributes
    ----------
    estimate : EffectEstimate
        SIMEX-corrected Horvitz-Thompson IPW (``method="ipw-simex"``); SE and percentile CI from the analyst's
        bootstrap of the released rows (None without replicates).
    naive : float
        The same IPW without the SIMEX correction.
    representation : CollaborativeRepresentation
    propensity : ndarray
        Propensities fitted on the noisy X^ (trimmed by :data:`PROPENSITY_CLIP`).
    simex_curve : dict of float to float
        Mean estimate per lambda (0 is the naive estimate).
    release : DPRelease
    replicates : ndarray
        Bootstrap replicates of the corrected estimate.
    """

    estimate: EffectEstimate
    naive: float
    representation: CollaborativeRepresentation
    propensity: NDArray[np.float64]
    simex_curve: dict[float, float]
    release: DPRelease
    replicates: NDArray[np.float64]


def request_release(
    grid: Grid, plan: DCQEPlan, spec: DPRepresentationSpec, *, timeout: float | None = None
) -> DPRelease:
    """Ask every party of the plan for its DP representation (one request each) and check the replies."""
    described = describe_parties(grid, plan, timeout=timeout)
    floor = se_floor(plan, spec, described)
    limit = (spec.outcome_range[1] - spec.outcome_range[0]) / 4.0 if spec.max_se_floor is None else spec.max_se_floor
    if floor > limit:
        raise InputError(
            f"at eps = {spec.epsilon:g} the outcome noise alone gives the effect an SE of at least {floor:.3g}, "
            f"above {limit:.3g} ([dp_representation] max_se_floor): the release would spend the parties' budget "
            "for nothing",
            "raise epsilon, add subjects, narrow outcome_range, or set max_se_floor = inf in [dp_representation] "
            "to run anyway",
        )
    requests = {}
    n_anchors = plan.anchor_rows(described)
    for i, group in enumerate(plan.row_groups):
        for party in group:
            components = plan.components_of(party)
            if isinstance(components, float):
                raise InputError("DP representations need an integer number of components", "set party_components")
            labels = party == plan.label_holders[i]
            params = {
                "study": plan.study,
                "epsilon": spec.epsilon,
                "delta": spec.delta,
                "n_components": int(components),
                "n_anchors": n_anchors,
                "anchor_ranges": {k: [float(v[0]), float(v[1])] for k, v in plan.anchor_ranges.items()},
                "labels": labels,
            }
            if labels:  # the outcome's public range, which only the label holder's release applies
                params["outcome_range"] = list(spec.outcome_range)
            if spec.clip_norm is not None:
                params["clip_norm"] = float(spec.clip_norm)
            requests[party] = Message("dp_representation", params)
    replies = grid.send_and_receive(requests, timeout=timeout)
    x_tilde, a_tilde, noise_var, t_star, y_star, sigma = [], [], [], [], [], {}
    lo, hi = spec.outcome_range
    for i, group in enumerate(plan.row_groups):
        n = int(described[group[0]].params["n_subjects"])
        for party in group:
            _check_reply(party, replies[party], n, n_anchors, party == plan.label_holders[i])
            sigma[party] = float(replies[party].params["sigma"])
        x_tilde.append(np.hstack([replies[p].array("x_tilde") for p in group]))
        a_tilde.append(np.hstack([replies[p].array("a_tilde") for p in group]))
        noise_var.append(np.concatenate([np.full(replies[p].array("x_tilde").shape[1], sigma[p] ** 2) for p in group]))
        holder = replies[plan.label_holders[i]]
        t_star.append((holder.array("t_noisy") + 1.0) / 2.0)
        y_star.append((hi + lo) / 2.0 + (hi - lo) / 2.0 * holder.array("y_noisy"))
    return DPRelease(tuple(x_tilde), tuple(a_tilde), tuple(noise_var), np.concatenate(t_star),
                     np.concatenate(y_star), sigma)


def se_floor(plan: DCQEPlan, spec: DPRepresentationSpec, described: Mapping[str, Message]) -> float:
    """A lower bound on the SE the outcome noise alone gives the effect, from public facts only.

    The label holder of row group i adds N(0, s_i^2) to each outcome, s_i = (hi - lo)/2 sigma_i with
    sigma_i its calibrated noise (:func:`collabcausal.estimators.dp.calibration.representation_sigma`,
    clip norm ``C`` or ``sqrt(m)`` with m its public covariate count). Even with the treatment and
    covariates exact, a difference of arm means over n subjects has noise SE
    ``s sqrt(1/n_1 + 1/n_0) >= 2 s / sqrt(n)``; the floor is that bound with the smallest s_i.
    """
    lo, hi = spec.outcome_range
    n = sum(int(described[g[0]].params["n_subjects"]) for g in plan.row_groups)
    sigmas = []
    for holder in plan.label_holders:
        m = len(described[holder].params["covariates"])
        clip_norm = spec.clip_norm if spec.clip_norm is not None else math.sqrt(m)
        sigmas.append(representation_sigma(clip_norm, True, spec.epsilon, spec.delta))
    return (hi - lo) / 2.0 * min(sigmas) * 2.0 / math.sqrt(n)


def run_dp_dcqe(
    grid: Grid,
    plan: DCQEPlan,
    spec: DPRepresentationSpec,
    *,
    n_boot: int = 200,
    alpha: float = 0.05,
    timeout: float | None = None,
) -> DPStudyResult:
    """One DC-QE study on DP representations: one request per party, then analyst-side work only.

    Only IPW (``plan.estimand``) is offered: matching needs exact treatment labels and the linear
    outcome models of AIPW would regress on a noisy treatment.
    """
    if tuple(plan.estimators) != ("ipw",):
        raise InputError(
            f"DP representations support the IPW estimator only, the plan asks for {list(plan.estimators)}",
            "set estimators = ['ipw']",
        )
    release = request_release(grid, plan, spec, timeout=timeout)
    return estimate_release(release, plan, spec, n_boot=n_boot, alpha=alpha)


def estimate_release(
    release: DPRelease, plan: DCQEPlan, spec: DPRepresentationSpec, *, n_boot: int = 200, alpha: float = 0.05
) -> DPStudyResult:
    """SIMEX-corrected IPW on a release, with a bootstrap of its rows (module docstring, steps 1-4)."""
    representation = collaborative_representation(release.x_tilde, release.a_tilde, plan.n_components)
    noise = _noise_factors(representation, release)
    groups = np.repeat(np.arange(len(release.sizes)), release.sizes)
    X = representation.X_hat
    t, y = release.treatment, release.outcome

    def corrected(rows: NDArray[np.int64], rng: np.random.Generator) -> tuple[float, dict[float, float]]:
        return simex(lambda Z: noisy_ipw(Z, t[rows], y[rows], plan.estimand), X[rows], noise, groups[rows],
                     spec.lambdas, spec.simex_replicates, rng)

    everyone = np.arange(X.shape[0])
    point, curve = corrected(everyone, child_rng(plan.seed, "simex"))
    reps = []
    for b in range(n_boot):
        rng = child_rng(plan.seed, "dp-bootstrap", b)
        rows = np.concatenate([rng.choice(np.flatnonzero(groups == g), size=n) for g, n in enumerate(release.sizes)])
        try:
            reps.append(corrected(rows, rng)[0])
        except NumericalError:
            reps.append(math.nan)
    replicates = np.asarray(reps, dtype=np.float64)
    finite = replicates[np.isfinite(replicates)]
    se = float(np.std(finite, ddof=1)) if finite.size > 1 else None
    ci = (None, None) if finite.size < 2 else tuple(float(q) for q in np.quantile(finite, [alpha / 2, 1 - alpha / 2]))
    e = _propensity(X, t, PROPENSITY_CLIP[plan.estimand])
    estimate = EffectEstimate(
        point, se, ci[0], ci[1], plan.estimand, "ipw-simex",
        round(float(t.sum())), round(float((1 - t).sum())),
        {"naive": curve[0.0], "simex_curve": curve, "failed_replicates": int(replicates.size - finite.size)},
    )
    return DPStudyResult(estimate, curve[0.0], representation, e, curve, release, replicates)


def noisy_logistic(features: NDArray[np.float64], t_star: NDArray[np.float64], *, ridge: float = 1e-6,
                   max_iter: int = 50) -> NDArray[np.float64]:
    """Logistic coefficients ``[intercept, slopes]`` from the score equations with a noisy label.

    Solves ``sum_i x_i (t*_i - expit(x_i b)) - ridge b = 0`` by Newton's method. With ``t*``
    unbiased for ``t`` the score is an unbiased estimating equation; the objective
    ``sum t* eta - log(1 + e^eta)`` stays concave for any real ``t*`` (its Hessian does not
    involve ``t*``), so Newton's method works as for 0/1 labels. Unlike the 0/1 case the objective
    need not be bounded: labels above 1 or below 0 can pull the fit to infinity when the noise
    swamps the treatment.

    Raises
    ------
    NumericalError
        No finite fit within ``max_iter`` Newton steps (the DP noise swamps the treatment).
    """
    Z = np.column_stack([np.ones(features.shape[0]), features])
    beta = np.zeros(Z.shape[1])
    for _ in range(max_iter):
        p = 0.5 * (1.0 + np.tanh(0.5 * (Z @ beta)))
        grad = Z.T @ (t_star - p) - ridge * beta
        hess = (Z * (p * (1 - p))[:, None]).T @ Z + ridge * np.eye(Z.shape[1])
        step = np.linalg.solve(hess, grad)
        beta = beta + step
        if np.max(np.abs(step)) < 1e-10:
            return beta
    raise NumericalError(
        f"the propensity model on the noisy treatment has no finite fit after {max_iter} Newton steps",
        "the DP noise swamps the treatment: raise epsilon or add subjects",
    )


def noisy_ipw(features: NDArray[np.float64], t_star: NDArray[np.float64], y_star: NDArray[np.float64],
              estimand: str) -> float:
    """Horvitz-Thompson IPW (ATE or ATT) with the noisy treatment surrogate ``t*`` in place of ``t``.

    ATE: ``mean(t* y / e) - mean((1-t*) y / (1-e))``;
    ATT: ``(mean(t* y) - mean((1-t*) y e/(1-e))) / mean(t*)``, ``e`` the logistic propensity of
    :func:`noisy_logistic` (trimmed by :data:`PROPENSITY_CLIP`). Linear in ``t*`` except for
    ATT's ``mean(t*)``: the normalized (Hajek) form divides by sums of noisy weights, which come
    near zero at DP noise levels and make the estimate explode, so it is not used here.
    """
    e = _propensity(features, t_star, PROPENSITY_CLIP[estimand])
    c = 1.0 - t_star
    if estimand == "att":
        return float(np.mean(t_star * y_star - c * y_star * e / (1 - e)) / np.mean(t_star))
    return float(np.mean(t_star * y_star / e - c * y_star / (1 - e)))


def simex(
    statistic: Callable[[NDArray[np.float64]], float],
    X: NDArray[np.float64],
    noise: Sequence[NDArray[np.float64]],
    groups: NDArray[np.int64],
    lambdas: Sequence[float],
    n_replicates: int,
    rng: np.random.Generator,
) -> tuple[float, dict[float, float]]:
    """SIMEX estimate of ``statistic`` at no covariate noise (Cook & Stefanski 1994).

    Parameters
    ----------
    statistic : callable
        ``statistic(X) -> float``.
    X : ndarray (n, k)
        Covariates with noise of covariance ``noise[g].T @ noise[g]`` in rows of group ``g``.
    noise : sequence of ndarray (d_g, k)
        A factor of each group's noise covariance.
    groups : ndarray (n,)
        Row group of each row.
    lambdas, n_replicates, rng
        Noise multiples, replicates per multiple, and the source of the added noise.

    Returns
    -------
    estimate : float
        The extrapolant through the mean estimates (:func:`extrapolate`), at lambda = -1.
    curve : dict
        Mean estimate per lambda (including 0, the naive estimate) over the replicates with a fit.

    Raises
    ------
    NumericalError
        The statistic fails without added noise, or at all but one of the lambdas.
    """
    curve = {0.0: statistic(X)}
    for lam in lambdas:
        values = []
        for _ in range(n_replicates):
            extra = np.empty_like(X)
            for g, factor in enumerate(noise):
                rows = groups == g
                extra[rows] = rng.standard_normal((int(rows.sum()), factor.shape[0])) @ factor
            try:
                values.append(statistic(X + math.sqrt(lam) * extra))
            except NumericalError:
                continue
        if values:
            curve[float(lam)] = float(np.mean(values))
    if len(curve) < 3:
        raise NumericalError("SIMEX: fewer than three noise levels gave an estimate", "raise epsilon or add subjects")
    levels = np.array(sorted(curve))
    return extrapolate(levels, np.array([curve[v] for v in levels])), curve


def extrapolate(levels: NDArray[np.float64], values: NDArray[np.float64]) -> float:
    """SIMEX extrapolation to lambda = -1 with the rational-linear extrapolant a + b / (c + lambda).

    The rational-linear function is exact for linear models with normal measurement error and
    closer than a quadratic for logistic ones (Cook & Stefanski 1994, section 3; Carroll et al.
    2006, section 5.3.2). It is fitted by least squares from the quadratic's start; when the fit
    fails or puts the pole within :data:`MIN_POLE_DISTANCE` of lambda = -1, the quadratic
    extrapolant is used: near its pole the rational function extrapolates without bound. (For a
    linear model c is the reliability ratio var(X) / var(noise), so the rational form is kept
    whenever the noise variance is below 1/1.2 of the signal's.)
    """
    quadratic = np.polyfit(levels, values, 2)
    fallback = float(np.polyval(quadratic, -1.0))
    slope = (values[-1] - values[0]) / (levels[-1] - levels[0])
    c0 = 2.0 + levels[-1]
    start = (values[-1] + slope * c0, -slope * c0**2, c0)
    try:
        with np.errstate(all="ignore"):
            (a, b, c), _ = curve_fit(lambda lam, a, b, c: a + b / (c + lam), levels, values, p0=start,
                                     maxfev=2000)
    except (RuntimeError, ValueError, OptimizeWarning):
        return fallback
    if not (np.isfinite(a) and np.isfinite(b) and c > MIN_POLE_DISTANCE + 1.0):
        return fallback
    return float(a + b / (c - 1.0))


def _propensity(
    features: NDArray[np.float64], t_star: NDArray[np.float64], clip: tuple[float, float]
) -> NDArray[np.float64]:
    beta = noisy_logistic(features, t_star)
    eta = beta[0] + features @ beta[1:]
    return np.clip(0.5 * (1.0 + np.tanh(0.5 * eta)), *clip)


def _noise_factors(representation: CollaborativeRepresentation, release: DPRelease) -> list[NDArray[np.float64]]:
    """Per row group a factor F_i = D_i^(1/2) G_i: F_i^T F_i = G_i^T D_i G_i, the noise covariance of X^ rows."""
    return [np.sqrt(var)[:, None] * G for G, var in zip(representation.G, release.noise_var, strict=True)]


def _check_reply(party: str, reply: Message, n: int, n_anchors: int, labels: bool) -> None:
    """One-line :class:`StudyFailedError` naming the party when a reply does not fit the request."""
    expected: Mapping[str, tuple[int, ...]] = {"x_tilde": (n, -1), "a_tilde": (n_anchors, -1)}
    if labels:
        expected = {**expected, "t_noisy": (n,), "y_noisy": (n,)}
    for name, shape in expected.items():
        if name not in reply.arrays:
            raise StudyFailedError(f"party {party!r} sent a DP representation without {name!r}", "check the party")
        arr = np.asarray(reply.arrays[name])
        if arr.ndim != len(shape) or any(s not in (-1, a) for s, a in zip(shape, arr.shape, strict=True)) \
                or not np.all(np.isfinite(arr)):
            raise StudyFailedError(
                f"party {party!r} sent {name!r} of shape {arr.shape}, expected {shape} finite values",
                "check the party's version and data",
            )
    sigma = reply.params.get("sigma")
    if isinstance(sigma, bool) or not isinstance(sigma, (int, float)) or not sigma > 0:
        raise StudyFailedError(f"party {party!r} sent no valid noise scale 'sigma'", "check the party's version")
    if reply.arrays["x_tilde"].shape[1] != reply.arrays["a_tilde"].shape[1]:
        raise StudyFailedError(f"party {party!r} sent x_tilde and a_tilde of different widths", "check the party")
