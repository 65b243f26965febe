"""A multi-site study with a CATE linear in two covariates, and the runs of benchmarks/bench_dp_cate_projection.py.

The sites, covariates and treatment policies are :func:`~collabcausal.simulations.multisite.simulate_sites`'
(4 sites, 10 confounders); the outcome means are replaced by ones whose treatment effect is
``tau(x) = a + b clip(x0, -3.5, 3.5) + c x8`` (x0 Gaussian, x8 binary), additive for the continuous
outcome and a risk difference for the binary one (``mu0 = 0.05 + 0.6 sigmoid(x gamma - 0.6)``, so
``mu0 + tau`` stays in (0, 1)). The true projection on ``(1, z0, z8)`` (modifiers scaled to
``[-1, 1]`` by their public ranges) is therefore exact: ``(a + c/2, 3.5 b, c/2)``.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from numpy.typing import NDArray

from collabcausal.analyst.dp_effects import DPEffectsSpec, dp_effects_results
from collabcausal.attacks.privacy_audit import fast_directory
from collabcausal.estimators.dp.effects.projection import Partition
from collabcausal.party.secagg import attach_identities
from collabcausal.protocol.inprocess import InProcessGrid
from collabcausal.secagg import simulation_identities
from collabcausal.simulations.dp_effects_benchmark import site_parties
from collabcausal.simulations.multisite import OUTCOME_RANGE, Outcome, Site, covariate_bounds, simulate_sites

EFFECT = {"binary": (0.1, 0.04, 0.05), "continuous": (1.0, 0.4, 0.5)}
"""(a, b, c) of ``tau(x) = a + b x0 + c x8``."""
_GAMMA = np.array([0.5, 0.4, -0.3, 0.3, 0.2, 0.0, 0.3, -0.25, 0.3, 0.2])
MODIFIERS = ("x0", "x8")
SUBGROUP_EDGES = (-3.5, -0.5, 0.0, 0.5, 3.5)
"""Four bins of x0."""
COLUMNS = tuple(f"x{j}" for j in range(10))


def cate(X: NDArray[np.float64], outcome: Outcome) -> NDArray[np.float64]:
    """``tau(x)``."""
    a, b, c = EFFECT[outcome]
    return a + b * np.clip(X[:, 0], -3.5, 3.5) + c * X[:, 8]


def true_projection(outcome: Outcome) -> NDArray[np.float64]:
    """The projection's coefficients on ``(1, z0, z8)`` (module docstring)."""
    a, b, c = EFFECT[outcome]
    return np.array([a + c / 2, 3.5 * b, c / 2])


def simulate_cate_sites(n_per_site: int, outcome: Outcome, rng: np.random.Generator) -> list[Site]:
    """The four sites with the heterogeneous outcome model (module docstring)."""
    sites = []
    for s in simulate_sites(n_per_site, outcome, rng):
        tau = cate(s.X, outcome)
        if outcome == "binary":
            mu0 = 0.05 + 0.6 / (1.0 + np.exp(-(s.X @ _GAMMA - 0.6)))
            mu1 = mu0 + tau
            y = (rng.random(len(tau)) < np.where(s.T == 1, mu1, mu0)).astype(float)
        else:
            mu0 = 1.0 + s.X @ _GAMMA
            mu1 = mu0 + tau
            y = np.where(s.T == 1, mu1, mu0) + rng.standard_normal(len(tau))
        sites.append(replace(s, Y=y, mean_control=mu0, mean_treated=mu1))
    return sites


def clipped_gaussian_mean(mu: NDArray[np.float64], low: float, high: float) -> NDArray[np.float64]:
    """``E[clip(mu + e, low, high)]`` for ``e ~ N(0, 1)``: ``low Phi(a) + high (1 - Phi(b)) + mu (Phi(b) - Phi(a))
    + phi(a) - phi(b)`` with ``a = low - mu``, ``b = high - mu`` (the normal's partial first moment)."""
    from scipy.stats import norm

    a, b = low - mu, high - mu
    return low * norm.cdf(a) + high * norm.sf(b) + mu * (norm.cdf(b) - norm.cdf(a)) + norm.pdf(a) - norm.pdf(b)


