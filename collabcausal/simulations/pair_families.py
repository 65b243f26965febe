"""Synthetic cause-effect pair families as published: Mooij et al. (2016) and Tagasovska et al. (2020).

**SIM, SIM-c, SIM-ln, SIM-G** are the simulated families of Mooij, Peters, Janzing, Zscheischler and
Schölkopf, "Distinguishing cause from effect using observational data: methods and benchmarks", JMLR 17
(2016), Appendix C. The appendix's text could not be read from this project's sources; the construction
and constants below are those of the authors' generator released with the paper's code (the ``cep``
package, Copyright Joris Mooij 2008-2015: ``simulate_pairs.m``, ``randmonoinc.m``, ``randgp.m``, and
``experiments/simdata_article.sh``, which calls ``simulate_pairs`` once per family with the article's
hyper-parameters; ``Gamma(a, b)`` is MATLAB's ``gamrnd(a, b)``, shape ``a`` and scale ``b``):

* **random density** ``RD(w)``: ``E ~ N(0, 1)`` per row, ``F`` a path of a GP with squared-exponential
  kernel ``exp(-(e - e')^2 / (2 w^2))`` at ``E``, the sample is the cumulative integral of ``exp(F)`` up
  to ``E`` (``randmonoinc``); standardised.
* **noises**: ``E_X ~ RD(w_EX)``, ``E_Y ~ RD(w_EY)`` (and ``E_Z ~ RD(w_EZ)`` for a confounder), each
  ``w ~ Gamma(a_w, b_w)``.
* **cause**: ``X`` a GP path on ``(E_X[, E_Z])`` with length scales ``(s_EX[, s_EZ])``, standardised.
* **effect**: ``Y`` a GP path on ``(X, E_Y[, E_Z])`` with length scales ``(s_X, s_EY[, s_EZ])`` (fresh
  draws), standardised; the noise is not additive.
* **measurement noise**: ``X + N(0, m_X^2)``, ``Y + N(0, m_Y^2)``, ``m ~ Gamma(a_m, b_m)``.

Common to the four: ``w_EY, w_EZ ~ Gamma(5, 0.1)``, ``s_EZ ~ Gamma(2, 15)``, ``s_X ~ Gamma(2, 3)``
(the script's ``[2, 1.5*2]``), GP jitter ``tau = 1e-4`` (negligible; not simulated). Per family
(:data:`SIM_PRIORS`):

===========  ==============  ===============  ================  ===============  ===============
family       confounders     ``w_EX``         ``s_EX``          ``s_EY``         ``m_X, m_Y``
===========  ==============  ===============  ================  ===============  ===============
``SIM``      0               Gamma(5, 0.1)    Gamma(2, 1.5)     Gamma(2, 15)     Gamma(2, 0.1)
``SIM-c``    1               Gamma(5, 0.1)    Gamma(2, 1.5)     Gamma(2, 15)     Gamma(2, 0.1)
``SIM-ln``   0               Gamma(5, 0.1)    Gamma(2, 1.5)     Gamma(2, 300)    Gamma(2, 0.01)
``SIM-G``    0               Gamma(1e6, 1e-3) Gamma(1e6, 1e-3)  Gamma(2, 15)     Gamma(2, 0.1)
===========  ==============  ===============  ================  ===============  ===============

In SIM-G, ``w_EX`` and ``s_EX`` are about 1000: ``E_X`` is a Gaussian pushed through a nearly linear
map, and so is ``X``: an approximately Gaussian cause, with the mechanism of SIM. (``E_Y`` keeps SIM's
random density in the authors' script.) Two implementation differences, neither a change of law: GP
paths are drawn with random Fourier features (Rahimi and Recht, 2007; 200 features) instead of a
Cholesky factor, and the random density's GP is drawn on a grid over [-5, 5] and interpolated.

**AN, AN-s, LS, LS-s, MN-U** are the families of Tagasovska, Chavez-Demoulin and Vatter, "Distinguishing
cause from effect using quantiles: bivariate quantile causal discovery", ICML 2020, section 5 (built on
the generators of Peters, Mooij, Janzing and Schölkopf, JMLR 15, 2014; not in Mooij et al. 2016). The
constants are those of the authors' generator (``R/utils/data_generators.R`` of their bQCD code,
``sample_generative_model``): cause ``X = sqrt(v) N`` with ``v ~ U(1, 2)`` per row (a Gaussian scale
mixture); noise ``E = 0.2 sqrt(v') N'``, ``v' ~ U(1, 2)`` per row; mechanism either a GP path with
kernel ``exp(-(x - x')^2 / 2)`` (``AN``, ``LS``: non-injective) or a random sigmoid
``f(x) = c b (x + a) / (1 + |b (x + a)|)`` with ``a ~ U(-2, 2)``, ``|b| ~ U(0.5, 2)`` of random sign,
``c ~ 1 + Exp(4)`` (``AN-s``, ``LS-s``, ``MN-U``: injective), and

===========  ====================================================================================
``AN``       ``Y = f(X) + E``, ``f`` a GP path: additive noise.
``AN-s``     ``Y = f(X) + E``, ``f`` a random sigmoid.
``LS``       ``Y = f(X) + (f(X) - min f) E``: location-scale (heteroscedastic) noise, GP path.
``LS-s``     as LS with a random sigmoid.
``MN-U``     ``Y = f(X) U``, ``U ~ U(0, 1)``: multiplicative noise, random sigmoid.
===========  ====================================================================================

Every family: columns standardised, swapped with probability 1/2, the true direction recorded.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from collabcausal.errors import InputError
from collabcausal.estimators.discovery.anm import X_TO_Y, Y_TO_X
from collabcausal.randomness import child_rng
from collabcausal.simulations.anm_pairs import LabelledPair

TAGASOVSKA_FAMILIES: tuple[str, ...] = ("AN", "AN-s", "LS", "LS-s", "MN-U")
FAMILIES: tuple[str, ...] = (*TAGASOVSKA_FAMILIES, "SIM", "SIM-c", "SIM-ln", "SIM-G")
N_FEATURES = 200
_GRID = np.linspace(-5.0, 5.0, 401)
Gamma = tuple[float, float]
"""``(shape, scale)`` of a Gamma prior, as MATLAB's ``gamrnd(shape, scale)``."""


