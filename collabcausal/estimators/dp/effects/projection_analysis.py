"""The best linear projection of the CATE and subgroup effects from released sums (analyst side; post-processing).

docs/dp-cate-projection.md. The projection ``beta = M^{-1} S`` (Semenova & Chernozhukov 2021, eq. 2.5)
uses ``S = (aipw_ate, blp_1, ..., blp_p)`` of the score release (:mod:`.projection`; ``blp_0`` for
``aipw_ate`` when a clip or a centre gives the intercept row its own, ``blp_meat_0_0`` for ``aipw_ate_sq`` when a
clip does) and the
modifiers' Gram matrix ``M = sum m m^T`` from the statistics release (its blocks hold every
covariate cross-product, per arm and fold: summed over both; ``M_00 = n`` is public). Its variance
has the parts of :mod:`.pooling`, as matrices:

* sampling (HC0 sandwich, Semenova & Chernozhukov 2021, Theorem 2.1): ``M^{-1} Q M^{-1}`` with the
  released meat ``Q = sum v v^T`` of the values ``v`` the point sums add (:mod:`.projection`). Centred on
  a pilot near the projection, ``v_q = m_q (phi - m^T gamma)`` (clipped) and ``Q`` is the centred meat
  ``sum (phi - m^T beta)^2 m m^T`` to first order; uncentred it exceeds that by about
  ``sum (m^T beta)^2 m m^T`` (positive semidefinite: conservative by about ``beta^2 / var(phi)``);
* DP noise of ``S``: ``M^{-1} diag(sd_S^2) M^{-1}``;
* DP noise of ``M`` (delta method): ``d beta = -M^{-1} E beta``, each released entry of ``E``
  independent with a known sd; with a centre ``gamma`` (the ``blp_q`` sum ``m_q (phi - m^T gamma)``),
  ``beta = gamma + M^{-1} S`` and ``d beta = -M^{-1} E (beta - gamma)``;
* the noise of ``Q``: one sd of the sandwich's diagonal, as :mod:`.pooling` adds for the ATE;
* nuisance noise: copy ``b`` of the replicate sums moves ``beta`` by ``M^{-1} Delta^b``, and with a centre by
  ``gamma_b - gamma + M^{-1} Delta^b`` (copy ``b``'s sums are centred on its own pilot ``gamma_b``, so the pilot's
  noise, which the clip passes on, is counted); the mean square minus the replicate sums' own noise, floored at 0.

Subgroup effects are ratios ``sum_{c} phi / n_c`` of released sums: :func:`~.pooling.estimate_effect`
with their :class:`~.pooling.Ratio`. Simultaneous intervals over the subgroups: Bonferroni
(``alpha / number of bins``), valid whatever their correlation.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.stats import norm

from collabcausal.errors import InputError
from collabcausal.estimators.dp.effects.design import FeatureMap
from collabcausal.estimators.dp.effects.folds import fold_size
from collabcausal.estimators.dp.effects.nuisances import NuisanceModel
from collabcausal.estimators.dp.effects.pooling import DPEffect, Ratio, estimate_effect
from collabcausal.estimators.dp.effects.projection import Projection
from collabcausal.estimators.dp.effects.statistics import ArmStatistics

SIMULTANEOUS = ("none", "bonferroni")


def modifier_gram(
    statistics: ArrayLike, feature_map: FeatureMap, projection: Projection, n: int, noise_sd: float,
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """``M = sum m m^T`` over both arms and every fold of the released ``statistics`` (one row per fold), and
    the noise sd of each entry (``M_00 = n`` is public, sd 0).

    ``noise_sd`` is that of one entry of one row: an entry of ``M`` sums ``2 K`` of them (both arms, K
    folds), an intercept column ``2 K S`` (S site one-hots).
    """
    rows = np.atleast_2d(np.asarray(statistics, dtype=float))
    total = sum((ArmStatistics.unpack(r, feature_map.dim) for r in rows[1:]), ArmStatistics.unpack(rows[0],
                                                                                                    feature_map.dim))
    G = total.gram[0] + total.gram[1]
    S = feature_map.n_sites
    cols = [S + j for j in projection.modifiers]
    p = len(cols)
    M = np.empty((p + 1, p + 1))
    M[0, 0] = float(n)
    M[0, 1:] = M[1:, 0] = G[:S][:, cols].sum(axis=0)
    M[1:, 1:] = G[np.ix_(cols, cols)]
    per_entry = math.sqrt(2 * rows.shape[0]) * float(noise_sd)
    sd = np.full((p + 1, p + 1), per_entry)
    sd[0, :] = sd[:, 0] = per_entry * math.sqrt(S)
    sd[0, 0] = 0.0
    return M, sd


def pooled_gram(gram: NDArray[np.float64], gram_sd: NDArray[np.float64], sums: Mapping[str, float],
                noise_sd: Mapping[str, float]) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """``M`` and its entries' noise sds with the score release's ``gram_a_b`` averaged in (where released).

    Two independent unbiased releases of one entry, ``x_1`` (sd ``s_1``) and ``x_2`` (sd ``s_2``), pool
    by inverse variance to ``(x_1 / s_1^2 + x_2 / s_2^2) / (1 / s_1^2 + 1 / s_2^2)`` with sd
    ``(1 / s_1^2 + 1 / s_2^2)^{-1/2}`` (the minimum-variance unbiased linear combination; e.g. Cochran
    1954). Entries the score release does not carry, and ``M_00 = n``, stay.
    """
    M, sd = np.array(gram, dtype=float), np.array(gram_sd, dtype=float)
    for i in range(M.shape[0]):
        for j in range(i, M.shape[0]):
            name = f"gram_{i}_{j}"
            if name in sums and sd[i, j] > 0:
                w1, w2 = 1.0 / sd[i, j] ** 2, 1.0 / noise_sd[name] ** 2
                M[i, j] = M[j, i] = (w1 * M[i, j] + w2 * sums[name]) / (w1 + w2)
                sd[i, j] = sd[j, i] = 1.0 / math.sqrt(w1 + w2)
    return M, sd


def effect_projection(
    statistics: ArrayLike, feature_map: FeatureMap, projection: Projection, models: Sequence[NuisanceModel],
    site_counts: Sequence[int], gram: NDArray[np.float64],
) -> NDArray[np.float64]:
    """``gamma = M^{-1} C``: least squares on ``m`` of the outcome models' effect, from the statistics release.

    Fold ``k``'s subjects are scored with model ``k``, whose effect ``g_k(d) = R d^T (beta_1^k - beta_0^k)``
    (before the models' clip to the outcome range) is linear in the design row ``d``, so
    ``C = sum_k sum_{i in k} m_i g_k(d_i) = R sum_k L_k (beta_1^k - beta_0^k)`` with ``L_k`` the rows
    ``sum_i m_i d_i^T`` of fold ``k``'s Gram matrix (both arms): the modifiers' rows and, for the
    intercept, the sum of the site one-hot rows, whose site block is each site's public count in fold
    ``k`` (:func:`~.folds.fold_size`). ``gram`` is ``M`` (:func:`modifier_gram`).
    Post-processing of the statistics release: ``gamma`` is public once computed, the centre of the
    projection's sums (:class:`~.projection.Projection`'s pilot, docs/dp-cate-projection.md).
    """
    rows = np.atleast_2d(np.asarray(statistics, dtype=float))
    K, S, d = rows.shape[0], feature_map.n_sites, feature_map.dim
    cols = [S + j for j in projection.modifiers]
    C = np.zeros(len(cols) + 1)
    for k, row in enumerate(rows):
        stats = ArmStatistics.unpack(row, d)
        G = stats.gram[0] + stats.gram[1]
        effect = feature_map.outcome_width * (models[k].outcome_coef[1] - models[k].outcome_coef[0])
        counts = np.array([fold_size(int(n), K, k) for n in site_counts], dtype=float)
        C[0] += counts @ effect[:S] + G[:S, S:].sum(axis=0) @ effect[S:]
        C[1:] += G[cols] @ effect
    return gram_inverse(gram) @ C


def gram_inverse(gram: NDArray[np.float64]) -> NDArray[np.float64]:
    """``M^{-1}`` of the modifiers' released Gram matrix, or one line saying it is singular."""
    try:
        return np.linalg.inv(gram)
    except np.linalg.LinAlgError:
        raise InputError("the modifiers' released Gram matrix is singular", "declare modifiers that vary") from None