def clipped_outcome_projection(outcome: Outcome, n_draws: int = 400_000) -> NDArray[np.float64]:
    """The projection on ``(1, z0, z8)`` of the CATE of the outcome clipped to its declared range.

    What an estimator that clips ``Y`` to the public ``OUTCOME_RANGE`` (as ``dp_effects`` does) estimates:
    ``E[clip(Y(1)) - clip(Y(0)) | x]``, for the continuous outcome ``Y(t) = mu_t(x) + e``, ``e ~ N(0, 1)``, by
    :func:`clipped_gaussian_mean`; a binary outcome is inside its range, so there it is :func:`true_projection`.
    Least squares over a fixed sample of ``n_draws`` subjects of the design.
    """
    sites = simulate_cate_sites(n_draws // 4, outcome, np.random.default_rng(20261129))
    lo, hi = OUTCOME_RANGE[outcome]

    def clipped_mean(mu: NDArray[np.float64]) -> NDArray[np.float64]:
        return mu if outcome == "binary" else clipped_gaussian_mean(mu, lo, hi)

    effect = np.concatenate([clipped_mean(s.mean_treated) - clipped_mean(s.mean_control) for s in sites])
    Z = modifier_matrix(np.vstack([s.X for s in sites]))
    return np.linalg.lstsq(Z, effect, rcond=None)[0]


def true_subgroup_effects(outcome: Outcome, n_draws: int = 400_000) -> NDArray[np.float64]:
    """Mean ``tau`` in each x0 bin, from a fixed large sample of the design."""
    X = np.vstack([s.X for s in simulate_sites(n_draws // 4, outcome, np.random.default_rng(20261128))])
    bins = Partition(0, SUBGROUP_EDGES).bin_of(np.clip(X[:, 0], -3.5, 3.5))
    tau = cate(X, outcome)
    return np.array([tau[bins == c].mean() for c in range(len(SUBGROUP_EDGES) - 1)])


@dataclass(frozen=True)
class PrivateRun:
    """One private study: coefficients, their SEs, subgroup effects and SEs, the ATE."""

    coef: NDArray[np.float64]
    coef_se: NDArray[np.float64]
    subgroup: NDArray[np.float64]
    subgroup_se: NDArray[np.float64]
    ate: float
    noise_growth: float


def study_spec(outcome: Outcome, epsilon: float, **changes: object) -> DPEffectsSpec:
    """``dp_effects`` with the two modifiers and the four x0 bins (trim 0.1, AIPW ATE)."""
    spec = DPEffectsSpec(epsilon=epsilon, delta=1e-6, outcome_range=OUTCOME_RANGE[outcome], trim=0.1,
                         columns=COLUMNS, bounds=tuple(covariate_bounds()), modifiers=MODIFIERS,
                         subgroups=(("x0", SUBGROUP_EDGES),))
    return replace(spec, **changes)  # type: ignore[arg-type]


def private_report(sites: Sequence[Site], spec: DPEffectsSpec) -> dict[str, Any]:
    """The report of one ``dp_effects`` study with secure aggregation over in-process parties."""
    with tempfile.TemporaryDirectory(dir=fast_directory()) as folder:
        parties = site_parties(sites, folder, spec.epsilon, spec.delta)
        names = [p.name for p in parties]
        attach_identities(parties, simulation_identities("bench", names))
        return dp_effects_results(InProcessGrid(parties), spec, "bench", names)


def run_private(sites: Sequence[Site], spec: DPEffectsSpec) -> PrivateRun:
    """One ``dp_effects`` study (:func:`private_report`): its coefficients, subgroup effects and ATE."""
    report = private_report(sites, spec)
    cate_section = report["effect_modification"]
    coefficients = cate_section.get("coefficients", [])
    subgroups = cate_section.get("subgroups", [])
    return PrivateRun(np.array([c["estimate"] for c in coefficients]), np.array([c["se"] for c in coefficients]),
                      np.array([s["estimate"] for s in subgroups], dtype=float),
                      np.array([s["se"] for s in subgroups], dtype=float),
                      float(report["estimates"]["aipw-ate"]["estimate"]), float(cate_section["noise_growth"]))


def modifier_matrix(X: NDArray[np.float64]) -> NDArray[np.float64]:
    """``(1, z0, z8)`` with the public ranges."""
    return np.column_stack([np.ones(len(X)), np.clip(X[:, 0], -3.5, 3.5) / 3.5, 2.0 * X[:, 8] - 1.0])


def linear_dr_learner(sites: Sequence[Site], seed: int) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """EconML's ``LinearDRLearner`` on the pooled rows (non-private): coefficients on ``(1, z0, z8)`` and SEs.

    Nuisances of the private path's class: logistic propensity and linear outcome models, site
    dummies among the controls ``W``; 2-fold cross-fitting.
    """
    from econml.dr import LinearDRLearner
    from sklearn.linear_model import LinearRegression, LogisticRegression

    X = np.vstack([s.X for s in sites])
    site = np.concatenate([np.full(len(s.T), i) for i, s in enumerate(sites)])
    W = np.column_stack([np.delete(X, [0, 8], axis=1), np.eye(len(sites))[site][:, 1:]])
    Z = modifier_matrix(X)[:, 1:]
    learner = LinearDRLearner(model_propensity=LogisticRegression(max_iter=1000), model_regression=LinearRegression(),
                              cv=2, random_state=seed)
    learner.fit(np.concatenate([s.Y for s in sites]), np.concatenate([s.T for s in sites]), X=Z, W=W)
    coef = np.concatenate([[learner.intercept_(T=1)], learner.coef_(T=1)])
    se = np.concatenate([np.atleast_1d(learner.intercept__inference(T=1).stderr),
                         np.atleast_1d(learner.coef__inference(T=1).stderr)])
    return coef, se
