"""The nuisance-noise term of the projection and the ATE for weights of the statistics' cross sums (docs/dp-effects.md).

A party releases its outcome cross sums ``b_t`` times ``w`` (the study's ``cross_weight``, default 1), so the
release's sensitivity is ``statistics_sensitivity(fm, w)`` and ``b_t``'s noise sd, once divided by ``w``,
``sigma(w) / w``. For one dataset of the projection benchmark's design (collabcausal/simulations/cate_benchmark.py,
eps 1, secure aggregation over 4 sites), draws that noise ``--draws`` times at each ``w``: Gram entries with sd
``sigma(w)``, the cross sums with ``sigma(w) / w``, where ``sigma(w)`` is the study's noise sd scaled by the
sensitivity's growth.
Each draw's nuisance models score every subject; the projection on ``(1, z0, z8)`` and the ATE are computed from the
exact (noise-free, unclipped) AIPW sums and compared with the same sums under the true propensity and outcome means.
Prints, per ``w``, the models' RMSE against the true means and the rms shift of each coefficient and of the ATE.
numpy noise, seeded (``--noise-seed``).

    .venv/bin/python scripts/statistics_cross_weight.py --seed 1011 --draws 40 --weights 1,1.5,2,2.5
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
from numpy.typing import NDArray

from collabcausal.estimators.dp.effects.design import FeatureMap
from collabcausal.estimators.dp.effects.nuisances import fit_nuisances
from collabcausal.estimators.dp.effects.statistics import (
    ArmStatistics,
    entry_noise_sd,
    statistics_sensitivity,
)
from collabcausal.simulations.cate_benchmark import modifier_matrix, simulate_cate_sites, study_spec
from collabcausal.simulations.dp_effects_decomposition import pooled_study


def weighted_noise_sd(sigma: float, feature_map: FeatureMap, w: float) -> NDArray[np.float64]:
    """Each entry's noise sd, weights divided out, at weight ``w``, for the unweighted release's sd ``sigma``."""
    grown = sigma * statistics_sensitivity(feature_map, w) / statistics_sensitivity(feature_map)
    return entry_noise_sd(grown, feature_map.dim, w)


def projection_and_ate(M: NDArray[np.float64], T: NDArray[np.int8], y: NDArray[np.float64], mu0: NDArray[np.float64],
                       mu1: NDArray[np.float64], e: NDArray[np.float64], trim: float) -> NDArray[np.float64]:
    """The least-squares projection of the AIPW scores on ``M`` and their mean (the ATE)."""
    e = np.clip(e, trim, 1.0 - trim)
    phi = mu1 - mu0 + T * (y - mu1) / e - (1 - T) * (y - mu0) / (1 - e)
    return np.concatenate([np.linalg.solve(M.T @ M, M.T @ phi), [phi.mean()]])


def main(argv: list[str] | None = None) -> int:
    """Print the table (module docstring); 0."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=1011, help="data seed")
    parser.add_argument("--draws", type=int, default=40)
    parser.add_argument("--weights", default="1,1.5,2,2.5")
    parser.add_argument("--outcome", choices=("binary", "continuous"), default="continuous")
    parser.add_argument("--n", type=int, default=25_000, help="subjects per site")
    parser.add_argument("--noise-seed", type=int, default=1)
    args = parser.parse_args(argv)
    sites = simulate_cate_sites(args.n, args.outcome, np.random.default_rng(args.seed))
    spec = study_spec(args.outcome, 1.0)
    study = pooled_study(sites, spec)  # exact statistics and the unweighted release's noise sd
    fm, D = study.feature_map, np.vstack(study.designs)
    X = np.vstack([s.X for s in sites])
    T = np.concatenate([s.T for s in sites])
    y = np.clip(np.concatenate([s.Y for s in sites]), *fm.outcome_range)
    mu0, mu1 = (np.concatenate([getattr(s, k) for s in sites]) for k in ("mean_control", "mean_treated"))
    M = modifier_matrix(X)
    truth = projection_and_ate(M, T, y, mu0, mu1, np.concatenate([s.propensity for s in sites]), spec.trim)
    rng = np.random.default_rng(args.noise_seed)
    print(f"{args.outcome} outcome, data seed {args.seed}, {args.n} per site, {args.draws} draws; at the true "
          f"nuisances: intercept / z0 / z8 / ATE {np.round(truth, 4).tolist()}")
    print("| w | RMSE of mu_0 / mu_1 / e | rms shift intercept / z0 / z8 / ATE |\n|---|---|---|")
    for w in (float(v) for v in args.weights.split(",")):
        sd = weighted_noise_sd(study.statistics_sd, fm, w)
        rows = []
        for _ in range(args.draws):
            noisy = study.statistics + rng.normal(0.0, sd)
            model = fit_nuisances(ArmStatistics.unpack(noisy, fm.dim), fm.n_sites, float(sd[0]))
            m0, m1 = (model.outcome(D, arm, fm) + fm.outcome_mid for arm in (0, 1))
            e = model.propensity(D, spec.trim)
            errors = [np.sqrt(np.mean((m - true) ** 2)) for m, true in ((m0, mu0), (m1, mu1))]
            errors.append(np.sqrt(np.mean((e - np.concatenate([s.propensity for s in sites])) ** 2)))
            rows.append([*errors, *(projection_and_ate(M, T, y, m0, m1, e, spec.trim) - truth)])
        table = np.array(rows)
        rmse = " / ".join(f"{v:.3f}" for v in table[:, :3].mean(axis=0))
        shift = " / ".join(f"{v:.4f}" for v in np.sqrt((table[:, 3:] ** 2).mean(axis=0)))
        print(f"| {w:g} | {rmse} | {shift} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