@dataclass(frozen=True)
class Coefficient:
    """One coefficient of the projection, on the modifier's scale in ``[-1, 1]`` and per raw unit.

    ``name`` is ``"intercept"`` (the projected effect at the midpoint of every modifier's range) or
    the modifier; ``per_unit`` and its interval divide by ``(hi - lo) / 2`` (the intercept's stay).
    """

    name: str
    estimate: float
    se: float
    ci_low: float
    ci_high: float
    per_unit: float
    per_unit_ci: tuple[float, float]
    sampling_var: float
    noise_var: float
    gram_noise_var: float
    variance_uncertainty: float
    nuisance_var: float
    noise_share: float
    alpha: float

    def to_dict(self) -> dict[str, object]:
        """JSON-ready."""
        return asdict(self) | {"per_unit_ci": list(self.per_unit_ci)}


def best_linear_projection(
    sums: Mapping[str, float], noise_sd: Mapping[str, float], gram: NDArray[np.float64],
    gram_sd: NDArray[np.float64], names: Sequence[str], scales: Sequence[float], *,
    replicates: Sequence[Mapping[str, float]] = (), replicate_sd: Mapping[str, float] | None = None,
    alpha: float = 0.05, pilot: Sequence[float] | None = None,
    replicate_pilots: Sequence[Sequence[float]] | None = None,
) -> list[Coefficient]:
    """The projection's coefficients with intervals (module docstring).

    ``names`` are the modifiers, ``scales`` their ``(hi - lo) / 2``; ``sums`` and ``noise_sd`` map the
    released sums' names (:mod:`.projection`) to values and noise sds, ``replicates[b]`` a point sum's
    name to its replicate sum of copy ``b``. With a ``pilot`` ``gamma`` (centred ``blp_q``: :mod:`.projection`),
    ``beta = gamma + M^{-1} S``, and copy ``b``, centred on ``replicate_pilots[b]``, moves it by
    ``gamma_b - gamma + M^{-1} Delta^b`` (module docstring).
    """
    p = len(names)
    keys = ["blp_0" if "blp_0" in sums else "aipw_ate"] + [f"blp_{q}" for q in range(1, p + 1)]
    S = np.array([sums[k] for k in keys])
    gamma = np.zeros(p + 1) if pilot is None else np.asarray(pilot, dtype=float)
    sd_S = np.array([noise_sd[k] for k in keys])

    def meat_name(i: int, j: int) -> str:
        return "aipw_ate_sq" if i == j == 0 and "blp_meat_0_0" not in sums else f"blp_meat_{i}_{j}"

    Q = np.empty((p + 1, p + 1))
    sd_Q = np.empty((p + 1, p + 1))
    for i in range(p + 1):
        for j in range(i, p + 1):
            Q[i, j] = Q[j, i] = sums[meat_name(i, j)]
            sd_Q[i, j] = sd_Q[j, i] = noise_sd[meat_name(i, j)]
    Minv = gram_inverse(gram)
    moved = Minv @ S  # beta - gamma: what the Gram's noise multiplies
    beta = gamma + moved
    sampling = np.maximum(np.diag(Minv @ Q @ Minv), 0.0)
    noise = np.diag(Minv @ np.diag(sd_S**2) @ Minv)
    upper = [(i, j) for i in range(p + 1) for j in range(i, p + 1)]
    # d beta = -Minv E (beta - gamma); entry (i, j) of E (and (j, i)) moves beta by -(Minv[:, i] v_j + Minv[:, j] v_i),
    # v = beta - gamma
    gram_noise = sum(((Minv[:, i] * moved[j] + (Minv[:, j] * moved[i] if i != j else 0.0)) * gram_sd[i, j]) ** 2
                     for i, j in upper)
    unc = np.sqrt(sum(((2.0 if i != j else 1.0) * Minv[:, i] * Minv[:, j] * sd_Q[i, j]) ** 2 for i, j in upper))
    nuisance = np.zeros(p + 1)
    if replicates:
        rsd = replicate_sd or {}
        shifts = np.zeros((len(replicates), p + 1)) if replicate_pilots is None else (
            np.asarray(replicate_pilots, dtype=float) - gamma)
        moves = np.array([Minv @ np.array([rep.get(k, 0.0) for k in keys]) for rep in replicates]) + shifts
        own = np.diag(Minv @ np.diag(np.array([rsd.get(k, 0.0) for k in keys]) ** 2) @ Minv)
        nuisance = np.maximum((moves**2).mean(axis=0) - own, 0.0)
    var = sampling + noise + gram_noise + unc + nuisance
    z = float(norm.ppf(1 - alpha / 2))
    out = []
    for q, name in enumerate(["intercept", *names]):
        se = float(math.sqrt(var[q]))
        scale = 1.0 if q == 0 else float(scales[q - 1])
        lo, hi = beta[q] - z * se, beta[q] + z * se
        out.append(Coefficient(name, float(beta[q]), se, float(lo), float(hi), float(beta[q] / scale),
                               (float(lo / scale), float(hi / scale)), float(sampling[q]), float(noise[q]),
                               float(gram_noise[q]), float(unc[q]), float(nuisance[q]),
                               float(noise[q] / var[q]) if var[q] > 0 else 0.0, alpha))
    return out