@dataclass(frozen=True)
class SimPriors:
    """One row of the module docstring's table: the Gamma priors of a Mooij et al. (2016) family."""

    confounded: bool
    w_ex: Gamma
    s_ex: Gamma
    s_ey: Gamma
    measurement: Gamma


SIM_PRIORS: dict[str, SimPriors] = {
    "SIM": SimPriors(False, (5.0, 0.1), (2.0, 1.5), (2.0, 15.0), (2.0, 0.1)),
    "SIM-c": SimPriors(True, (5.0, 0.1), (2.0, 1.5), (2.0, 15.0), (2.0, 0.1)),
    "SIM-ln": SimPriors(False, (5.0, 0.1), (2.0, 1.5), (2.0, 300.0), (2.0, 0.01)),
    "SIM-G": SimPriors(False, (1e6, 1e-3), (1e6, 1e-3), (2.0, 15.0), (2.0, 0.1)),
}
W_EY: Gamma = (5.0, 0.1)
W_EZ: Gamma = (5.0, 0.1)
S_EZ: Gamma = (2.0, 15.0)
S_X: Gamma = (2.0, 3.0)


def gp_path(
    inputs: NDArray[np.float64], length_scales: Sequence[float], rng: np.random.Generator
) -> NDArray[np.float64]:
    """One path of a zero-mean, unit-variance GP with a squared-exponential kernel at ``inputs``.

    Random Fourier features: ``f(u) = sqrt(2/D) sum_k w_k cos(omega_k . (u / l) + b_k)`` with
    ``omega_k ~ N(0, I)``, ``b_k ~ U(0, 2 pi)``, ``w_k ~ N(0, 1)``; its covariance tends to
    ``exp(-|(u - u') / l|^2 / 2)`` as ``D`` grows.

    Parameters
    ----------
    inputs : ndarray of shape (n, k)
    length_scales : sequence of k floats
    rng : Generator
    """
    u = np.asarray(inputs, dtype=np.float64) / np.asarray(length_scales, dtype=np.float64)
    omega = rng.normal(size=(u.shape[1], N_FEATURES))
    phase = rng.uniform(0.0, 2.0 * np.pi, N_FEATURES)
    weights = rng.normal(size=N_FEATURES)
    return np.sqrt(2.0 / N_FEATURES) * np.cos(u @ omega + phase) @ weights


