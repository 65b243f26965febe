"""The projection's point sums, shaped from the statistics release: a clip per modifier and a budget split.

docs/dp-cate-projection.md, "Budget". Both are functions of released numbers (the modifiers' Gram
matrix ``M`` of :func:`~.projection_analysis.modifier_gram`) and public ranges: post-processing, sent
with the score request as the nuisance models are, so they cost no privacy; a party calibrates its
noise to what it is sent (:func:`~.projection.projection_layout`), and neither can raise the release's
sensitivity (:func:`~.projection.check_projection`).

**A clip per modifier** (:func:`modifier_clips`). ``blp_q = sum z_q phi`` ranges over ``[-a, a]``
(:mod:`.projection`), but ``|z_q phi| <= |z_q| a`` reaches ``kappa a`` only where ``|z_q| >= kappa``.
With ``kappa_q = min(1, k rms(z_q))``, ``rms(z_q) = sqrt(M_qq / n)``, Markov's inequality on ``z_q^2``
bounds the share of subjects the clip can touch by ``1 / k^2``, and it touches one of them only when
its ``|phi|`` exceeds ``kappa_q a / |z_q|``. The sum's range, and with it its noise sd ``sigma r_q / w_q``,
shrinks by ``kappa_q``; its weight (and so the release's sensitivity, ``w_q`` per sum) is unchanged. The
price is a bias of the slope (the clipped products' mean), measured in docs/dp-cate-projection.md.
A modifier spread over its whole range (a binary one: ``rms = 1``) keeps ``kappa = 1``.

**The budget split** (:func:`noise_trace_weights`). The score release adds ``N(0, sigma^2)`` to every ``s_j w_j / r_j``
(:mod:`.scores`), so point sum ``j`` carries noise of sd ``sigma r_j / w_j`` in its own units, and
``sigma`` is proportional to the release's L2 sensitivity, in which each projection point sum
``blp_q`` counts ``w_q^2`` (:mod:`.projection`). The projection ``beta = M^{-1} S`` (Semenova &
Chernozhukov 2021, eq. 2.5) moves by ``M^{-1} e`` with ``e ~ N(0, diag(sigma^2 r_j^2 / w_j^2))``, so the
DP-noise variances of its coefficients sum to

    ``tr(M^{-1} D M^{-1}) = sigma^2 sum_j c_j r_j^2 / w_j^2``,  ``c_j = (M^{-2})_jj = sum_q (M^{-1})_qj^2``.

Holding the share of the squared sensitivity that ``J`` point sums of weight 1 take, ``sum_j w_j^2 = J``
(so ``sigma``, and the noise of every other sum, the ATE's and the subgroups', stays as it is), the
minimum over the weights is at

    ``w_j^2 = J sqrt(c_j) r_j / sum_k sqrt(c_k) r_k``

by Cauchy-Schwarz, ``(sum_j c_j r_j^2 / w_j^2)(sum_j w_j^2) >= (sum_j sqrt(c_j) r_j)^2`` with equality iff
``w_j^2`` is proportional to ``sqrt(c_j) r_j``: the trace (A-) criterion of optimal design (Pukelsheim
2006, *Optimal Design of Experiments*, section 6.2), here over the noise budget instead of the design.
The noise trace falls from ``sigma^2 sum_j c_j r_j^2`` to ``sigma^2 (sum_j sqrt(c_j) r_j)^2 / J``. When
the intercept row has no sums of its own (no clip below the score's bound), its noise is the ATE's,
fixed, and only ``blp_1 .. blp_p`` are shared out (their ``c_j`` still the columns of ``M^{-2}``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from collabcausal.estimators.dp.effects.projection import MIN_CLIP, MIN_WEIGHT

MODIFIER_CLIP = 2.0
"""Default ``k`` of :func:`modifier_clips`: at most 1/4 of the subjects can be touched (Markov). Measured on the
benchmark design (docs/dp-cate-projection.md): a Gaussian modifier on +-3.5 sd gets ``kappa = 0.59``, its slope's
noise sd falls by that factor and it shifts by +0.005 (binary outcome) and -0.005 (continuous), against sampling
SEs of 0.012 and 0.03."""
GRAM_WEIGHT = 0.25
"""Default weight of the Gram entries released again with the scores (:mod:`.projection`): a bin count's, the
other denominator of a released ratio."""


def modifier_clips(gram: NDArray[np.float64], n: int, k: float) -> tuple[float, ...]:
    """``kappa_q = min(1, k sqrt(M_qq / n))`` per modifier (rows 1.. of ``gram``; module docstring).

    A released diagonal entry that is not positive (noise) keeps ``kappa = 1``; ``kappa`` is at least
    :data:`~.projection.MIN_CLIP`.
    """
    diagonal = np.diag(np.asarray(gram, dtype=float))[1:]
    rms = np.sqrt(np.where(diagonal > 0, diagonal, float(n)) / float(n))
    return tuple(float(v) for v in np.clip(float(k) * rms, MIN_CLIP, 1.0))


def noise_trace_weights(gram: NDArray[np.float64], widths: Sequence[float], first: int) -> tuple[float, ...] | None:
    """The weights of the point sums of rows ``first .. p`` of ``gram`` (module docstring), or ``None``.

    ``widths`` are those sums' ranges ``r_j``; ``first`` is 0 when the intercept row has its own sum
    (``blp_0``), 1 when it is the ATE's. ``None`` (keep weight 1 each) when the released Gram matrix is
    not invertible or would starve a sum below :data:`~.projection.MIN_WEIGHT`.
    """
    try:
        inverse = np.linalg.inv(np.asarray(gram, dtype=float))
    except np.linalg.LinAlgError:
        return None
    c = (inverse**2).sum(axis=0)[first:]
    share = np.sqrt(c) * np.asarray(widths, dtype=float)
    if share.size == 0 or not np.all(np.isfinite(share)) or not np.all(share > 0):
        return None
    w = np.sqrt(share.size * share / share.sum())
    if not np.all(w >= MIN_WEIGHT):
        return None
    return tuple(float(v) for v in w)
