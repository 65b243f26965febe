"""``dp_effects`` when a row group's covariates are split between parties (docs/dp-effects-vertical.md).

A row group's subjects are aligned across its **column groups**: group 0, the *label holder*,
holds T, Y and some covariates; every other group holds other covariates of the same subjects.
The study releases the same two vectors as in the horizontal case (:mod:`.statistics`,
:mod:`.scores`), but each entry is a sum over subjects of a product of values that several parties
hold. This module is the arithmetic of those releases, written once for numpy arrays (the
plaintext twin) and for encrypted columns (:mod:`collabcausal.vertical`), whose operators are the
same: nothing here branches on which it is given.

**Statistics.** The per-arm Gram blocks and cross-products of the whole design row
``d = (onehot(site), z_0, z_1, ...)`` (``z_g``: group ``g``'s covariates on ``[-1, 1]``). An entry
involving only the label holder's columns is local to it; every other entry involves the label
holder (through T or u) and the groups whose columns it multiplies (:func:`entry_parties`). Its
sensitivity is the horizontal one (:func:`~.statistics.statistics_sensitivity` of the whole
design), since a substituted subject is substituted in every column group at once; with declared norm
bounds (:class:`ColumnGroups`), each party scales its own covariates onto its bound and the design row's
norm bound, hence the sensitivity, falls (:func:`group_statistics_sensitivity`).

**Scores.** The propensity logit ``eta = beta . d`` and the outcome models ``mu_t = R g_t . d`` are
sums of per-group parts; the AIPW weights are nonlinear in ``eta``, so they are a polynomial
(:class:`WeightPolynomial`) of ``x = eta / E`` on the public domain ``E`` (the largest ``|eta|``
any design row can give: a function of the model). With ``s = 2T - 1`` one polynomial serves
both arms, ``p(s x) ~ 1/e`` for the treated and ``1/(1 - e)`` for controls, where
``e = sigmoid(c(eta))``, ``c`` a soft clip of ``eta`` to ``[-L, L]``, ``L = logit(1 - t)``, is the propensity
**smoothly trimmed** to ``[t, 1 - t]`` (:func:`smooth_weight`: analytic, so a degree-15 Chebyshev interpolant is
within 0.024 of it at ``E = 4``; the horizontal case clips ``e`` at ``t``, a kink no low-degree polynomial follows):

    phi = mu1 - mu0 + s (y' - mu_T) p(s x)         (AIPW, ATE; Robins, Rotnitzky & Zhao 1994)

No clip can be applied under encryption, so every bound is proved from the models instead
(:func:`score_bound`, :func:`replicate_bound`): the polynomial *is* the weight function, its exact
range on ``[-1, 1]`` enters the sensitivity, and its distance to ``1/e`` costs accuracy only
(AIPW's double robustness makes it second order; the benchmark measures it).

**Noise shares.** An entry computed by ``k >= 2`` parties gets a noise share of variance
``sigma^2 / (k - 1)`` from each (the encrypting party's share after it decrypts, the others' inside
the encrypted sum), so the shares of any ``k - 1`` of them, all that a coordinator colluding with one
party does not know, reach ``sigma^2`` (as secure aggregation calibrates: docs/secure-aggregation.md);
an entry local to one party carries its ``sigma^2``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.polynomial import chebyshev
from numpy.typing import NDArray

from collabcausal.errors import InputError
from collabcausal.estimators.dp.effects.design import FeatureMap
from collabcausal.estimators.dp.effects.nuisances import NuisanceModel
from collabcausal.estimators.dp.effects.scores import POINT_WEIGHT, REPLICATE_SHARE, SPREAD_WEIGHT, Component

WEIGHT_DEGREE = 15
"""Degree of the weight polynomial: within 0.024 of the smoothly trimmed weight at ``E = 4``, 0.11 at 5.5, 0.29
at 7 (:data:`WEIGHT_SHARPNESS` 3); ``T_15`` is 4 multiplications deep."""
WEIGHT_SHARPNESS = 3.0
"""``k`` of :func:`smooth_weight`'s soft clip. The first weight, ``sigmoid(L tanh(eta / L))``, bent the propensity
already at ``|eta| = 1`` (0.718 for 0.731) and at ``|eta| = 2`` gave control weights 5.9 for 8.4: the outcome
models' noise then passed into the estimate (sd of its gap to the centralized AIPW 0.0026 against 0.0016 for
``k = 3``, 40 replications of the benchmark design; docs/dp-effects-vertical.md)."""
MAX_COLUMN_GROUPS = 8
"""Most parties a row group splits its covariates among (each further one adds a round trip per batch)."""
VERTICAL_NEEDS = {("aipw", "ate"): ("aipw_ate", "aipw_ate_sq")}
"""The (estimator, estimand) pairs a vertical release serves, and its sums."""


@dataclass(frozen=True)
class ColumnGroups:
    """Which covariates (positions in the study's covariate order) each party of a row group holds.

    Group 0 is the label holder (T and Y). The groups partition the covariates; the site one-hot is
    a constant of the row group, counted with the label holder.

    ``norm_bounds`` (public, declared with the split; ``None``: none): group ``g``'s covariates on
    ``[-1, 1]`` are scaled by ``min(1, sqrt(C_g / ||z_g||^2))`` by their own party (:func:`group_design`), so
    ``||z_g||^2 <= C_g`` and the design row's ``||d||^2 <= 1 + sum_g min(C_g, m_g)`` instead of ``1 + m``
    (:func:`design_norm_bound`): the statistics' sensitivity follows (:func:`group_statistics_sensitivity`).
    """

    groups: tuple[tuple[int, ...], ...]
    norm_bounds: tuple[float, ...] | None = None

    def __post_init__(self) -> None:
        flat = [j for g in self.groups for j in g]
        if len(self.groups) < 2 or sorted(flat) != list(range(len(flat))) or any(not g for g in self.groups[1:]):
            raise InputError(
                f"column groups {self.groups} do not split the covariates among two or more parties",
                "give each covariate to exactly one party of the row group, every party but the label holder "
                "at least one",
            )
        if self.norm_bounds is not None and (
                len(self.norm_bounds) != len(self.groups)
                or not all(isinstance(c, (int, float)) and math.isfinite(c) and c > 0 for c in self.norm_bounds)):
            raise InputError(f"norm bounds {self.norm_bounds} are not one positive finite number per column group",
                             "declare one squared-norm bound per party, e.g. (3.0, 6.0), or none")

    @classmethod
    def of_sizes(cls, sizes: Sequence[int], norm_bounds: tuple[float, ...] | None = None) -> ColumnGroups:
        """Groups of ``sizes`` consecutive covariates each, in order (the design order is the groups concatenated)."""
        ends = np.cumsum([int(k) for k in sizes], dtype=np.int64)
        return cls(tuple(tuple(range(int(e) - int(k), int(e))) for e, k in zip(ends, sizes, strict=True)), norm_bounds)

    def squared_norms(self) -> tuple[float, ...]:
        """Each group's bound on ``||z_g||^2``: ``min(C_g, m_g)`` (every ``|z_j| <= 1``), ``m_g`` without bounds."""
        declared = self.norm_bounds or (math.inf,) * len(self.groups)
        return tuple(min(float(c), float(len(g))) for c, g in zip(declared, self.groups, strict=True))

    @property
    def n_parties(self) -> int:
        """Parties of the row group (column groups)."""
        return len(self.groups)

    def design_columns(self, group: int, n_sites: int) -> list[int]:
        """Group ``group``'s covariates' positions in the design row ``(onehot(site), z)``, in order."""
        return sorted(n_sites + int(j) for j in self.groups[group])

    def owners(self, n_sites: int) -> NDArray[np.int64]:
        """The group holding each design column ``(onehot(site), z)``."""
        owner = np.zeros(n_sites + sum(map(len, self.groups)), dtype=np.int64)
        for g, columns in enumerate(self.groups):
            owner[n_sites + np.asarray(columns, dtype=np.int64)] = g
        return owner


def entry_parties(groups: ColumnGroups, n_sites: int) -> NDArray[np.int64]:
    """How many parties add a noise share to each entry of a statistics vector (:func:`~.statistics.fold_statistics`'
    order): 1 for an entry of the label holder's columns alone (it computes it), 2 for every other, the label holder
    (which opens it) and the entry's evaluator (:attr:`CrossEntry.evaluator`, which totals it under encryption). A
    third party whose products the evaluator multiplies adds none: it never holds a sum.
    """
    owner = groups.owners(n_sites)
    dim = owner.size
    iu, ju = np.triu_indices(dim)
    gram = np.where((owner[iu] > 0) | (owner[ju] > 0), 2, 1)
    cross = np.where(owner > 0, 2, 1)
    return np.concatenate([gram, gram, cross, cross]).astype(np.int64)


@dataclass(frozen=True)
class CrossEntry:
    """One statistics entry computed under encryption: the label holder's factor times other parties' columns.

    ``sum_k 1[T_k = arm] l_k prod_c d_kc``: ``label`` is the label holder's factor, a design column
    (``d_k,label``), ``"arm"`` (the arm indicator alone) or ``"u"`` (the scaled outcome); ``party`` are
    the other parties' design columns whose product multiplies it. ``evaluator`` (a column group) totals it: the
    owner of ``party``'s columns, or of its later one when two parties own them, which then multiplies the other's
    products of the label holder's arm with its column (:func:`~collabcausal.vertical.dp_effects_rounds.arm_products`).
    """

    index: int
    arm: int
    label: int | str
    party: tuple[int, ...]
    evaluator: int = 1


def cross_entries(groups: ColumnGroups, n_sites: int) -> list[CrossEntry]:
    """The statistics entries (:func:`~.statistics.fold_statistics`' order) that involve another party's columns.

    With two column groups every such entry multiplies the label holder's factor by the other party's columns; with
    more, a Gram entry of two other parties' columns multiplies three parties' values (the label holder's arm, one
    column each), evaluated by the later party (:class:`CrossEntry`).
    """
    owner = groups.owners(n_sites)
    dim = owner.size
    iu, ju = np.triu_indices(dim)
    tri = iu.size
    entries = []
    for arm in (0, 1):
        for e, (i, j) in enumerate(zip(iu, ju, strict=True)):
            other = tuple(int(c) for c in (i, j) if owner[c] > 0)
            if other:
                label = next((int(c) for c in (i, j) if owner[c] == 0), "arm")
                entries.append(CrossEntry(arm * tri + e, arm, label, other, int(max(owner[c] for c in other))))
        for i in np.flatnonzero(owner > 0):
            entries.append(CrossEntry(2 * tri + arm * dim + int(i), arm, "u", (int(i),), int(owner[i])))
    return entries


def cross_term(label_vectors: Mapping[tuple[str, int | str], Any], design: NDArray[np.float64], entry: CrossEntry
               ) -> Any:
    """Per-subject values of ``entry``: the label holder's factor (``("T", key)`` for the treated arm,
    ``("1", key) - ("T", key)`` for controls; numpy arrays or encrypted columns) times the other party's
    plaintext product of its design columns. A key the label holder did not send is a one-hot column of
    another site, zero in this row group."""
    product = np.prod(design[:, list(entry.party)], axis=1)
    key = entry.label
    if ("T", key) not in label_vectors:
        product = np.zeros_like(product)
        key = "arm"
    treated = label_vectors["T", key]
    factor = treated if entry.arm == 1 else label_vectors["1", key] - treated
    return factor * product


def label_vectors(design: NDArray[np.float64], treatment: NDArray[np.float64], u: NDArray[np.float64],
                  groups: ColumnGroups, n_sites: int, site: int) -> dict[tuple[str, int | str], NDArray[np.float64]]:
    """The label holder's per-subject factors of :func:`cross_term`, each in [-1, 1]: for its own site's
    one-hot, its covariates, the arm indicator and the outcome ``u = y'/R``, the value (``"1"``) and the
    value times ``T`` (``"T"``)."""
    owner = groups.owners(n_sites)
    columns = {int(c): design[:, c] for c in np.flatnonzero(owner == 0) if c >= n_sites or c == site}
    values: dict[int | str, NDArray[np.float64]] = {**columns, "arm": np.ones_like(u), "u": u}
    out: dict[tuple[str, int | str], NDArray[np.float64]] = {}
    for key, v in values.items():
        out["1", key] = v
        out["T", key] = treatment * v
    return out


def share_variance(k: int | NDArray[np.int64]) -> NDArray[np.float64]:
    """Each computing party's noise variance, as a multiple of ``sigma^2``: 1 alone, ``1/(k - 1)`` for k >= 2."""
    k = np.asarray(k, dtype=float)
    return np.where(k >= 2, 1.0 / np.maximum(k - 1.0, 1.0), 1.0)


def released_variance(k: int | NDArray[np.int64]) -> NDArray[np.float64]:
    """The noise variance the coordinator's sum carries, as a multiple of ``sigma^2``: ``k share_variance(k)``."""
    return np.asarray(k, dtype=float) * share_variance(k)


def design_norm_bound(groups: ColumnGroups) -> float:
    """``B^2 = max ||d||^2 = 1 + sum_g min(C_g, m_g)``: the site one-hot's 1 and each group's norm bound."""
    return 1.0 + sum(groups.squared_norms())


def group_statistics_sensitivity(feature_map: FeatureMap, groups: ColumnGroups) -> float:
    """The statistics' L2 sensitivity ``sqrt(B^4 + 2 B^2)`` (:mod:`.statistics`' derivation, which needs only
    ``||d||^2 <= B^2`` and every ``|d_i| <= 1``) with :func:`design_norm_bound`'s ``B^2``; without norm bounds it
    is :func:`~.statistics.statistics_sensitivity` of ``feature_map``."""
    if sum(map(len, groups.groups)) != feature_map.n_covariates:
        raise InputError(f"column groups cover {sum(map(len, groups.groups))} covariates, the study declares "
                         f"{feature_map.n_covariates}", "split the study's covariates among the parties")
    b2 = design_norm_bound(groups)
    return math.sqrt(b2 * b2 + 2.0 * b2)


@dataclass(frozen=True)
class WeightPolynomial:
    """``p(x)``, the AIPW weight ``1/e`` as a polynomial of ``x = eta / domain`` on ``[-1, 1]``.

    Attributes
    ----------
    coefficients : tuple of float
        Chebyshev coefficients ``c_k`` of ``p = sum_k c_k T_k``, lowest degree first.
    domain : float
        ``E``: every subject's ``|eta| <= E`` (:func:`predictor_bound`), so ``|x| <= 1``.
    trim : float
        ``t``: the target is :func:`smooth_weight`.
    low, high : float
        The exact range of ``p`` on ``[-1, 1]`` (endpoints and critical points): what the sensitivity uses.
    slope : float
        ``max |p'(x)|`` on ``[-1, 1]``: ``|p(x) - p(x')| <= slope |x - x'|``.
    error : float
        ``max |p(x) - target|`` on a grid of 20,001 points: what it costs in accuracy, not privacy.
    """

    coefficients: tuple[float, ...]
    domain: float
    trim: float
    low: float
    high: float
    slope: float
    error: float


def smooth_weight(eta: NDArray[np.float64], trim: float, sharpness: float = WEIGHT_SHARPNESS) -> NDArray[np.float64]:
    """``1 / e`` for the smoothly trimmed propensity ``e = sigmoid(c(eta))``, ``c`` a soft clip of ``eta`` to
    ``[-L, L]``, ``L = logit(1 - t)``:

        c(eta) = eta - s_k(eta - L) + s_k(-eta - L),    s_k(v) = log(1 + exp(k v)) / k   (softplus, k = sharpness)

    ``c`` is odd, within 0.016 of ``eta`` for ``|eta| <= L - 1`` and of ``clip(eta, -L, L)`` for
    ``|eta| >= L + 1`` (``k = 3``), and strictly inside ``(-L, L)``, so the weight ``1 + exp(-c(eta))``
    follows the hard-trimmed ``1 / clip(sigmoid(eta), t, 1 - t)`` except near the trimming points (at ``t = 0.1``:
    control weight 3.69 for 3.72 at ``eta = 1``, 7.38 for 8.39 at 2, 9.75 for 10 at 3), stays in
    ``(1/(1 - t), 1/t)``, and ``1/(1 - e(eta)) = 1/e(-eta)``. Its singularities, softplus's
    at ``Im eta = +- pi/k``, bound how fast polynomials approach it (:func:`weight_polynomial`).
    """
    bound = math.log((1.0 - trim) / trim)
    x = np.asarray(eta, dtype=float)
    a = np.abs(x)  # c(|eta|) = L - s_k(L - |eta|) + s_k(-|eta| - L), the same function without cancellation
    clipped = bound - (np.logaddexp(0.0, sharpness * (bound - a)) - np.logaddexp(0.0, -sharpness * (a + bound))
                       ) / sharpness
    return 1.0 + np.exp(-np.sign(x) * clipped)


def weight_polynomial(domain: float, trim: float, degree: int = WEIGHT_DEGREE) -> WeightPolynomial:
    """The Chebyshev interpolant of :func:`smooth_weight` on ``|eta| <= domain`` (module docstring).

    Interpolation at Chebyshev points converges geometrically for an analytic target (Trefethen,
    *Approximation Theory and Approximation Practice*, Thm 8.2); the smooth weight is analytic in a
    strip of half-width ``pi L / 2`` around the real line.
    """
    if not (math.isfinite(domain) and domain > 0.0):
        raise InputError(f"propensity domain {domain!r} is not a positive finite number",
                         "send finite nuisance coefficients")
    if not (0.0 < trim < 0.5 and math.isfinite((1.0 - trim) / trim)):
        raise InputError(f"propensity trimming {trim!r} is not in (0, 0.5) with a finite weight 1/t",
                         "declare e.g. trim = 0.1")
    if not 1 <= int(degree) <= 63:
        raise InputError(f"weight degree {degree!r} is not in 1..63", f"use e.g. {WEIGHT_DEGREE}")

    def target(x: NDArray[np.float64]) -> NDArray[np.float64]:
        return smooth_weight(domain * x, trim)

    cheb = chebyshev.Chebyshev.interpolate(target, int(degree))
    grid = np.linspace(-1.0, 1.0, 20_001)
    error = float(np.max(np.abs(cheb(grid) - target(grid))))
    coefficients = tuple(float(c) for c in cheb.coef)
    return proved_weight(WeightPolynomial(coefficients, float(domain), float(trim), 0.0, 0.0, 0.0, error))


def proved_weight(poly: WeightPolynomial) -> WeightPolynomial:
    """``poly`` with ``low``, ``high`` and ``slope`` recomputed from its coefficients, what the parties evaluate:
    a polynomial received from the coordinator is trusted for its coefficients and domain only."""
    c = np.asarray(poly.coefficients, dtype=np.float64)
    if c.ndim != 1 or c.size < 2 or not np.all(np.isfinite(c)) or not (math.isfinite(poly.domain) and poly.domain > 0):
        raise InputError("the weight polynomial needs finite Chebyshev coefficients of degree >= 1 and a positive "
                         "finite domain", "build it with weight_polynomial(domain, trim)")
    cheb = chebyshev.Chebyshev(c)
    low, high = _range_on_unit_interval(cheb)
    slope_lo, slope_hi = _range_on_unit_interval(cheb.deriv())
    return dataclasses.replace(poly, low=low, high=high, slope=max(-slope_lo, slope_hi))


def _range_on_unit_interval(cheb: chebyshev.Chebyshev) -> tuple[float, float]:
    """``(min, max)`` of a polynomial on ``[-1, 1]``: at the endpoints or a real root of its derivative.

    Widened by 1e-9 relative, so floating-point evaluation of the power basis stays inside it.
    """
    roots = cheb.deriv().roots() if cheb.degree() >= 2 else np.array([])
    real = roots[np.abs(roots.imag) < 1e-9].real
    points = np.concatenate([[-1.0, 1.0], real[(real >= -1.0) & (real <= 1.0)]])
    values = cheb(points)
    margin = 1e-9 * max(1.0, float(np.max(np.abs(values))))
    return float(values.min()) - margin, float(values.max()) + margin


def chebyshev_powers(x: Any, degree: int) -> list[Any]:
    """``[T_1(x), ..., T_degree(x)]`` by ``T_2k = 2 T_k^2 - 1`` and ``T_2k+1 = 2 T_k T_k+1 - x``.

    Products and sums only, so it runs on numpy arrays and on encrypted columns alike, and ``T_k`` is
    ``ceil(log2 k)`` multiplications deep (the recurrence ``T_k+1 = 2x T_k - T_k-1`` would be ``k - 1``).
    """
    powers: list[Any] = [None, x]
    for k in range(2, degree + 1):
        half = k // 2
        product = powers[half] * powers[half] if k % 2 == 0 else powers[half] * powers[half + 1]
        powers.append(bounded(product + product - (1.0 if k % 2 == 0 else x), 1.0))
    return powers[1:]


def bounded(values: Any, bound: float) -> Any:
    """``values`` with a proved public bound on its magnitude: numpy arrays need none, an encrypted column
    records it (its interval arithmetic cannot know that ``|T_k| <= 1``, or a model's score bound)."""
    return values if isinstance(values, np.ndarray) else values.known_bound(bound)


def evaluate_weight(poly: WeightPolynomial, x: Any, sign: NDArray[np.float64]) -> Any:
    """``p(sign x)`` for a numpy array or an encrypted ``x`` and a plaintext ``sign`` in ``{-1, 1}``.

    ``T_k(-x) = (-1)^k T_k(x)``, so the sign goes into each odd term's plaintext multiplier. Baby steps and
    giant steps in the Chebyshev basis (Paterson & Stockmeyer 1973, "On the number of nonscalar multiplications
    necessary to evaluate polynomials", SIAM J. Comput. 2(1)): ``T_1 .. T_{k-1}`` with ``k = 2^round(log2
    sqrt(degree + 1))``, the giants ``T_k, T_2k, ...``, and ``p = q T_g + r`` by Chebyshev division on the largest
    giant ``g`` (:func:`numpy.polynomial.chebyshev.chebdiv`, recursively; ``T_g`` is even, so the sign splits the
    same way). Degree 15: 7 products of two encrypted columns instead of 14, the depth unchanged,
    ``ceil(log2 degree) + 1``.
    """
    c = np.asarray(poly.coefficients, dtype=np.float64)
    degree = c.size - 1
    baby = 2 ** max(1, round(math.log2(math.sqrt(degree + 1))))
    powers = [None, *chebyshev_powers(x, min(baby - 1, degree))]
    giants: dict[int, Any] = {}
    g, half = baby, powers[baby // 2] if baby // 2 <= degree else None
    while g <= degree:
        square = half * half
        giants[g] = half = bounded(square + square - 1.0, 1.0)
        g *= 2

    def combine(coefficients: NDArray[np.float64]) -> Any:
        top = coefficients.size - 1
        if top < baby:
            total: Any = coefficients[0]
            for j in np.flatnonzero(coefficients[1:]) + 1:  # a product by 0 would be an empty ciphertext
                total = powers[j] * (coefficients[j] * sign if j % 2 else float(coefficients[j])) + total
            return total
        g = max(k for k in giants if k <= top)
        quotient, rest = chebyshev.chebdiv(coefficients, np.eye(g + 1)[g])
        high = giants[g] * float(quotient[0]) if quotient.size == 1 else combine(quotient) * giants[g]
        return high + combine(rest)

    return combine(c)


ENCRYPTION_MARGIN = 1e-3
"""Relative widening of every score range, and of the statistics' sensitivity, for the encrypted evaluation's
error: TenSEAL's rescaling bias moves a term at its proved bound by about 2e-5 of it at depth 7 and a product of
two values at 1 to 1 + 1.3e-6 at depth 1 (docs/vertical-encryption.md; the presets' error bounds are 1e-3 and
1e-5), so the released sums' sensitivity covers what the encrypted program computes, not only the exact
arithmetic. It adds 0.1% to the noise."""
PART_SDS = (2.5, 2.0, 2.0)
"""Each group's part of ``eta``, ``mu0``, ``mu1`` is clipped to its mean +- this many sds (module docstring).
The score bound, hence the score noise, grows with the ``mu`` limits (about ``(R/2 + M) / t``, ``M`` the bound on
``|mu|``: 2.0 sds gave ``M`` 0.57 and a score range of 10.4 where 2.5 gave 0.64 and 10.9); the ``eta`` limits set
the weight polynomial's domain (4.4 at 2.5 sds, 7 at 4), where it is closer to the trimmed weight
(docs/dp-effects-vertical.md, "Where the excess came from")."""
CHANGE_SDS = 2.0
"""Each group's part of a replicate's change of a linear predictor is clipped to its mean +- this many sds:
at 2 instead of 4 the replicate sums' noise halves (mean SE 0.0089 to 0.0068, same RMSE and coverage)."""


@dataclass(frozen=True)
class PartLimits:
    """Public clip limits of each group's part of ``eta``, ``mu0`` and ``mu1`` (intercepts excluded).

    A party clips its own part (a plaintext of its own) before it encrypts or adds it, so every
    subject's ``eta`` lies in ``[min_s beta_s + sum lo, max_s beta_s + sum hi]`` whatever its covariates:
    the domain of the weight polynomial shrinks from the worst case ``sum_j |beta_j|`` over all
    covariates (16 on the benchmark design) to what the subjects' spread needs (about 7). Clipping
    is 1-Lipschitz, so a replicate model moves a clipped part by at most its coefficients' change.

    Attributes
    ----------
    low, high : ndarray (3, G)
        Rows ``eta``, ``mu0``, ``mu1`` (``mu`` on the centred outcome scale); one column per group.
    """

    low: NDArray[np.float64]
    high: NDArray[np.float64]


def _coefficients(model: NuisanceModel, outcome_width: float) -> list[NDArray[np.float64]]:
    """``eta``, ``mu0``, ``mu1`` coefficients on the design row (``mu`` on the centred scale)."""
    return [model.propensity_coef, outcome_width * model.outcome_coef[0], outcome_width * model.outcome_coef[1]]


def part_limits(model: NuisanceModel, gram: NDArray[np.float64], groups: ColumnGroups, n_sites: int,
                outcome_width: float, n_sds: float | Sequence[float] = PART_SDS) -> PartLimits:
    """Clip limits from the released (summed over arms) Gram matrix: post-processing of public statistics.

    Group ``g``'s part ``c_g . z_g`` has mean ``c_g . m_g`` and variance ``c_g^T (S_g - m_g m_g^T) c_g`` under
    the Gram's moments (``m_g = sum z_g / n``, ``S_g = sum z_g z_g^T / n``, ``n`` from the one-hot
    diagonal); the limits are the mean +- ``n_sds`` sds (one number, or one each for ``eta``, ``mu0``,
    ``mu1``), inside the hard bound ``+- min(||c_g||_1, ||c_g||_2 sqrt(C_g))`` (``C_g``: the group's norm bound,
    :meth:`ColumnGroups.squared_norms`).
    """
    widths = np.broadcast_to(np.asarray(n_sds, dtype=float), (3,))
    n = max(float(np.trace(gram[:n_sites, :n_sites])), 1.0)
    low, high = np.zeros((3, groups.n_parties)), np.zeros((3, groups.n_parties))
    for r, coef in enumerate(_coefficients(model, outcome_width)):
        for g in range(groups.n_parties):
            cols = groups.design_columns(g, n_sites)
            c = coef[cols]
            mean_z = gram[:n_sites, cols].sum(axis=0) / n
            second = gram[np.ix_(cols, cols)] / n
            mean = float(c @ mean_z)
            sd = math.sqrt(max(float(c @ second @ c) - mean * mean, 0.0))
            hard = min(float(np.abs(c).sum()), float(np.linalg.norm(c)) * math.sqrt(groups.squared_norms()[g]))
            low[r, g] = max(mean - widths[r] * sd, -hard)
            high[r, g] = min(mean + widths[r] * sd, hard)
    return PartLimits(low, high)


def clipped_parts(model: NuisanceModel, design: NDArray[np.float64], group: int, groups: ColumnGroups,
                  limits: PartLimits, n_sites: int, outcome_width: float) -> list[NDArray[np.float64]]:
    """Group ``group``'s parts ``[eta_g, mu0_g, mu1_g]`` of its own design rows (:func:`group_design`),
    each clipped to its limits; the label holder's carry the site intercepts (unclipped)."""
    cols = groups.design_columns(group, n_sites)
    out = []
    for r, coef in enumerate(_coefficients(model, outcome_width)):
        part = np.clip(design[:, cols] @ coef[cols], limits.low[r, group], limits.high[r, group])
        if group == 0:
            part = part + design[:, :n_sites] @ coef[:n_sites]
        out.append(part)
    return out


def predictor_bound(model: NuisanceModel, limits: PartLimits, n_sites: int, outcome_width: float, row: int) -> float:
    """``max_s |c_s| + sum_g max(|lo_g|, |hi_g|)``: a bound on ``|eta|`` (row 0), ``|mu0|`` (1) or ``|mu1|`` (2)
    of any subject under ``limits``, and on each group's part of it (so that ``part / bound`` is in [-1, 1])."""
    intercepts = _coefficients(model, outcome_width)[row][:n_sites]
    parts = np.maximum(np.abs(limits.low[row]), np.abs(limits.high[row]))
    return float(np.max(np.abs(intercepts)) + parts.sum())


def score_scales(model: NuisanceModel, limits: PartLimits, changes: Sequence[tuple[NuisanceModel, PartLimits]],
                 n_sites: int, outcome_width: float) -> tuple[float, float]:
    """``(E, U)``: every subject's ``|eta|`` under the model or a replicate is at most ``E`` (the weight
    polynomial's domain), its ``|mu_t|`` at most ``U``; each group's part divided by them is in [-1, 1]."""
    def largest(row: int) -> float:
        return predictor_bound(model, limits, n_sites, outcome_width, row) + max(
            (predictor_bound(c, cl, n_sites, outcome_width, row) for c, cl in changes), default=0.0)

    return largest(0), max(largest(1), largest(2), 1e-12)


def model_change(model: NuisanceModel, copy: NuisanceModel) -> NuisanceModel:
    """The coefficient differences ``copy - model``, as a model: a replicate scores each subject with the
    study model's clipped parts plus the clipped parts of this change (:func:`clipped_parts` of both)."""
    return NuisanceModel(copy.propensity_coef - model.propensity_coef,
                         (copy.outcome_coef[0] - model.outcome_coef[0], copy.outcome_coef[1] - model.outcome_coef[1]))


def score_bound(model: NuisanceModel, limits: PartLimits, poly: WeightPolynomial, n_sites: int,
                outcome_width: float) -> float:
    """``max |phi|`` over every subject the design admits, for this model, its limits and weight polynomial.

    For the treated, ``phi = mu1 (1 - w) - mu0 + y' w`` with ``w = p(x)`` in ``[low, high]``,
    ``|y'| <= R/2`` and ``|mu_t| <= M_t`` (:func:`predictor_bound`); controls are the same with the arms
    swapped.
    """
    m0, m1 = (predictor_bound(model, limits, n_sites, outcome_width, r) for r in (1, 2))
    one_minus = max(abs(1.0 - poly.low), abs(poly.high - 1.0))
    top = max(abs(poly.low), abs(poly.high))
    return max(m1, m0) * one_minus + max(m0, m1) + 0.5 * outcome_width * top


def replicate_bound(model: NuisanceModel, limits: PartLimits, change: NuisanceModel, change_limits: PartLimits,
                    poly: WeightPolynomial, n_sites: int, outcome_width: float) -> float:
    """``max |phi(copy) - phi(model)|`` over every admissible subject, the copy scored with the study
    model's clipped parts plus the change's (:func:`model_change`), both with ``poly``.

    For the treated, ``Delta phi = Delta mu1 (1 - w') - mu1 Delta w - Delta mu0 + y' Delta w``, so
    ``|Delta phi| <= DM1 max|1 - w| + (M1 + R/2) slope DE / E + DM0``, with ``M_t`` the study model's
    :func:`predictor_bound` and ``DE``, ``DM_t`` the change's; controls alike with the arms swapped.
    """
    m0, m1 = (predictor_bound(model, limits, n_sites, outcome_width, r) for r in (1, 2))
    de, d0, d1 = (predictor_bound(change, change_limits, n_sites, outcome_width, r) for r in (0, 1, 2))
    one_minus = max(abs(1.0 - poly.low), abs(poly.high - 1.0))
    return max(d1, d0) * one_minus + (max(m1, m0) + 0.5 * outcome_width) * poly.slope * de / poly.domain + max(d0, d1)


def vertical_components(
    estimators: Sequence[str], estimands: Sequence[str], model: NuisanceModel, limits: PartLimits,
    changes: Sequence[tuple[NuisanceModel, PartLimits]], poly: WeightPolynomial, n_sites: int,
    outcome_width: float,
) -> tuple[Component, ...]:
    """The released sums and their model-dependent ranges (every bound from public quantities).

    The point sum ``aipw_ate`` and the spread sum ``aipw_ate_sq`` weigh as in the horizontal release
    (:data:`~.scores.POINT_WEIGHT`, :data:`~.scores.SPREAD_WEIGHT`); replicate ``b`` sums
    ``phi(model_b) - phi(model)`` over ``[-c_b, c_b]`` with :func:`replicate_bound`'s ``c_b`` (``changes``: each
    replicate's :func:`model_change` and its :func:`part_limits`).
    """
    wanted = [(e, s) for e in estimators for s in estimands]
    if not wanted or any(pair not in VERTICAL_NEEDS for pair in wanted):
        raise InputError(
            f"dp_effects on column groups serves {sorted(VERTICAL_NEEDS)}, not {wanted}",
            'declare estimators = ["aipw"] and estimands = ["ate"] for a study with column groups',
        )
    for m, lim in [(model, limits), *changes]:
        _check_model(m, lim, outcome_width)
    poly = proved_weight(poly)
    domain = score_scales(model, limits, changes, n_sites, outcome_width)[0]
    if not poly.domain >= domain:
        raise InputError(f"the weight polynomial's domain {poly.domain:g} is below the models' |eta| bound {domain:g}",
                         "build it with weight_polynomial(score_scales(...)[0], trim)")
    bound = score_bound(model, limits, poly, n_sites, outcome_width) * (1.0 + ENCRYPTION_MARGIN)
    parts = [Component("aipw_ate", True, -bound, bound, POINT_WEIGHT),
             Component("aipw_ate_sq", False, 0.0, bound * bound, SPREAD_WEIGHT)]
    if changes:
        weight = math.sqrt(REPLICATE_SHARE / len(changes))
        for b, (change, change_limits) in enumerate(changes):
            c = replicate_bound(model, limits, change, change_limits, poly, n_sites, outcome_width) * (
                1.0 + ENCRYPTION_MARGIN)
            parts.append(Component(f"aipw_ate@{b}", False, -c, c, weight, "aipw_ate", b))
    if not all(math.isfinite(p.high) and p.high > 0.0 for p in parts):
        raise InputError(f"score bounds {[p.high for p in parts]} are not all positive and finite (a replicate "
                         "equal to the model, or limits or coefficients too large)",
                         "send the models fitted from the release")
    return tuple(parts)


def _check_model(model: NuisanceModel, limits: PartLimits, outcome_width: float) -> None:
    """Refuse coefficients or limits that are not finite: an infinite coefficient times a zero covariate is NaN,
    so whether a subject's part is finite would depend on its value."""
    coefficients = _coefficients(model, outcome_width)
    if not all(np.all(np.isfinite(c)) and math.isfinite(float(np.abs(c).sum())) for c in coefficients):
        raise InputError("a nuisance model has coefficients that are not finite (or whose sum overflows)",
                         "send the models fitted from the release")
    if np.shape(limits.low) != np.shape(limits.high) or not (np.all(np.isfinite(limits.low))
                                                             and np.all(np.isfinite(limits.high))):
        raise InputError("clip limits are not finite arrays of one shape", "send part_limits() of the released Gram")


def aipw_scores(treatment: NDArray[np.float64], outcome: NDArray[np.float64], x: Any, mu0: Any, mu1: Any,
                poly: WeightPolynomial, *, unit: float = 1.0, factor: float = 1.0, weight: Any = None) -> Any:
    """Per-subject ``factor * phi``, ``phi = (mu1 - mu0) + b p(s x)``, ``b = s (y' - mu_T)`` (module docstring).

    ``treatment`` (0/1), ``s = 2T - 1`` and the centred ``outcome`` are the label holder's plaintext and
    only multiply or add; ``x = eta / E``, ``mu0`` and ``mu1`` (in units of ``unit``: ``mu_t = unit * mu0``)
    are numpy arrays or encrypted columns. Written as
    ``factor phi = c (mu1 - mu0) + [mu0 (-s c) + (mu1 - mu0)(-T c) + s y' factor] p(s x)``, ``c = unit factor``,
    so every plaintext multiplies once: ``ceil(log2 degree) + 2`` levels. ``weight``: ``p(s x)`` when
    already evaluated (one polynomial serves every ``factor``).
    """
    sign = 2.0 * treatment - 1.0
    scale = unit * factor
    gap = mu1 - mu0
    slope = mu0 * (-scale * sign) + gap * (-scale * treatment) + (factor * sign) * outcome
    if weight is None:
        weight = evaluate_weight(poly, bounded(x, 1.0), sign)
    return gap * scale + slope * weight


def scaled_score_terms(
    treatment: NDArray[np.float64], outcome: NDArray[np.float64], at_model: Sequence[Any],
    at_copies: Sequence[Sequence[Any]], poly: WeightPolynomial, parts: Sequence[Component], unit: float,
) -> list[Any]:
    """Per-subject ``v_j w_j / r_j`` of each released sum ``j`` (:func:`vertical_components`' order).

    ``at_model = (x, m0, m1)`` and each copy's the same, with ``x = eta / E`` and ``mu_t = unit m_t``.
    The sum of column ``j`` is what the horizontal release scales (:func:`~.release.scaled_sums`); each
    carries its proved bound (``w_j / 2``; ``w_j`` for the sum of squares, in ``[0, w_j]``). The model's scores
    are computed once (at the square's factor) and scaled for the point and replicate sums (``phi`` is linear in
    its factor): one product by a scalar in place of a product of two encrypted columns, within the square's depth.
    """
    sign = 2.0 * treatment - 1.0
    point, square, *copies = parts
    weights = [evaluate_weight(poly, bounded(x, 1.0), sign) for x, *_ in (at_model, *at_copies)]

    def phi(at: Sequence[Any], weight: Any, factor: float) -> Any:
        return aipw_scores(treatment, outcome, at[0], at[1], at[2], poly, unit=unit, factor=factor, weight=weight)

    bound = point.high  # |phi| <= B_phi (score_bound)
    root_factor = math.sqrt(square.weight / square.width)
    root = bounded(phi(at_model, weights[0], root_factor), bound * root_factor)

    def at_model_times(factor: float) -> Any:  # factor phi(model) = (factor / root_factor) root: phi is linear in it
        return root * (factor / root_factor)

    terms = [bounded(at_model_times(point.weight / point.width), bound * point.weight / point.width),
             bounded(root * root, (bound * root_factor) ** 2)]
    for copy, at, weight in zip(copies, at_copies, weights[1:], strict=True):
        f = copy.weight / copy.width
        terms.append(bounded(phi(at, weight, f) - at_model_times(f), copy.high * f))
    return terms


def group_design(feature_map: FeatureMap, X: NDArray[np.float64], site: int, groups: ColumnGroups, group: int
                 ) -> NDArray[np.float64]:
    """Design rows with only ``group``'s columns (and, for the label holder, the site one-hot) filled in.

    ``X`` holds the group's covariates in the group's order. The full design row is the sum of the
    groups' rows, so every linear predictor is the sum of the groups' parts. With ``groups.norm_bounds`` the
    group's covariates are scaled onto ``||z_g||^2 <= C_g`` (:class:`ColumnGroups`; float rounding of the
    scaled norm, 1e-16 relative, is far inside the statistics' :data:`ENCRYPTION_MARGIN`).
    """
    columns = groups.groups[group]
    full = np.zeros((X.shape[0], feature_map.n_covariates))
    full[:, list(columns)] = X
    design = feature_map.design(full, site)
    design[:, feature_map.n_sites + np.setdiff1d(np.arange(feature_map.n_covariates), columns)] = 0.0
    if group != 0:
        design[:, : feature_map.n_sites] = 0.0
    if groups.norm_bounds is not None:
        own = feature_map.n_sites + np.asarray(columns, dtype=np.int64)
        squared = np.sum(design[:, own] ** 2, axis=1)
        bound = groups.squared_norms()[group]
        design[:, own] *= np.sqrt(bound / np.maximum(squared, bound))[:, None]
    return design
