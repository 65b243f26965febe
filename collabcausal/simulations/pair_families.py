"""Synthetic cause-effect pair families in the spirit of Mooij et al. (2016), section 5.3.

Mooij, Peters, Janzing, Zscheischler and Schölkopf, "Distinguishing cause from effect using
observational data: methods and benchmarks", JMLR 17 (2016), describe simulated benchmark families
(SIM, SIM-c, SIM-ln, SIM-G) whose mechanisms are random functions drawn from Gaussian processes and
whose input distributions are random densities. This module follows that description; the exact
hyper-priors below are ours (the text gives the construction, we chose the constants), so a
family here is "SIM-like", not the published files.

Building blocks, all seeded:

* **random density**: ``E ~ N(0, 1)`` pushed through a random increasing map
  ``h(t) = integral of exp(g(s)) ds`` with ``g`` a Gaussian-process path (squared-exponential
  kernel, length scale ~ Gamma(5, 0.1)); the result is standardised. Its density is smooth,
  skewed and often multimodal.
* **random mechanism**: a Gaussian-process path on one or more inputs, sampled with random
  Fourier features (Rahimi and Recht, 2007) so that any number of rows costs ``O(n D)``.

Families (cause ``X``, effect ``Y``; every output standardised; columns swapped with probability
1/2 and the true direction recorded):

===========  ====================================================================================
``AN``       additive noise: ``Y = f(X) + s E_Y``, ``f`` a GP path, ``E_Y`` a random density,
             ``s ~ Gamma(5, 0.1)``. The ANM's assumption holds exactly.
``SIM``      ``Y = f(X, s E_Y)``, ``f`` a GP path on both inputs (noise not additive), plus
             measurement noise ``N(0, m^2)`` on both columns, ``m ~ Gamma(2, 0.1)``.
``SIM-ln``   as SIM with low noise: ``s ~ Gamma(5, 0.02)``, ``m ~ Gamma(2, 0.01)``.
``SIM-G``    as SIM with Gaussian ``E_X``, ``E_Y`` and a nearly linear mechanism (length scale of
             ``X`` ~ Gamma(5, 1)): the hardest case for an ANM (a linear Gaussian model is
             symmetric).
``SIM-c``    as SIM with a hidden confounder ``Z`` (a random density) entering both:
             ``X = g(E_X, Z)``, ``Y = f(X, s E_Y, Z)``.
===========  ====================================================================================

The families ``AN-s``, ``LS``, ``LS-s`` and ``MN-U`` are those of Tagasovska, Chavez-Demoulin and
Vatter, "Distinguishing cause from effect using quantiles: bivariate quantile causal discovery",
ICML 2020, section 5 (built on the generators of Peters, Mooij, Janzing and Schölkopf, JMLR 15,
2014; they are not in Mooij et al. 2016). Their construction: cause ``X = sqrt(v) N``
with ``v ~ U(1, 2)`` per row (a Gaussian scale mixture); noise ``E = 0.2 sqrt(v') N'``,
``v' ~ U(1, 2)`` per row; mechanism either a GP path with unit length scale (``LS``) or a random
sigmoid ``f(x) = c b (x + a) / (1 + |b (x + a)|)`` with ``a ~ U(-2, 2)``, ``|b| ~ U(0.5, 2)`` of
random sign, ``c ~ 1 + Exp(4)`` (the ``-s`` families and ``MN-U``), and

===========  ====================================================================================
``AN-s``     ``Y = f(X) + E``, ``f`` a random sigmoid (injective): additive noise.
``LS``       ``Y = f(X) + (f(X) - min f) E``: location-scale (heteroscedastic) noise, GP path.
``LS-s``     as LS with a random sigmoid.
``MN-U``     ``Y = f(X) U``, ``U ~ U(0, 1)``: multiplicative noise, random sigmoid.
===========  ====================================================================================
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from collabcausal.errors import InputError
from collabcausal.estimators.discovery.anm import X_TO_Y, Y_TO_X
from collabcausal.randomness import child_rng
from collabcausal.simulations.anm_pairs import LabelledPair

TAGASOVSKA_FAMILIES: tuple[str, ...] = ("AN-s", "LS", "LS-s", "MN-U")
FAMILIES: tuple[str, ...] = ("AN", "AN-s", "LS", "LS-s", "MN-U", "SIM", "SIM-c", "SIM-ln", "SIM-G")
N_FEATURES = 200
_GRID = np.linspace(-5.0, 5.0, 401)


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


def random_density_sample(n: int, rng: np.random.Generator) -> NDArray[np.float64]:
    """``n`` standardised draws from a random smooth density (the module docstring's recipe)."""
    g = gp_path(_GRID[:, None], [rng.gamma(5.0, 0.1)], rng)
    cumulative = np.concatenate([[0.0], np.cumsum(np.exp(g[1:]) * np.diff(_GRID))])
    return _standardise(np.interp(rng.normal(size=n), _GRID, cumulative))


def family_pair(family: str, n: int, rng: np.random.Generator, *, name: str = "") -> LabelledPair:
    """One pair of ``family`` (see the module docstring) with ``n`` rows."""
    if family not in FAMILIES:
        raise InputError(f"unknown pair family {family!r}", f"use one of {list(FAMILIES)}")
    if family in TAGASOVSKA_FAMILIES:
        cause, effect = quantile_family_columns(family, n, rng)
        return _labelled(family, n, cause, effect, rng, name)
    gaussian = family == "SIM-G"
    e_x = rng.normal(size=n) if gaussian else random_density_sample(n, rng)
    e_y = rng.normal(size=n) if gaussian else random_density_sample(n, rng)
    noise_scale = rng.gamma(5.0, 0.02 if family == "SIM-ln" else 0.1)
    if family == "AN":
        cause = e_x
        effect = gp_path(cause[:, None], [rng.gamma(5.0, 0.1)], rng) + noise_scale * e_y
    else:
        x_scale = rng.gamma(5.0, 1.0 if gaussian else 0.1)
        if family == "SIM-c":
            z = random_density_sample(n, rng)
            cause = _standardise(gp_path(np.column_stack([e_x, z]), rng.gamma(5.0, 0.1, 2), rng))
            inputs = np.column_stack([cause, noise_scale * e_y, z])
            scales = [x_scale, *rng.gamma(5.0, 0.1, 2)]
        else:
            cause = e_x
            inputs = np.column_stack([cause, noise_scale * e_y])
            scales = [x_scale, rng.gamma(5.0, 0.1)]
        effect = gp_path(inputs, scales, rng)
        measurement = rng.gamma(2.0, 0.01 if family == "SIM-ln" else 0.1, 2)
        cause = _standardise(cause) + measurement[0] * rng.normal(size=n)
        effect = _standardise(effect) + measurement[1] * rng.normal(size=n)
    return _labelled(family, n, cause, effect, rng, name)


def random_sigmoid(x: NDArray[np.float64], rng: np.random.Generator) -> NDArray[np.float64]:
    """``c b (x + a) / (1 + |b (x + a)|)`` with the random ``a, b, c`` of the module docstring (injective)."""
    a = rng.uniform(-2.0, 2.0)
    b = rng.uniform(0.5, 2.0) * rng.choice((-1.0, 1.0))
    c = 1.0 + rng.exponential(0.25)
    return c * b * (x + a) / (1.0 + np.abs(b * (x + a)))


def quantile_family_columns(
    family: str, n: int, rng: np.random.Generator
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Cause and effect of ``AN-s``, ``LS``, ``LS-s`` or ``MN-U`` (Tagasovska et al. 2020, section 5)."""
    cause = np.sqrt(rng.uniform(1.0, 2.0, n)) * rng.normal(size=n)
    mechanism = gp_path(cause[:, None], [1.0], rng) if family == "LS" else random_sigmoid(cause, rng)
    noise = 0.2 * np.sqrt(rng.uniform(1.0, 2.0, n)) * rng.normal(size=n)
    if family == "AN-s":
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
