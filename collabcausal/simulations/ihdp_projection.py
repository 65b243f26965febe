"""IHDP: the private projection of ``dp_effects`` (docs/dp-cate-projection.md) beside the constant and the learners.

Each IHDP replication (any folder that :func:`~collabcausal.simulations.ihdp.load_ihdp` reads) is one
study: its 747 subjects split by position (subject ``k`` to party ``k mod K``, ``K = 1`` by default:
central, as the private learners of :mod:`.ihdp` run) run ``dp_effects`` with declared modifiers (by
default the six continuous covariates x1-x6, declared before looking at any outcome) at each epsilon.
A cell is the within-sample sqrt(PEHE) of ``m(x)^T beta`` against ``mu1 - mu0``, or the study's refusal
(the small-study refusal of docs/dp-effects-benchmark.md says which epsilon would be answered).
Beside it, per replication: the constant true ATE and the constant private ATE of the same release,
the oracle projection (least squares of the true CATE on the same modifiers: the best any projection
on them can do), ``dp_effects`` at epsilon 1e4 (the same estimator with little noise), and
the non-private S, T, X, DR, R learners of :mod:`.ihdp`.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from collabcausal.analyst.dp_effects import dp_effects_results
from collabcausal.analyst.dp_effects_spec import DPEffectsSpec
from collabcausal.attacks.privacy_audit import fast_directory
from collabcausal.errors import CollabCausalError, InputError
from collabcausal.party.secagg import attach_identities
from collabcausal.protocol.inprocess import InProcessGrid
from collabcausal.secagg import simulation_identities
from collabcausal.simulations.dp_effects_benchmark import site_parties
from collabcausal.simulations.ihdp import COVARIATES, IHDPReplication, estimate, feature_bounds
from collabcausal.simulations.multisite import Site

DEFAULT_MODIFIERS = ("x1", "x2", "x3", "x4", "x5", "x6")
NEAR_NON_PRIVATE = 1e4
"""The epsilon of the ``dp_effects`` row showing the estimator's own error (the zCDP calibration's largest)."""
TRIM = 0.1


@dataclass(frozen=True)
class ProjectionCell:
    """One private projection on one replication: sqrt(PEHE), the constant private ATE's, coefficients and SEs
    (NaN with ``refused`` set when the study refused)."""

    sqrt_pehe: float
    constant_sqrt_pehe: float
    coef: NDArray[np.float64]
    se: NDArray[np.float64]
    refused: str = ""


def ihdp_sites(data: IHDPReplication, n_parties: int) -> list[Site]:
    """Subject ``k`` to party ``k mod n_parties`` (outcome means unknown to the parties: NaN)."""
    if n_parties < 1 or n_parties > len(data.T) // 100:
        raise InputError(f"{n_parties} parties for {len(data.T)} subjects", "use 1 to 7 parties on IHDP")
    out = []
    for i in range(n_parties):
        rows = np.arange(i, len(data.T), n_parties)
        unknown = np.full(len(rows), np.nan)
        out.append(Site(data.X[rows], data.T[rows], data.Y[rows], unknown, unknown, unknown))
    return out


def modifier_matrix(data: IHDPReplication, modifiers: Sequence[str], continuous_bound: float) -> NDArray[np.float64]:
    """``(1, z_1, ..., z_p)`` at every subject: each modifier clipped to its declared range and scaled to [-1, 1]."""
    bounds = feature_bounds(continuous_bound, data.X.shape[1])
    columns = [np.ones(len(data.T))]
    for name in modifiers:
        j = COVARIATES.index(name)
        lo, hi = bounds[j]
        columns.append(2.0 * (np.clip(data.X[:, j], lo, hi) - lo) / (hi - lo) - 1.0)
    return np.column_stack(columns)


def oracle_sqrt_pehe(data: IHDPReplication, modifiers: Sequence[str], continuous_bound: float) -> float:
    """sqrt(PEHE) of the least-squares projection of the true CATE on the modifiers (not an estimator)."""
    Z = modifier_matrix(data, modifiers, continuous_bound)
    beta = np.linalg.lstsq(Z, data.tau, rcond=None)[0]
    return float(np.sqrt(np.mean((Z @ beta - data.tau) ** 2)))


def private_projection(data: IHDPReplication, epsilon: float, modifiers: Sequence[str],
                       outcome_bounds: tuple[float, float], *, n_parties: int = 1,
                       continuous_bound: float = 6.0, projection_clip: float | None = None) -> ProjectionCell:
    """One ``dp_effects`` study with ``modifiers`` on the replication (module docstring)."""
    unknown = [m for m in modifiers if m not in COVARIATES]
    if unknown:
        raise InputError(f"IHDP modifiers {unknown} are not covariates", f"use some of {', '.join(COVARIATES)}")
    sites = ihdp_sites(data, n_parties)
    columns = tuple(f"x{j}" for j in range(data.X.shape[1]))  # site_parties names columns by position
    spec = DPEffectsSpec(epsilon=epsilon, delta=1e-6, outcome_range=outcome_bounds, trim=TRIM, columns=columns,
                         bounds=tuple(feature_bounds(continuous_bound, data.X.shape[1])),
                         modifiers=tuple(columns[COVARIATES.index(m)] for m in modifiers),
                         secure_aggregation=n_parties >= 3, projection_clip=projection_clip)
    nan = np.full(len(modifiers) + 1, np.nan)
    try:
        with tempfile.TemporaryDirectory(dir=fast_directory()) as folder:
            parties = site_parties(sites, folder, epsilon, spec.delta)
            names = [p.name for p in parties]
            attach_identities(parties, simulation_identities("ihdp", names))
            report = dp_effects_results(InProcessGrid(parties), spec, "ihdp", names)
    except CollabCausalError as exc:
        return ProjectionCell(np.nan, np.nan, nan, nan, str(exc))
    coefficients = report["effect_modification"]["coefficients"]
    coef = np.array([c["estimate"] for c in coefficients], dtype=float)
    se = np.array([c["se"] for c in coefficients], dtype=float)
    ate = float(report["estimates"]["aipw-ate"]["estimate"])
    fitted = modifier_matrix(data, modifiers, continuous_bound) @ coef
    return ProjectionCell(float(np.sqrt(np.mean((fitted - data.tau) ** 2))),
                          float(np.sqrt(np.mean((ate - data.tau) ** 2))), coef, se)


def non_private_sqrt_pehe(data: IHDPReplication, learner: str, seed: int = 0) -> float:
    """sqrt(PEHE) of one non-private learner of :mod:`.ihdp` (S, T, X, DR, R)."""
    tau_hat = estimate(learner, data, None, seed).tau_hat
    return float(np.sqrt(np.mean((tau_hat - data.tau) ** 2)))
