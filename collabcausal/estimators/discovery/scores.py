"""Dependence scores between an input and a residual (paper 002, section 3.3).

Every score is small for independent samples and grows with dependence. The ANM picks the
direction whose residuals have the smaller score (paper 002, Algorithm 1). Inputs are 1-D float
arrays of equal length ``m`` (checked by the caller).
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray
from scipy.stats import gamma, kendalltau

from collabcausal.errors import InputError
from collabcausal.estimators.discovery.krr import gaussian_kernel

HSIC_BLOCK = 256


def ordinal_ranks(values: NDArray[np.float64]) -> NDArray[np.float64]:
    """Ranks 1..m, ties broken by position (a total order, so Theorem 1's proof applies)."""
    ranks = np.empty(values.size, dtype=np.float64)
    ranks[np.argsort(values, kind="stable")] = np.arange(1, values.size + 1)
    return ranks


def spearman_score(a: NDArray[np.float64], b: NDArray[np.float64]) -> float:
    """``|1 - 6 sum_i d_i^2 / (m (m^2 - 1))|`` with ``d_i`` the rank differences (paper 002, sec. 3.3)."""
    m = a.size
    d = ordinal_ranks(a) - ordinal_ranks(b)
    return abs(1.0 - 6.0 * float(d @ d) / (m * (m * m - 1.0)))


def kendall_score(a: NDArray[np.float64], b: NDArray[np.float64]) -> float:
    """``|C - D| / (m (m - 1) / 2)``: Kendall's tau-a (paper 002, sec. 3.3); tied pairs count in neither.

    Computed in ``O(m log m)`` from scipy's tau-b: ``C - D = tau_b sqrt((n0 - n1)(n0 - n2))`` with
    ``n0`` all pairs and ``n1``, ``n2`` the pairs tied in ``a``, in ``b``.
    """
    m = a.size
    n0 = m * (m - 1) / 2.0
    n1, n2 = (_tied_pairs(v) for v in (a, b))
    if n1 == n0 or n2 == n0:
        return 0.0
    tau_b = kendalltau(a, b, variant="b").statistic
    concordance = round(float(tau_b) * math.sqrt((n0 - n1) * (n0 - n2)))
    return abs(concordance) / n0


def _tied_pairs(values: NDArray[np.float64]) -> float:
    counts = np.unique(values, return_counts=True)[1].astype(np.float64)
    return float((counts * (counts - 1.0)).sum() / 2.0)


def hsic_score(
    a: NDArray[np.float64], b: NDArray[np.float64], *, width_a: float, width_b: float, block: int = HSIC_BLOCK
) -> float:
    """``trace(K H L H) / (m - 1)^2`` with Gaussian kernels (bounded by 1); paper 002, eq. 4.

    Uses ``trace(KHLH) = sum_ij K_ij L_ij - (2/m) sum_i k_i l_i + (sum_i k_i)(sum_i l_i) / m^2``
    with row sums ``k_i``, ``l_i``, accumulated over row blocks so memory stays ``O(block * m)``.
    """
    m = a.size
    cross = 0.0
    k_rows = np.empty(m)
    l_rows = np.empty(m)
    for start in range(0, m, block):
        stop = min(start + block, m)
        k_block = gaussian_kernel(a[start:stop], a, width_a)
        l_block = gaussian_kernel(b[start:stop], b, width_b)
        cross += float(np.einsum("ij,ij->", k_block, l_block))
        k_rows[start:stop] = k_block.sum(axis=1)
        l_rows[start:stop] = l_block.sum(axis=1)
    trace = cross - 2.0 / m * float(k_rows @ l_rows) + float(k_rows.sum()) * float(l_rows.sum()) / (m * m)
    return trace / (m - 1.0) ** 2


def hsic_norm(hsic: float, m: int) -> float:
    """The released HSIC statistic: the Hilbert-Schmidt norm of the empirical cross-covariance operator.

    Gretton et al. (2005): ``HSIC_b = trace(K H L H) / m^2 = ||C_ab||_HS^2`` with
    ``C_ab = (1/m) sum_i (phi(a_i) - mu_a) (x) (psi(b_i) - mu_b)``. From :func:`hsic_score`'s value
    ``trace(KHLH) / (m - 1)^2`` this is ``sqrt(hsic) (m - 1) / m`` (rounding below 0 read as 0). A
    monotone map of HSIC, so it orders the two directions the same way; its global sensitivity is
    far smaller (:func:`~collabcausal.estimators.discovery.sensitivity.score_sensitivity`).
    """
    return math.sqrt(max(hsic, 0.0)) * (m - 1.0) / m


def hsic_pvalue(a: NDArray[np.float64], b: NDArray[np.float64], *, width_a: float, width_b: float) -> float:
    """P-value of the HSIC independence test of ``a`` and ``b``: ``exp`` of :func:`hsic_log_pvalue`."""
    return math.exp(hsic_log_pvalue(a, b, width_a=width_a, width_b=width_b))


def hsic_log_pvalue(a: NDArray[np.float64], b: NDArray[np.float64], *, width_a: float, width_b: float) -> float:
    """Log p-value of the HSIC independence test of ``a`` and ``b`` (Gaussian kernels), gamma approximation.

    Gretton et al. (2008), "A kernel statistical test of independence", section 4: the statistic
    ``m HSIC_b`` with ``HSIC_b = trace(K H L H) / m^2`` is compared with a gamma law whose mean
    ``(1 + mu_x mu_y - mu_x - mu_y) / m`` and variance
    ``72 (m-4)(m-5) / (m(m-1)(m-2)(m-3)) * mean_{i != j} ((K~ o L~)_ij / 6)^2`` (``K~ = H K H``,
    ``mu_x`` the mean off-diagonal kernel value) are those of ``HSIC_b`` under independence. Exact
    (non-private) statistics: ``O(m^2)`` memory. The log keeps tiny p-values apart (Mooij et al.
    2016's ANM-pHSIC compares them across directions).
    """
    m = a.size
    if m < 6:
        raise InputError(f"the HSIC test needs at least 6 points, got {m}", "use more pairs")
    k, l_ = gaussian_kernel(a, a, width_a), gaussian_kernel(b, b, width_b)
    kc = k - k.mean(axis=0) - k.mean(axis=1)[:, None] + k.mean()
    lc = l_ - l_.mean(axis=0) - l_.mean(axis=1)[:, None] + l_.mean()
    product = kc * lc
    statistic = float(product.sum()) / m
    terms = (product / 6.0) ** 2
    variance = (float(terms.sum()) - float(np.trace(terms))) / (m * (m - 1))
    variance *= 72.0 * (m - 4) * (m - 5) / (m * (m - 1) * (m - 2) * (m - 3))
    mu_x = (float(k.sum()) - float(np.trace(k))) / (m * (m - 1))
    mu_y = (float(l_.sum()) - float(np.trace(l_))) / (m * (m - 1))
    mean = (1.0 + mu_x * mu_y - mu_x - mu_y) / m
    if variance <= 0.0 or mean <= 0.0:
        return 0.0  # a constant input: no dependence to detect, p = 1
    return float(gamma.logsf(statistic, mean * mean / variance, scale=variance * m / mean))


def quartile_indices(m: int) -> tuple[int, int]:
    """0-based positions of the first and third quartile order statistics: ``ceil(m/4)``, ``ceil(3m/4)``."""
    return math.ceil(m / 4) - 1, math.ceil(3 * m / 4) - 1


def iqr(values: NDArray[np.float64]) -> float:
    """Interquartile range as a difference of order statistics (the form Dwork & Lei's test uses)."""
    lo, hi = quartile_indices(values.size)
    ordered = np.sort(values)
    return float(ordered[hi] - ordered[lo])


def iqr_score(a: NDArray[np.float64], b: NDArray[np.float64]) -> float:
    """``log IQR(a) + log IQR(b)`` (paper 002, eq. 2); ``-inf`` if an IQR is 0."""
    with np.errstate(divide="ignore"):
        return float(np.log(iqr(a)) + np.log(iqr(b)))


def variance_score(a: NDArray[np.float64], b: NDArray[np.float64]) -> float:
    """``log Var(a) + log Var(b)`` (Bühlmann et al.; paper 002, sec. 3.3). Non-private only."""
    with np.errstate(divide="ignore"):
        return float(np.log(np.var(a)) + np.log(np.var(b)))


CAUSE_DENSITIES: tuple[str, ...] = ("gaussian", "kde", "kde-in")


def marginal_nll(values: NDArray[np.float64], density: str = "gaussian") -> float:
    """Mean negative log-likelihood of the cause's values under a fitted marginal density.

    The mean of :func:`marginal_nll_rows`. ``"gaussian"``: the maximum-likelihood normal,
    ``(1/2) log(2 pi e Var)``. This is what LOCI-M's comparison amounts to (Immer et al., ICML 2023): it
    standardises both columns and compares the conditional likelihoods only, i.e. gives either standardised
    cause the same normal likelihood; on the [-1, 1] scale used here the normal term carries the change of
    scale (the same in both directions). ``"kde"``: a leave-one-out Gaussian kernel density estimate with
    Silverman's bandwidth ``1.06 sd m^{-1/5}`` (Silverman 1986, eq. 3.28), a nonparametric entropy estimate
    of the cause. ``"kde-in"``: the same estimate with each row's own kernel kept, the resubstitution entropy
    estimate of Ahmad & Lin (IEEE Trans. Inf. Theory 22, 1976); its per-row term is at most
    ``log(m h sqrt(2 pi))``, where the leave-one-out term of an isolated row (an outlier beyond the other rows'
    kernels) is unbounded (floored at the smallest float: about 708 nats for one row). A constant column has an
    unbounded density: ``-inf``.
    """
    return float(np.mean(marginal_nll_rows(values, density)))


def marginal_nll_rows(values: NDArray[np.float64], density: str = "gaussian") -> NDArray[np.float64]:
    """Per-row negative log-likelihood ``-log p(v_i)`` of :func:`marginal_nll`'s fitted density (``-inf`` rows
    for a constant column)."""
    sd = float(np.std(values))
    if sd == 0.0:
        return np.full(values.size, -math.inf)
    if density == "gaussian":
        standard = (values - float(np.mean(values))) / sd
        return 0.5 * math.log(2.0 * math.pi * sd * sd) + 0.5 * standard * standard
    if density not in CAUSE_DENSITIES:
        raise InputError(f"unknown cause density {density!r}", f"use one of {list(CAUSE_DENSITIES)}")
    m = values.size
    width = 1.06 * sd * m ** -0.2
    sums = gaussian_kernel(values, values, width).sum(axis=1)
    if density == "kde-in":
        return -np.log(sums / (m * width * math.sqrt(2.0 * math.pi)))
    leave_one_out = (sums - 1.0) / ((m - 1) * width * math.sqrt(2.0 * math.pi))
    return -np.log(np.maximum(leave_one_out, np.finfo(float).tiny))


def likelihood_score(
    a: NDArray[np.float64], standardised: NDArray[np.float64], log_scale: NDArray[np.float64], *, density: str
) -> float:
    """Mean negative log-likelihood of ``(a, b)`` under the location-scale model ``b = f(a) + g(a) N``.

    ``N ~ N(0, 1)``, ``standardised = (b - f(a)) / g(a)``, ``log_scale = log g(a)`` per row:
    ``-(1/m) sum_i [log p(a_i) + log phi(standardised_i) - log_scale_i]`` with ``p`` the cause's
    :func:`marginal_nll` density (the mean of :func:`likelihood_rows`). The direction of the smaller value is
    the more likely model: the likelihood comparison of LOCI-M (Immer, Schultheiss, Vogt, Schölkopf, Bühlmann
    & Marx, "On the identifiability and estimation of causal location-scale noise models", ICML 2023). With a
    constant ``g^2`` equal to the residuals' mean square (additive noise, in-sample, residuals of mean 0) and
    the Gaussian density it is half of :func:`variance_score` plus a constant. Non-private only.
    """
    return float(np.mean(likelihood_rows(a, standardised, log_scale, density=density)))


def likelihood_rows(
    a: NDArray[np.float64], standardised: NDArray[np.float64], log_scale: NDArray[np.float64], *, density: str
) -> NDArray[np.float64]:
    """Per-row terms ``-log p(a_i) - log phi(standardised_i) + log_scale_i`` of :func:`likelihood_score`."""
    conditional = 0.5 * standardised * standardised + log_scale + 0.5 * math.log(2.0 * math.pi)
    return marginal_nll_rows(a, density) + conditional


def vuong_statistic(differences: NDArray[np.float64]) -> float:
    """Vuong's statistic ``sqrt(m) mean(d) / sd(d)`` of per-row log-likelihood differences ``d``.

    Vuong, "Likelihood ratio tests for model selection and non-nested hypotheses", Econometrica 57 (1989):
    the test between two non-nested models.

    Asymptotically standard normal when neither model is the closer one; a large ``|z|`` says the sign of
    ``mean(d)`` is not the rows' noise. Infinite rows (a constant column) give ``+-inf``; ``d`` all equal, 0 when
    its mean is 0, else ``+-inf``.
    """
    with np.errstate(invalid="ignore"):  # inf - inf rows: nan, read as no preference
        mean = float(np.mean(differences))
    if not math.isfinite(mean):
        return mean if not math.isnan(mean) else 0.0
    sd = float(np.std(differences))
    if sd == 0.0:
        return 0.0 if mean == 0.0 else math.copysign(math.inf, mean)
    return math.sqrt(differences.size) * mean / sd
