"""A direction only when the evidence names one: otherwise "undecided", with the odds (paper 002).

Paper 002's rule (:func:`~collabcausal.estimators.discovery.anm.decide`) always names a direction,
also when the margin ``s_{Y->X} - s_{X->Y}`` is far inside the noise (measured: ``simulate discovery
--rows 4 --pairs age,re74 --epsilon 1`` named one with a margin of -141 against a noise sd of 170)
or when the two columns are independent. Here a direction is named only when it is right with
probability at least :data:`DECISION_CONFIDENCE`; otherwise the decision is :data:`UNDECIDED`, and
the favoured direction and its probability are reported beside it.

* Private releases (the noise is known): with a flat prior on the exact margin and noise ``D``
  symmetric about 0, ``P(sign of the exact margin = sign of the released one) = P(D < |margin|)``.
  For one release with ``Lap(b)`` on each score that is paper 002's Theorem 2 expression at the
  released margin (:func:`~collabcausal.estimators.discovery.agreement.laplace_agreement`; Theorem
  4 for IQR's four log-IQRs; ``1 - exp(-|margin|/b)/2`` for a margin released with one ``Lap(b)``);
  for the analyst's weighted combination of several parties' margins the normal approximation
  ``Phi(|margin| / sd)``. This accounts for the DP noise only, not for sampling: post-processing of
  the release, it costs no privacy.
* The exact, non-private test (:func:`independence_decision`): the residuals of the causal
  direction are independent of the input and those of the other direction are not (Mooij et al.
  2016, section 2); HSIC independence tests of both (gamma approximation, Gretton et al. 2008)
  decide a direction only when exactly one direction's residuals pass at level ``alpha``.
"""

from __future__ import annotations

from dataclasses import dataclass

from scipy.stats import norm

from collabcausal.estimators.discovery.agreement import iqr_agreement, laplace_agreement, margin_agreement
from collabcausal.estimators.discovery.anm import X_TO_Y, Y_TO_X, AdditiveNoiseModel, decide

UNDECIDED = "undecided"
DECISION_CONFIDENCE = 0.95
"""A direction is named when it is right with at least this probability."""
INDEPENDENCE_ALPHA = 0.05
"""Level of the HSIC independence tests of :func:`independence_decision`."""


@dataclass(frozen=True)
class Decision:
    """A direction, or :data:`UNDECIDED`, with the direction the evidence favours.

    Attributes
    ----------
    direction : str
        ``"x->y"``, ``"y->x"`` or ``"undecided"``.
    favoured : str
        ``"x->y"`` or ``"y->x"``: the side of the margin (paper 002's decision).
    probability : float or None
        The probability that ``favoured`` is right (private releases); None for the exact test.
    """

    direction: str
    favoured: str
    probability: float | None = None

    def label(self, x: str, y: str) -> str:
        """``"x -> y (probability 0.97)"`` or ``"undecided (y -> x more likely, probability 0.80)"``."""
        favoured = f"{x} -> {y}" if self.favoured == X_TO_Y else f"{y} -> {x}"
        odds = "" if self.probability is None else f"probability {self.probability:.2f}"
        if self.direction != UNDECIDED:
            return f"{favoured} ({odds})" if odds else favoured
        return f"undecided ({favoured} more likely{', ' + odds if odds else ''})"


def noisy_decision(margin: float, probability: float, confidence: float = DECISION_CONFIDENCE) -> Decision:
    """The decision for a released ``margin`` whose favoured side is right with ``probability``."""
    favoured = X_TO_Y if margin > 0 else Y_TO_X
    return Decision(favoured if probability >= confidence else UNDECIDED, favoured, float(probability))


def release_probability(margin: float, noise_scale: float | None, score: str = "hsic", form: str = "scores") -> float:
    """P(the favoured direction is right) for one private release (module docstring): 1 without noise.

    ``form="margin"``: one ``Lap(noise_scale)`` on the margin itself (``1 - exp(-|margin|/b)/2``).
    """
    if noise_scale is None:
        return 1.0
    agreement = margin_agreement if form == "margin" else iqr_agreement if score == "iqr" else laplace_agreement
    return float(agreement(abs(float(margin)), float(noise_scale)))


def gaussian_probability(margin: float, noise_sd: float) -> float:
    """``Phi(|margin| / sd)``: P(the favoured direction is right) under normal noise of sd ``noise_sd``."""
    return 1.0 if noise_sd == 0 else float(norm.cdf(abs(float(margin)) / float(noise_sd)))


def independence_decision(
    p_xy: float, p_yx: float, score_xy: float, score_yx: float, alpha: float = INDEPENDENCE_ALPHA
) -> Decision:
    """The exact test's decision from the HSIC independence p-values of both directions' residuals.

    ``x->y`` when ``(x', r_Y)`` passes the test (``p_xy > alpha``) and ``(y', r_X)`` does not, and the
    reverse; both independent (e.g. two independent columns) or both dependent (e.g. a confounder,
    or a model the ANM does not fit) is :data:`UNDECIDED`. ``favoured`` is paper 002's decision.
    """
    favoured = decide(score_xy, score_yx)
    independent_xy, independent_yx = p_xy > alpha, p_yx > alpha
    if independent_xy == independent_yx:
        return Decision(UNDECIDED, favoured)
    return Decision(X_TO_Y if independent_xy else Y_TO_X, favoured)


def exact_decision(model: AdditiveNoiseModel, alpha: float = INDEPENDENCE_ALPHA) -> Decision:
    """:func:`independence_decision` of a fitted model's exact HSIC scores and p-values (NOT private)."""
    p_xy, p_yx = model.independence_pvalues()
    scores = model.scores("hsic")
    return independence_decision(p_xy, p_yx, scores.score_xy, scores.score_yx, alpha)
