"""Why dp_effects' nuisance replicates overstate the clipped projection's nuisance noise (docs/dp-cate-projection.md).

On one dataset of the projection benchmark's design (collabcausal/simulations/cate_benchmark.py), without
DP noise on the score sums, prints:

* the variance of the coefficients over ``--draws`` fits of the nuisance models on independently
  re-noised statistics (exact Gram matrix): the nuisance noise the replicate term should measure;
* for ``--replicate-draws`` of those draws, the replicate term the interval adds, without the DP
  noise of the replicate sums: the mean square of the coefficients' moves under the study's 8 refits
  (:func:`~collabcausal.estimators.dp.effects.analysis.noise_replicates`) when each subject's
  difference is clipped at ``c`` (1/40 to all of the sum's range; the release's ``c`` is
  :data:`~collabcausal.estimators.dp.effects.scores.REPLICATE_CLIP` of it), and the quantiles
  of those differences.

    .venv/bin/python scripts/projection_replicate_clip.py --outcome continuous --projection-clip 1 --seed 7
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
from numpy.typing import NDArray

from collabcausal.analyst.dp_effects_feasibility import statistics_noise_sd
from collabcausal.estimators.dp.effects.analysis import fold_models, noise_replicates
from collabcausal.estimators.dp.effects.design import FeatureMap
from collabcausal.estimators.dp.effects.nuisances import NuisanceModel
from collabcausal.estimators.dp.effects.projection import Projection, projection_layout, subject_projection_values
from collabcausal.estimators.dp.effects.projection_analysis import modifier_gram
from collabcausal.estimators.dp.effects.release import party_statistics
from collabcausal.estimators.dp.effects.scores import REPLICATE_CLIP, components, subject_scores
from collabcausal.simulations.cate_benchmark import MODIFIERS, simulate_cate_sites, study_spec

TRIM = 0.1
CLIP_FRACTIONS = (1 / 40, 1 / 20, 1 / 10, 1 / 4, 1.0)
"""The per-subject clips measured, as fractions of ``blp_0``'s range (1/40 was the release's until 29 Nov 2026)."""


def main(argv: list[str] | None = None) -> int:
    """Print the two comparisons (module docstring); 0."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--outcome", choices=("binary", "continuous"), default="continuous")
    parser.add_argument("--projection-clip", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=7, help="data seed (as the benchmark's replication seed)")
    parser.add_argument("--n", type=int, default=25_000, help="subjects per site")
    parser.add_argument("--draws", type=int, default=12, help="independent noise draws of the statistics")
    parser.add_argument("--replicate-draws", type=int, default=4, help="of them, how many get 8 replicate refits")
    args = parser.parse_args(argv)
    spec = study_spec(args.outcome, 1.0, projection_clip=args.projection_clip)
    sites = simulate_cate_sites(args.n, args.outcome, np.random.default_rng(args.seed))
    fm = FeatureMap(spec.bounds, spec.outcome_range, len(sites))
    sd = statistics_noise_sd(spec, {f"site{i}": len(s.T) for i, s in enumerate(sites)})
    folds = [np.zeros(len(s.T), dtype=np.int8) for s in sites]
    stats = sum(party_statistics(s.X, s.T, s.Y, fm, i, f, 1) for i, (s, f) in enumerate(zip(sites, folds, strict=True)))
    projection = Projection(tuple(spec.columns.index(m) for m in MODIFIERS), (), args.projection_clip)
    layout = projection_layout(projection, fm.outcome_width, TRIM, 0)
    parts = [c for c in layout.parts if c.name in ("blp_0", "blp_1", "blp_2")]
    design = np.vstack([fm.design(s.X, i) for i, s in enumerate(sites)])
    t = np.concatenate([s.T for s in sites]).astype(np.int8)
    y = fm.centred_outcome(np.concatenate([s.Y for s in sites]))
    Z = design[:, fm.n_sites + np.asarray(projection.modifiers)]
    ate = components(["aipw"], ["ate"], fm.outcome_width, TRIM)[:1]

    def values(model: NuisanceModel) -> NDArray[np.float64]:
        phi = subject_scores(ate, t, y, model.propensity(design, TRIM), model.outcome(design, 0, fm),
                             model.outcome(design, 1, fm))[:, 0]
        return subject_projection_values(parts, phi, Z, np.zeros((len(t), 0), dtype=np.int64))

    gram, _ = modifier_gram(stats, fm, projection, len(t), sd)
    exact = np.linalg.solve(gram, values(fold_models(stats, fm.dim, fm.n_sites, 0.0)[0]).sum(axis=0))
    rng = np.random.default_rng(args.seed)
    draws = [stats + rng.normal(0.0, sd, stats.shape) for _ in range(args.draws)]
    moves = [np.linalg.solve(gram, values(fold_models(d, fm.dim, fm.n_sites, sd)[0]).sum(axis=0)) - exact
             for d in draws]
    print(f"{args.outcome} outcome, projection_clip {args.projection_clip:g}, data seed {args.seed}, statistics noise "
          f"sd {sd:.4g}")
    print(f"nuisance variance of (intercept, z0, z8) over {args.draws} noise draws (exact Gram): "
          + " / ".join(f"{v:.2g}" for v in np.var(moves, axis=0)))
    width = parts[0].width
    clips = [width * fraction for fraction in CLIP_FRACTIONS]
    terms, quantiles = np.zeros((len(clips), 3)), []
    for d in draws[:args.replicate_draws]:
        at_model = values(fold_models(d, fm.dim, fm.n_sites, sd)[0])
        differences = [values(r.models[0]) - at_model for r in noise_replicates(d, fm.dim, fm.n_sites, sd, 8, rng)]
        quantiles.append(np.quantile(np.abs(np.concatenate([x[:, 0] for x in differences])), [0.5, 0.9, 0.99]))
        for k, c in enumerate(clips):
            steps = [np.linalg.solve(gram, np.clip(x, -c, c).sum(axis=0)) for x in differences]
            terms[k] += np.mean(np.square(steps), axis=0) / args.replicate_draws
    print(f"the replicate term without DP noise (mean square of the 8 refits' moves), mean over "
          f"{args.replicate_draws} draws, each subject's difference clipped at c (the release: c = "
          f"{REPLICATE_CLIP * width:g}, {REPLICATE_CLIP:g} of blp_0's range {width:g}):")
    for c, term in zip(clips, terms, strict=True):
        print(f"  c = {c:6.3g}: " + " / ".join(f"{v:.2g}" for v in term))
    q = np.mean(quantiles, axis=0)
    print(f"|difference| of blp_0 per subject: median {q[0]:.3g}, 90% {q[1]:.3g}, 99% {q[2]:.3g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
