"""The parts of each projection interval's variance in one study's report (docs/dp-cate-projection.md).

Runs one ``dp_effects`` study of the projection benchmark's design (collabcausal/simulations/cate_benchmark.py,
eps 1, secure aggregation over the 4 sites, data seed ``--seed``; the DP noise is OpenDP's, unseeded) and
prints, per coefficient and subgroup effect, report.json's estimate, SE and variance parts: sampling (the sandwich),
DP noise of the point sums, DP noise of the Gram matrix (coefficients only), the meat's noise and the
nuisance-replicate term. With ``--seeds FIRST-LAST`` one study per data seed, and for each interval its parts' means
beside its error variance about the truth, how often the replicate term was floored at 0, the spread of its SE over
the studies (sd over mean) and its coverage. ``--setting NAME=VALUE`` sets any other ``[dp_effects]`` key of the
study (a field of :class:`~collabcausal.analyst.dp_effects_spec.DPEffectsSpec`; ``none`` for None).

With ``--measured`` each data set is also run twice more: with the study's statistics noise but (nearly) noiseless
scores, and with neither noise (eps 1e3 for the scores, the statistics' rho kept or raised alike). Over the seeds,
the noiseless run's error variance is the sampling part's truth, and the variance of the first run minus the second
is the truth of what the statistics' noise does (through the nuisance models, the pilot and the Gram matrix: the
reported Gram-noise and nuisance-replicate parts together); the mean of that difference is its drift.

    .venv/bin/python scripts/projection_variance_parts.py --outcome continuous --projection-clip 1 --seed 1007
    .venv/bin/python scripts/projection_variance_parts.py --outcome continuous --projection-clip 1 --seed 1007 \\
        --projection-centre 1
    .venv/bin/python scripts/projection_variance_parts.py --outcome binary --projection-clip 5 --seeds 1000-1059
    .venv/bin/python scripts/projection_variance_parts.py --outcome continuous --projection-clip 1 \\
        --projection-centre 1 --setting residual_clip=0.3333333333333333 --setting cross_weight=2 \\
        --setting replicate_step=2 --seeds 1000-1199
    .venv/bin/python scripts/projection_variance_parts.py --outcome binary --projection-clip 5 \\
        --setting clip_compensation=0.1 --setting replicate_step=3 --seeds 1000-1299 --measured
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace

import numpy as np

from collabcausal.analyst.dp_effects_spec import DPEffectsSpec
from collabcausal.estimators.dp.zcdp import zcdp_rho
from collabcausal.simulations.cate_benchmark import (
    private_report,
    simulate_cate_sites,
    study_spec,
    true_projection,
    true_subgroup_effects,
)

PARTS = ("sampling_var", "noise_var", "gram_noise_var", "variance_uncertainty", "nuisance_var")
LABELS = ("sampling", "DP noise", "Gram noise", "meat's noise", "nuisance replicates")
NOISELESS_EPSILON = 1e3
"""The total eps of :func:`noise_free`'s studies: the noise sd about 1/200 of eps 1's (delta 1e-6)."""


def seed_range(text: str) -> range:
    """``A-B`` (inclusive) as a range of data seeds."""
    first, _, last = text.partition("-")
    try:
        return range(int(first), int(last or first) + 1)
    except ValueError:
        raise SystemExit(f"--seeds {text!r}: expected FIRST-LAST, e.g. 1000-1059") from None


def setting(text: str) -> tuple[str, object]:
    """``NAME=VALUE`` as a ``[dp_effects]`` key and its value: an int, a float, ``none`` (None) or the text."""
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise SystemExit(f"--setting {text!r}: expected NAME=VALUE, e.g. replicate_step=2")
    if value.lower() == "none":
        return name, None
    for kind in (int, float):
        try:
            return name, kind(value)
        except ValueError:
            pass
    return name, value


def noise_free(spec: DPEffectsSpec) -> tuple[DPEffectsSpec, DPEffectsSpec]:
    """``spec`` with the scores' noise removed and its statistics' kept, and with both removed: eps
    :data:`NOISELESS_EPSILON` in total, the statistics' share chosen so their rho is the study's (first) or the share
    kept (second)."""
    rho = zcdp_rho(spec.epsilon, spec.delta) * spec.nuisance_share
    share = rho / zcdp_rho(NOISELESS_EPSILON, spec.delta)
    return (replace(spec, epsilon=NOISELESS_EPSILON, nuisance_share=share),
            replace(spec, epsilon=NOISELESS_EPSILON))


def cells(report: dict) -> list[dict]:
    """The report's intervals in order: coefficients, then subgroup effects (named by their bins)."""
    section = report["effect_modification"]
    return section.get("coefficients", []) + [s | {"name": s["subgroup"]} for s in section.get("subgroups", [])]