def random_density_sample(n: int, length_scale: float, rng: np.random.Generator) -> NDArray[np.float64]:
    """``n`` standardised draws from ``RD(length_scale)``, Mooij et al. (2016) Appendix C (``randmonoinc``)."""
    g = gp_path(_GRID[:, None], [length_scale], rng)
    cumulative = np.concatenate([[0.0], np.cumsum(np.exp(g[1:]) * np.diff(_GRID))])
    return _standardise(np.interp(rng.normal(size=n), _GRID, cumulative))


def family_pair(family: str, n: int, rng: np.random.Generator, *, name: str = "") -> LabelledPair:
    """One pair of ``family`` (see the module docstring) with ``n`` rows."""
    if family not in FAMILIES:
        raise InputError(f"unknown pair family {family!r}", f"use one of {list(FAMILIES)}")
    columns = quantile_family_columns if family in TAGASOVSKA_FAMILIES else sim_family_columns
    cause, effect = columns(family, n, rng)
    return _labelled(family, n, cause, effect, rng, name)


def sim_family_columns(
    family: str, n: int, rng: np.random.Generator
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Cause and effect of ``SIM``, ``SIM-c``, ``SIM-ln`` or ``SIM-G`` (Mooij et al. 2016, Appendix C)."""
    priors = SIM_PRIORS[family]
    e_x = random_density_sample(n, rng.gamma(*priors.w_ex), rng)
    e_y = random_density_sample(n, rng.gamma(*W_EY), rng)
    confounder = [random_density_sample(n, rng.gamma(*W_EZ), rng)] if priors.confounded else []
    cause_scales = [rng.gamma(*priors.s_ex), *rng.gamma(*S_EZ, len(confounder))]
    cause = _standardise(gp_path(np.column_stack([e_x, *confounder]), cause_scales, rng))
    effect_scales = [rng.gamma(*S_X), rng.gamma(*priors.s_ey), *rng.gamma(*S_EZ, len(confounder))]
    effect = _standardise(gp_path(np.column_stack([cause, e_y, *confounder]), effect_scales, rng))
    m_x, m_y = rng.gamma(*priors.measurement, 2)
    return cause + m_x * rng.normal(size=n), effect + m_y * rng.normal(size=n)


def random_sigmoid(x: NDArray[np.float64], rng: np.random.Generator) -> NDArray[np.float64]:
    """``c b (x + a) / (1 + |b (x + a)|)`` with the random ``a, b, c`` of the module docstring (injective)."""
    a = rng.uniform(-2.0, 2.0)
    b = rng.uniform(0.5, 2.0) * rng.choice((-1.0, 1.0))
    c = 1.0 + rng.exponential(0.25)
    return c * b * (x + a) / (1.0 + np.abs(b * (x + a)))


def quantile_family_columns(
    family: str, n: int, rng: np.random.Generator
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Cause and effect of ``AN``, ``AN-s``, ``LS``, ``LS-s`` or ``MN-U`` (Tagasovska et al. 2020, section 5)."""
    cause = np.sqrt(rng.uniform(1.0, 2.0, n)) * rng.normal(size=n)
    mechanism = gp_path(cause[:, None], [1.0], rng) if family in ("AN", "LS") else random_sigmoid(cause, rng)
    noise = 0.2 * np.sqrt(rng.uniform(1.0, 2.0, n)) * rng.normal(size=n)
    if family in ("AN", "AN-s"):
        return cause, mechanism + noise
    if family == "MN-U":
        return cause, mechanism * rng.uniform(size=n)
    return cause, mechanism + (mechanism - mechanism.min()) * noise


def _labelled(
    family: str, n: int, cause: NDArray[np.float64], effect: NDArray[np.float64], rng: np.random.Generator, name: str
) -> LabelledPair:
    """Standardised columns, swapped with probability 1/2, with the true direction."""
    cause, effect = _standardise(cause), _standardise(effect)
    label = name or f"{family}-{n}"
    if rng.random() < 0.5:
        return LabelledPair(label, effect, cause, Y_TO_X)
    return LabelledPair(label, cause, effect, X_TO_Y)


def family_pairs(family: str, n_pairs: int, n: int, *, seed: int = 0) -> list[LabelledPair]:
    """``n_pairs`` pairs of ``family`` with ``n`` rows each, each from its own seeded stream."""
    return [
        family_pair(family, n, child_rng(seed, "pair-family", family, n, k), name=f"{family}-{k}")
        for k in range(n_pairs)
    ]


def _standardise(values: NDArray[np.float64]) -> NDArray[np.float64]:
    sd = float(np.std(values))
    return (values - float(np.mean(values))) / (sd if sd > 0 else 1.0)
