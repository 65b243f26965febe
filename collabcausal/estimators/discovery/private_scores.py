"""Differentially private release of the ANM scores and direction (paper 002, sections 4 and 5).

What is protected (``protect``), and how, for each score:

=========  ========  ==========================================================================
score      protect   mechanism (total budget ``(eps, delta)``; both scores released)
=========  ========  ==========================================================================
spearman   test      ``Lap(2 Delta / eps)`` on each score, ``Delta = 30/m`` (Theorem 1)
kendall    test      same with ``Delta = 4/m`` (Theorem 1)
hsic       test      the HSIC norm ``sqrt(trace(KHLH))/m``, same with ``Delta = 4 (m - 1)/m^2``
hsic       train     same with ``Delta = 8 / (n lam^{3/2} h_r)`` (Theorem 5, feature map 1/h_r-Lipschitz)
hsic       both      same with the larger of the two (a row is in one split only)
iqr        test      four Dwork-Lei log-IQRs, each ``(eps/4, delta/4)``-DP (section 4.3)
spearman   train     distance-to-instability release of each exact score at ``(eps/2, delta/2)``
kendall    train     (Theorem 6 with the lower bound of section 5.1)
=========  ========  ==========================================================================

One subject is one ``(x, y)`` row, which enters both scores (and all four IQRs), hence the
factor 2 (and 4): basic composition. Rows outside the protected split have no guarantee.

``form="margin"`` (the Laplace releases only) releases the margin ``s_{Y->X} - s_{X->Y}`` alone with one
``Lap(2 Delta / eps)``: the same scale, but on the margin instead of on each score, so the margin's noise
has sd ``sqrt(2) b`` instead of ``2 b`` (docs/causal-discovery.md, "A margin-only release"). The margin moves
by at most ``2 Delta`` when one row is substituted (each score by at most ``Delta``).
HSIC is released as the norm of the cross-covariance operator (:func:`released_scores`), a monotone
map of HSIC with a much smaller sensitivity (docs/causal-discovery.md, "A tighter HSIC bound").
``variance`` is non-private only.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from collabcausal.errors import InputError
from collabcausal.estimators.discovery.agreement import agreement_lower_bound, iqr_agreement, margin_agreement
from collabcausal.estimators.discovery.anm import AdditiveNoiseModel, DirectionScores, check_score, decide
from collabcausal.estimators.discovery.propose_test_release import private_log_iqr, stability_release
from collabcausal.estimators.discovery.scores import hsic_norm
from collabcausal.estimators.discovery.sensitivity import (
    LAPLACE_SCORES,
    hsic_train_sensitivity,
    rank_stability_distance,
    score_sensitivity,
)
from collabcausal.estimators.dp.mechanisms import laplace, laplace_scale
from collabcausal.estimators.validation import check_delta, check_epsilon

PROTECTIONS: dict[str, tuple[str, ...]] = {
    "spearman": ("test", "train"),
    "kendall": ("test", "train"),
    "hsic": ("test", "train", "both"),
    "iqr": ("test",),
    "hsic_p": (),
    "variance": (),
    "likelihood": (),
    "likelihood_kde": (),
    "likelihood_kde_in": (),
    "likelihood_hsic": (),
}
IQR_LOOKS = 4
FORMS = ("scores", "margin")
"""What a Laplace release publishes: both scores, each with its own noise, or their margin alone."""


@dataclass(frozen=True)
class PrivateDiscovery:
    """One private ANM release.

    Attributes
    ----------
    score, protect : str
    epsilon, delta : float
        The total privacy cost of the release.
    answered : bool
        False when propose-test-release refused (then direction and scores are None).
    direction : str or None
        ``"x->y"`` or ``"y->x"`` from the private scores (or margin).
    score_xy, score_yx : float or None
        Private ``s_{X->Y}``, ``s_{Y->X}``; None for ``form="margin"``.
    agreement : float or None
        A 95% lower confidence bound on the probability that the private decision equals the
        non-private one (Theorem 2 for Laplace scores, Theorem 4 for IQR, one Laplace variable for the
        margin form, evaluated by :func:`~collabcausal.estimators.discovery.agreement.agreement_lower_bound`
        from the released margin; 1 for a distance-to-instability release). Post-processing of the release.
    noise_scale : float or None
        Laplace scale on each released score (on each log-IQR for ``iqr``; on the margin for
        ``form="margin"``); None for exact releases.
    m_test, n_train : int
    form : str
        ``"scores"`` or ``"margin"`` (:data:`FORMS`).
    margin : float or None
        ``s_{Y->X} - s_{X->Y}`` (> 0 favours ``x->y``): released with its own noise for ``form="margin"``,
        the difference of the released scores otherwise.
    """

    score: str
    protect: str
    epsilon: float
    delta: float
    answered: bool
    direction: str | None
    score_xy: float | None
    score_yx: float | None
    agreement: float | None
    noise_scale: float | None
    m_test: int
    n_train: int
    form: str = "scores"
    margin: float | None = None


def check_protection(score: str, protect: str, epsilon: float, delta: float) -> tuple[str, str, float, float]:
    """Validate a private request before anything is computed; returns the cleaned values."""
    key = check_score(score)
    eps = check_epsilon(epsilon)
    dlt = check_delta(delta)
    allowed = PROTECTIONS[key]
    if protect not in allowed:
        fix = f"use protect in {list(allowed)}" if allowed else "use spearman, kendall, hsic or iqr"
        raise InputError(f"score {key!r} has no private release protecting {protect!r}", fix)
    if (key == "iqr" or (protect == "train" and key != "hsic")) and dlt == 0.0:
        raise InputError(
            f"the {key} release ({protect}) is propose-test-release and needs delta > 0", "pass delta=1e-6"
        )
    return key, protect, eps, dlt


def check_form(form: str, score: str, protect: str) -> str:
    """:data:`FORMS`; ``"margin"`` only for a Laplace release (no propose-test-release one releases a margin)."""
    if form not in FORMS:
        raise InputError(f"release form {form!r} is not one of {list(FORMS)}", "use 'scores' or 'margin'")
    if form == "margin" and not (score in LAPLACE_SCORES and (protect != "train" or score == "hsic")):
        raise InputError(f"the {score} release protecting {protect!r} has no margin-only form (it is not Laplace "
                         "noise on two scores)", "ask for the scores form, or the hsic score")
    return form


def split_sensitivity(
    score: str, protect: str, m: int, n_train: int, regularization: float, residual_width: float
) -> float:
    """Sensitivity ``Delta`` of one score to one substituted row of the protected split(s).

    A function of public facts only (the split sizes and the request's parameters), so an analyst
    can compute the noise scale a party's reply must carry.
    """
    test = score_sensitivity(score, m)
    if protect == "test":
        return test
    train = hsic_train_sensitivity(n_train, regularization, residual_width)
    return train if protect == "train" else max(test, train)


def score_sensitivity_for(score: str, protect: str, model: AdditiveNoiseModel) -> float:
    """:func:`split_sensitivity` of a fitted model."""
    return split_sensitivity(score, protect, model.m_test_, model.n_train_, model.regularization, model.hsic_widths[1])


def released_scores(model: AdditiveNoiseModel, score: str) -> DirectionScores:
    """The exact values a Laplace release adds noise to: the model's scores, HSIC as its norm (:func:`hsic_norm`)."""
    exact = model.scores(score)
    if exact.score != "hsic":
        return exact
    m = model.m_test_
    return DirectionScores("hsic", hsic_norm(exact.score_xy, m), hsic_norm(exact.score_yx, m), exact.direction)


def laplace_noise_scale(score: str, protect: str, epsilon: float, model: AdditiveNoiseModel) -> float:
    """Laplace scale on each of the two scores: ``2 Delta / eps`` (one row enters both scores)."""
    return laplace_scale(2.0 * score_sensitivity_for(score, protect, model), epsilon)


def iqr_look_budget(epsilon: float, delta: float) -> tuple[float, float]:
    """Per-look ``(eps_0, delta_0) = (eps/12, delta/4)``: four ``(3 eps_0, delta_0)`` Dwork-Lei releases."""
    return epsilon / (3.0 * IQR_LOOKS), delta / IQR_LOOKS


def release(
    model: AdditiveNoiseModel,
    score: str,
    *,
    epsilon: float,
    delta: float = 0.0,
    protect: str = "test",
    form: str = "scores",
    rng: np.random.Generator | None = None,
) -> PrivateDiscovery:
    """Privately release both scores (or with ``form="margin"`` their margin) and the direction.

    From a fitted :class:`AdditiveNoiseModel`. ``rng=None`` draws every noise variable with OpenDP
    (what a party does); a numpy Generator gives reproducible, NOT private draws for simulations.
    """
    key, protect, eps, dlt = check_protection(score, protect, epsilon, delta)
    form = check_form(form, key, protect)
    tuned = [split for split in ("test", "train") if protect in (split, "both") and model.data_tuned(split)]
    if tuned:
        raise InputError(
            f"the model's parameters were tuned on the {tuned[0]} split, which this release protects",
            "use regression='krr' with fixed numbers for kernel_width, regularization and hsic_widths",
        )
    if model.noise != "additive":
        raise InputError(
            f"no private release for noise={model.noise!r}: the sensitivities assume residuals bounded by the "
            "[-1, 1] scale, which standardised residuals are not", "use noise='additive'",
        )
    if protect != "test" and (model.x_bounds is None or model.y_bounds is None):
        raise InputError(
            f"protecting the training split needs public bounds for x and y (got {model.x_bounds}, {model.y_bounds})",
            "declare x_bounds and y_bounds; scaling by the data's own range is not private",
        )
    if form == "margin":
        margin, agree, scale = _release_margin(model, key, protect, eps, rng)
        return PrivateDiscovery(score=key, protect=protect, epsilon=eps, delta=dlt, answered=True,
                                direction=decide(0.0, margin), score_xy=None, score_yx=None, agreement=agree,
                                noise_scale=scale, m_test=model.m_test_, n_train=model.n_train_, form=form,
                                margin=margin)
    if key == "iqr":
        s_xy, s_yx, agree, scale = _release_iqr(model, eps, dlt, rng)
    elif protect == "train" and key != "hsic":
        s_xy, s_yx, agree, scale = _release_stable(model, key, eps, dlt, rng)
    else:
        s_xy, s_yx, agree, scale = _release_laplace(model, key, protect, eps, rng)
    answered = s_xy is not None and s_yx is not None
    return PrivateDiscovery(
        score=key,
        protect=protect,
        epsilon=eps,
        delta=dlt,
        answered=answered,
        direction=decide(s_xy, s_yx) if answered else None,
        score_xy=s_xy,
        score_yx=s_yx,
        agreement=agree,
        noise_scale=scale,
        m_test=model.m_test_,
        n_train=model.n_train_,
        form=form,
        margin=s_yx - s_xy if answered else None,
    )


_Released = tuple[float | None, float | None, float | None, float | None]


def _release_laplace(
    model: AdditiveNoiseModel, key: str, protect: str, eps: float, rng: np.random.Generator | None
) -> _Released:
    exact = released_scores(model, key)
    sensitivity = 2.0 * score_sensitivity_for(key, protect, model)  # L1 over the two scores
    noisy = laplace(np.array([exact.score_xy, exact.score_yx]), sensitivity, eps, rng=rng)
    sigma = laplace_scale(sensitivity, eps)
    s_xy, s_yx = float(noisy[0]), float(noisy[1])
    return s_xy, s_yx, agreement_lower_bound(s_yx - s_xy, sigma), sigma


def _release_margin(
    model: AdditiveNoiseModel, key: str, protect: str, eps: float, rng: np.random.Generator | None
) -> tuple[float, float, float]:
    """``s_{Y->X} - s_{X->Y} + Lap(2 Delta / eps)``: one substituted row moves each score by at most ``Delta``,
    so the margin by at most ``2 Delta`` (docs/causal-discovery.md, "A margin-only release")."""
    sensitivity = 2.0 * score_sensitivity_for(key, protect, model)
    noisy = float(laplace(np.array([released_scores(model, key).margin]), sensitivity, eps, rng=rng)[0])
    sigma = laplace_scale(sensitivity, eps)
    return noisy, agreement_lower_bound(noisy, sigma, margin_agreement), sigma


def _release_iqr(model: AdditiveNoiseModel, eps: float, dlt: float, rng: np.random.Generator | None) -> _Released:
    eps_one, delta_one = iqr_look_budget(eps, dlt)
    sigma = 1.0 / eps_one
    looks = (model.x_test_, model.residual_y_, model.y_test_, model.residual_x_)
    parts = [private_log_iqr(values, eps_one, delta_one, rng=rng) for values in looks]
    if any(p is None for p in parts):
        return None, None, None, sigma
    s_xy, s_yx = parts[0] + parts[1], parts[2] + parts[3]
    return s_xy, s_yx, agreement_lower_bound(s_yx - s_xy, sigma, iqr_agreement), sigma


def _release_stable(
    model: AdditiveNoiseModel, key: str, eps: float, dlt: float, rng: np.random.Generator | None
) -> _Released:
    exact = model.scores(key)
    pairs = ((exact.score_xy, model.residual_y_), (exact.score_yx, model.residual_x_))
    released = [
        stability_release(
            s, rank_stability_distance(r, model.n_train_, model.regularization), eps / 2, dlt / 2, rng=rng
        )
        for s, r in pairs
    ]
    if released[0] is None or released[1] is None:
        return None, None, None, None
    return released[0], released[1], 1.0, None
