"""Estimates, standard errors and DP noise shares from released score sums (docs/dp-effects.md, step 5).

Every estimate is a ratio ``a / b`` of released sums (for AIPW-ATE, ``b = n``, public) or a
difference of two ratios (Hajek IPW). Its variance has three parts, all computed from released
numbers and the public noise laws:

* sampling (sandwich): ``(q - 2 mu p + mu^2 v) / b^2`` with ``mu = a / b`` and the sums ``q``, ``p``,
  ``v`` of squared, cross and squared-weight terms (for AIPW-ATE: ``(sum phi^2 - n tau^2) / n^2``),
  floored at 0 because its inputs are noisy;
* DP noise of the point (delta method): ``(sd_a^2 + mu^2 sd_b^2) / b^2``;
* the uncertainty of the noisy sampling variance itself: one noise sd of the sandwich numerator,
  ``sqrt(sd_q^2 + 4 mu^2 sd_p^2 + mu^4 sd_v^2) / b^2``, added so that noise which makes the
  variance look small does not make the interval short;
* the variability that the statistics' noise gives the nuisance models (when the release carries
  noise replicates, :mod:`.scores`): with ``Delta_a^b``, ``Delta_b^b`` the released replicate sums of
  copy ``b`` (their noise sd ``sd'``), the estimate moves by ``d_b = (Delta_a^b - mu Delta_b^b) / b``
  (linearised), and ``mean_b d_b^2 - (sd'_a^2 + mu^2 sd'_b^2) / b^2``, floored at 0, estimates its
  variance with the replicate sums' own noise removed (a parametric bootstrap of the statistics' noise,
  Ferrando, Wang & Sheldon 2022). For a difference of ratios ``d_b`` is the difference of their
  moves, so arms that the same noise moves together are counted together.

The interval is ``estimate +- z_{1-alpha/2} se`` with ``se`` the square root of the sum.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass

from scipy.stats import norm

from collabcausal.errors import InputError


@dataclass(frozen=True)
class Ratio:
    """Names of the sums behind ``a / b`` and its sandwich ``q - 2 mu p + mu^2 v``; ``None`` is the public n."""

    a: str
    b: str | None
    q: str
    p: str
    v: str | None


ESTIMANDS: dict[tuple[str, str], tuple[tuple[Ratio, ...], tuple[Ratio, ...]]] = {
    ("aipw", "ate"): ((Ratio("aipw_ate", None, "aipw_ate_sq", "aipw_ate", None),), ()),
    ("aipw", "att"): ((Ratio("aipw_att", "n_treated", "aipw_att_sq", "aipw_att_treated", "n_treated"),), ()),
    ("ipw", "ate"): ((Ratio("ipw_a1", "ipw_w1", "ipw_q1", "ipw_p1", "ipw_v1"),),
                     (Ratio("ipw_a0", "ipw_w0", "ipw_q0", "ipw_p0", "ipw_v0"),)),
    ("ipw", "att"): ((Ratio("att_y1", "n_treated", "att_yy1", "att_y1", "n_treated"),),
                     (Ratio("att_a0", "att_w0", "att_q0", "att_p0", "att_v0"),)),
}
"""(estimator, estimand) -> (ratios added, ratios subtracted)."""


@dataclass(frozen=True)
class DPEffect:
    """One estimate from released sums.

    Attributes
    ----------
    estimator, estimand : str
    estimate, se, ci_low, ci_high : float or None
        ``None`` (with ``reason``) when a denominator is not positive.
    sampling_var, noise_var, variance_uncertainty, nuisance_var : float or None
        The parts of ``se^2`` (module docstring); ``nuisance_var`` is 0 without noise replicates.
    noise_share : float or None
        ``noise_var / se^2``: the share of the variance that is DP noise on the point.
    reason : str or None
    """

    estimator: str
    estimand: str
    estimate: float | None
    se: float | None
    ci_low: float | None
    ci_high: float | None
    sampling_var: float | None
    noise_var: float | None
    variance_uncertainty: float | None
    noise_share: float | None
    reason: str | None = None
    alpha: float = 0.05
    nuisance_var: float | None = None

    def to_dict(self) -> dict[str, object]:
        """JSON-ready fields, with the keys of an :class:`~collabcausal.estimators.intervals.IntervalEstimate` row."""
        return asdict(self) | {"interval": "analytic", "boot_mean": None, "n_boot": 0, "n_failed": 0}


def estimate_effect(
    sums: Mapping[str, float],
    noise_sd: Mapping[str, float],
    n: int,
    estimator: str,
    estimand: str,
    *,
    alpha: float = 0.05,
    replicates: Sequence[Mapping[str, float]] = (),
    replicate_sd: Mapping[str, float] | None = None,
    ratios: tuple[tuple[Ratio, ...], tuple[Ratio, ...]] | None = None,
) -> DPEffect:
    """The ``estimator``'s ``estimand`` from released ``sums`` with noise sds ``noise_sd`` (n public).

    ``replicates[b]`` maps a point sum's name to its released replicate sum of copy ``b`` (model-free sums
    absent), ``replicate_sd`` to the noise sd of one such sum (module docstring). ``ratios`` (added,
    subtracted) replace :data:`ESTIMANDS`' for another estimand of the same form (a subgroup's effect).
    """
    try:
        plus, minus = ratios if ratios is not None else ESTIMANDS[estimator, estimand]
    except KeyError:
        raise InputError(f"no {estimator} {estimand} in dp_effects", f"use one of {sorted(ESTIMANDS)}") from None
    if not 0.0 < alpha < 1.0:
        raise InputError(f"alpha {alpha} is not in (0, 1)", "use e.g. alpha = 0.05")
    parts = []
    for sign, ratios in ((1.0, plus), (-1.0, minus)):
        for r in ratios:
            part = _ratio(r, sums, noise_sd, n)
            if isinstance(part, str):
                return DPEffect(estimator, estimand, None, None, None, None, None, None, None, None, part, alpha)
            parts.append((sign, r, part))
    estimate = sum(sign * p[0] for sign, _, p in parts)
    sampling, noise, unc = (sum(p[k] for _, _, p in parts) for k in (1, 2, 3))
    nuisance = _replicate_var([(sign, r, p[0]) for sign, r, p in parts], sums, n, replicates, replicate_sd or {})
    var = sampling + noise + unc + nuisance
    se = math.sqrt(var)
    z = float(norm.ppf(1 - alpha / 2))
    return DPEffect(estimator, estimand, estimate, se, estimate - z * se, estimate + z * se,
                    sampling, noise, unc, noise / var if var > 0 else 0.0, None, alpha, nuisance)


def _ratio(r: Ratio, sums: Mapping[str, float], sd: Mapping[str, float], n: int) -> tuple[float, ...] | str:
    def get(name: str | None, table: Mapping[str, float]) -> float:
        return float(n) if name is None and table is sums else 0.0 if name is None else float(table[name])

    b = get(r.b, sums)
    if not b > 0.0:
        return f"the released {r.b or 'n'} is {b:.4g} (not positive): too few subjects for the noise"
    mu = get(r.a, sums) / b
    sampling = max(get(r.q, sums) - 2 * mu * get(r.p, sums) + mu * mu * get(r.v, sums), 0.0) / b**2
    noise = (get(r.a, sd) ** 2 + mu * mu * get(r.b, sd) ** 2) / b**2
    unc = math.sqrt(get(r.q, sd) ** 2 + 4 * mu * mu * get(r.p, sd) ** 2 + mu**4 * get(r.v, sd) ** 2) / b**2
    return mu, sampling, noise, unc


def _replicate_var(ratios: Sequence[tuple[float, Ratio, float]], sums: Mapping[str, float], n: int,
                   replicates: Sequence[Mapping[str, float]], sd: Mapping[str, float]) -> float:
    """The estimate's nuisance-noise variance from the noise replicates (module docstring); 0 without them.

    ``ratios`` are (sign, ratio, its value mu): a copy moves the estimate by the signed sum of the
    ratios' linearised moves, so arms that move together are counted together.
    """
    if not replicates:
        return 0.0

    def denominator(r: Ratio) -> float:
        return float(n) if r.b is None else float(sums[r.b])

    def move(rep: Mapping[str, float], r: Ratio, mu: float) -> float:
        return (rep.get(r.a, 0.0) - mu * (rep.get(r.b, 0.0) if r.b else 0.0)) / denominator(r)

    moves = [sum(sign * move(rep, r, mu) for sign, r, mu in ratios) for rep in replicates]
    own_noise = sum((sd.get(r.a, 0.0) ** 2 + mu * mu * (sd.get(r.b, 0.0) if r.b else 0.0) ** 2) / denominator(r) ** 2
                    for _, r, mu in ratios)
    return max(sum(m * m for m in moves) / len(moves) - own_noise, 0.0)


def inverse_variance_pool(effects: Sequence[DPEffect], *, alpha: float = 0.05) -> DPEffect | None:
    """Fixed-effect meta-analysis of site estimates (DerSimonian & Laird 1986, the fixed-effect part)."""
    usable = [e for e in effects if e.estimate is not None and e.se]
    if not usable:
        return None
    w = [1.0 / e.se**2 for e in usable]  # type: ignore[operator]
    estimate = sum(wi * e.estimate for wi, e in zip(w, usable, strict=True)) / sum(w)  # type: ignore[operator]
    se = math.sqrt(1.0 / sum(w))
    noise = sum(wi * wi * e.noise_var for wi, e in zip(w, usable, strict=True)) / sum(w) ** 2  # type: ignore[operator]
    z = float(norm.ppf(1 - alpha / 2))
    first = usable[0]
    return DPEffect(first.estimator, first.estimand, estimate, se, estimate - z * se, estimate + z * se,
                    None, noise, None, noise / se**2, None, alpha)