def subgroup_effects(
    sums: Mapping[str, float], noise_sd: Mapping[str, float], projection: Projection, labels: Sequence[Sequence[str]],
    *, replicates: Sequence[Mapping[str, float]] = (), replicate_sd: Mapping[str, float] | None = None,
    alpha: float = 0.05, simultaneous: str = "none",
) -> list[DPEffect]:
    """The AIPW effect in each declared bin (``estimand``: its label), Bonferroni-adjusted if ``simultaneous``."""
    if simultaneous not in SIMULTANEOUS:
        raise InputError(f"simultaneous = {simultaneous!r} is not one of {SIMULTANEOUS}", 'use "bonferroni" or "none"')
    n_bins = sum(g.n_bins for g in projection.partitions)
    level = alpha / n_bins if simultaneous == "bonferroni" and n_bins else alpha
    out = []
    for g, part in enumerate(projection.partitions):
        for c in range(part.n_bins):
            cell = f"cell_{g}_{c}"
            ratio = Ratio(cell, f"{cell}_n", f"{cell}_sq", cell, f"{cell}_n")
            out.append(estimate_effect(sums, noise_sd, 0, "aipw", labels[g][c], alpha=level, replicates=replicates,
                                       replicate_sd=replicate_sd, ratios=((ratio,), ())))
    return out


def bin_labels(projection: Projection, names: Sequence[str]) -> list[list[str]]:
    """``"age in [18, 50)"``, ..., the last bin closed."""
    return [[f"{names[g.column]} in [{g.edges[c]:g}, {g.edges[c + 1]:g}{']' if c == g.n_bins - 1 else ')'}"
             for c in range(g.n_bins)] for g in projection.partitions]