def main(argv: list[str] | None = None) -> int:
    """Print the parts (module docstring); 0."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--outcome", choices=("binary", "continuous"), default="continuous")
    parser.add_argument("--projection-clip", type=float, default=None)
    parser.add_argument("--projection-centre", type=float, default=None)
    parser.add_argument("--setting", type=setting, action="append", default=[], metavar="NAME=VALUE",
                        help="any other [dp_effects] key of the study, e.g. replicate_step=2 (repeatable)")
    parser.add_argument("--seed", type=int, default=1007, help="data seed")
    parser.add_argument("--seeds", type=seed_range, default=None,
                        help="FIRST-LAST: one study per data seed; print each part's mean, the error variance about "
                             "the truth, how often the replicate term was floored at 0, the SE's spread and the "
                             "intervals' coverage")
    parser.add_argument("--measured", action="store_true",
                        help="with --seeds: also run each data set with the scores' noise removed and with all noise "
                             "removed, and print the sampling part's and the statistics noise's measured truths")
    parser.add_argument("--n", type=int, default=25_000, help="subjects per site")
    args = parser.parse_args(argv)
    if args.measured and args.seeds is None:
        parser.error("--measured needs --seeds FIRST-LAST: it measures variances over data sets")
    settings = dict(args.setting)
    spec = study_spec(args.outcome, 1.0, projection_clip=args.projection_clip,  # type: ignore[arg-type]
                      projection_centre=args.projection_centre, **settings)
    print(f"{args.outcome} outcome, projection_clip {args.projection_clip}, projection_centre {args.projection_centre}"
          + "".join(f", {k} {v}" for k, v in settings.items()))
    seeds = args.seeds if args.seeds is not None else range(args.seed, args.seed + 1)
    truth = np.concatenate([true_projection(args.outcome), true_subgroup_effects(args.outcome)])
    parts, estimates, ses, covered, names = [], [], [], [], []
    statistics_only, noiseless = [], []
    with_statistics_noise, without_noise = noise_free(spec)
    for seed in seeds:
        sites = simulate_cate_sites(args.n, args.outcome, np.random.default_rng(seed))
        rows = cells(private_report(sites, spec))
        names = [r["name"] for r in rows]
        parts.append([[r.get(k) or 0.0 for k in PARTS] for r in rows])
        estimates.append([r["estimate"] for r in rows])
        ses.append([r["se"] for r in rows])
        covered.append([r["ci_low"] <= t <= r["ci_high"] for r, t in zip(rows, truth, strict=True)])
        if args.measured:
            statistics_only.append([r["estimate"] for r in cells(private_report(sites, with_statistics_noise))])
            noiseless.append([r["estimate"] for r in cells(private_report(sites, without_noise))])
        if args.seeds is None:
            for r in rows:
                print(f"  {r['name']:>10}: estimate {r['estimate']:.4f}, se {r['se']:.4f}; "
                      + ", ".join(f"{label} {r.get(k) or 0.0:.2e}" for label, k in zip(LABELS, PARTS, strict=True)))
    if args.seeds is not None:
        table, error, se = np.array(parts), np.array(estimates) - truth, np.array(ses)
        coverage = np.mean(covered, axis=0)
        if args.measured:
            moved, sampling_error = np.subtract(statistics_only, noiseless), np.array(noiseless) - truth
        statistics_parts = [PARTS.index("gram_noise_var"), PARTS.index("nuisance_var")]
        print(f"means over data seeds {seeds.start}-{seeds.stop - 1} ({len(seeds)} studies)")
        for j, name in enumerate(names):
            mean = table[:, j, :].mean(axis=0)
            print(f"  {name:>10}: " + ", ".join(f"{label} {v:.2e}" for label, v in zip(LABELS, mean, strict=True))
                  + f"; total {mean.sum():.2e}; error variance about the truth {np.mean(error[:, j] ** 2):.2e} "
                  f"(bias^2 {np.mean(error[:, j]) ** 2:.2e}); replicate term floored at 0 in "
                  f"{np.mean(table[:, j, -1] == 0.0):.2f}; SE spread {se[:, j].std() / se[:, j].mean():.2f}; "
                  f"interval's coverage {coverage[j]:.3f}")
            if args.measured:
                print(f"  {'':>10}  measured: sampling {np.var(sampling_error[:, j]):.2e}; the statistics' noise "
                      f"{np.var(moved[:, j]):.2e} (reported Gram noise + nuisance replicates "
                      f"{mean[statistics_parts].sum():.2e}), its drift {moved[:, j].mean():+.5f} "
                      f"(SE {moved[:, j].std() / np.sqrt(len(moved)):.5f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
