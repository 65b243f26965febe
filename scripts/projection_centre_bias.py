"""What the projection's clip costs with DP-fitted nuisances, centred or not (docs/dp-cate-projection.md, "Centring").

On ``--datasets`` fresh datasets of the projection benchmark's design (collabcausal/simulations/
cate_benchmark.py), each with ``--draws`` independent noise draws of the statistics release at eps 1
(the study's noise sd; no DP noise on the score sums, the exact Gram matrix in the estimate), fits the
nuisance models as the study does and prints, per coefficient (intercept, z0, z8), the mean and sd over
datasets x draws of:

* ``exact model - truth``: the unclipped projection of the scores under models fitted on the exact
  statistics, against the exact projection (the estimator's own error at this sample size);
* ``noisy model - exact model``: the same under the draw's noisy models, against the exact models';
* ``uncentred clip C``: the release's clipped sums (``projection_clip``, ``modifier_clip``) against the
  same draw's unclipped projection: the clip's bias;
* ``centred at c``: the centred sums (``projection_centre = c``: ``m_q (phi - m^T gamma)`` clipped,
  ``gamma`` the draw's pilot, :func:`~collabcausal.estimators.dp.effects.projection_analysis.effect_projection`),
  ``gamma`` added back, against the same unclipped projection: bias, and in the sd the pilot's noise that
  the clip passes on.

    .venv/bin/python scripts/projection_centre_bias.py --outcome continuous --projection-clip 1 --centres 0.5,0.75,1,1.5
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from collabcausal.analyst.dp_effects_feasibility import statistics_noise_sd
from collabcausal.estimators.dp.effects.analysis import fold_models
from collabcausal.estimators.dp.effects.design import FeatureMap
from collabcausal.estimators.dp.effects.nuisances import NuisanceModel
from collabcausal.estimators.dp.effects.projection import Projection
from collabcausal.estimators.dp.effects.projection_analysis import effect_projection, modifier_gram
from collabcausal.estimators.dp.effects.projection_budget import MODIFIER_CLIP, modifier_clips
from collabcausal.estimators.dp.effects.release import party_statistics
from collabcausal.estimators.dp.effects.scores import components, subject_scores
from collabcausal.estimators.dp.effects.statistics import entry_noise_sd
from collabcausal.simulations.cate_benchmark import MODIFIERS, simulate_cate_sites, study_spec, true_projection

TRIM = 0.1


def _scores(model: NuisanceModel, design: np.ndarray, t: np.ndarray, y: np.ndarray, fm: FeatureMap) -> np.ndarray:
    """Each subject's AIPW score under ``model`` (as the release computes it)."""
    ate = components(["aipw"], ["ate"], fm.outcome_width, TRIM)[:1]
    return subject_scores(ate, t, y, model.propensity(design, TRIM), model.outcome(design, 0, fm),
                          model.outcome(design, 1, fm))[:, 0]


def main(argv: list[str] | None = None) -> int:
    """Print the rows of the module docstring; 0."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--outcome", choices=("binary", "continuous"), default="continuous")
    parser.add_argument("--projection-clip", type=float, default=1.0)
    parser.add_argument("--centres", default="0.5,0.75,1,1.5", help="projection_centre values, comma-separated")
    parser.add_argument("--modifier-clip", type=float, default=MODIFIER_CLIP, help="modifier_clip k")
    parser.add_argument("--datasets", type=int, default=24)
    parser.add_argument("--draws", type=int, default=3, help="noise draws of the statistics per dataset")
    parser.add_argument("--seed", type=int, default=3100, help="data seeds seed .. seed + datasets - 1")
    parser.add_argument("--n", type=int, default=25_000, help="subjects per site")
    args = parser.parse_args(argv)
    spec = study_spec(args.outcome, 1.0, projection_clip=args.projection_clip)
    centres = [float(c) for c in args.centres.split(",")]
    rows: dict[str, list[np.ndarray]] = {}
    for seed in range(args.seed, args.seed + args.datasets):
        sites = simulate_cate_sites(args.n, args.outcome, np.random.default_rng(seed))
        fm = FeatureMap(spec.bounds, spec.outcome_range, len(sites))
        sd = statistics_noise_sd(spec, {f"site{i}": len(s.T) for i, s in enumerate(sites)})
        stats = sum(party_statistics(s.X, s.T, s.Y, fm, i, np.zeros(len(s.T), dtype=np.int8), 1)
                    for i, s in enumerate(sites))
        projection = Projection(tuple(spec.columns.index(m) for m in MODIFIERS), ())
        design = np.vstack([fm.design(s.X, i) for i, s in enumerate(sites)])
        t = np.concatenate([s.T for s in sites]).astype(np.int8)
        y = fm.centred_outcome(np.concatenate([s.Y for s in sites]))
        m = np.column_stack([np.ones(len(t)), design[:, fm.n_sites + np.asarray(projection.modifiers)]])
        exact_gram = m.T @ m
        at_exact = np.linalg.solve(exact_gram, m.T @ _scores(fold_models(stats, fm.dim, fm.n_sites, 0.0)[0], design,
                                                               t, y, fm))
        rows.setdefault("exact model - truth", []).append(at_exact - true_projection(args.outcome))  # type: ignore[arg-type]
        rng = np.random.default_rng(seed)
        for _ in range(args.draws):
            noisy = stats + rng.normal(0.0, entry_noise_sd(sd, fm.dim), stats.shape)
            model = fold_models(noisy, fm.dim, fm.n_sites, sd)[0]
            gram, _ = modifier_gram(noisy, fm, projection, len(t), sd)
            kappa = np.array((1.0, *modifier_clips(gram, len(t), args.modifier_clip)))
            phi = _scores(model, design, t, y, fm)
            reference = np.linalg.solve(exact_gram, m.T @ phi)
            rows.setdefault("noisy model - exact model", []).append(reference - at_exact)
            a = args.projection_clip * fm.outcome_width
            clipped = np.clip(m * phi[:, None], -kappa * a, kappa * a).sum(axis=0)
            rows.setdefault(f"uncentred clip {args.projection_clip:g}", []).append(
                np.linalg.solve(exact_gram, clipped) - reference)
            gamma = effect_projection(noisy, fm, projection, [model], [len(s.T) for s in sites], gram)
            for c in centres:
                b = c * fm.outcome_width
                centred = np.clip(m * (phi - m @ gamma)[:, None], -kappa * b, kappa * b).sum(axis=0)
                moved = gamma + np.linalg.solve(exact_gram, centred) - reference
                rows.setdefault(f"centred at {c:g}", []).append(moved)
    print(f"{args.outcome} outcome, modifier_clip {args.modifier_clip:g}, {args.datasets} datasets (seeds "
          f"{args.seed}..) x {args.draws} statistics noise "
          "draws at eps 1; per coefficient (intercept, z0, z8): mean (Monte Carlo SE) and sd")
    for name, values in rows.items():
        v = np.array(values)
        print(f"  {name:<28} mean " + " / ".join(f"{x:+.4f}" for x in v.mean(axis=0)) + "  (SE "
              + " / ".join(f"{x:.4f}" for x in v.std(axis=0) / np.sqrt(len(v))) + ")  sd "
              + " / ".join(f"{x:.4f}" for x in v.std(axis=0)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
