"""Small private studies (issue 38, item 4): ``dp_effects`` at n = 600, 2,000, 10,000 on the cohort design.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/bench_dp_effects_small.py           # full: 300 data sets per n
    PYTHONPATH=$PWD .venv/bin/python benchmarks/bench_dp_effects_small.py --quick   # 3 per n, sanity only

(Full: about 200 s of an idle core's time; 1240 s on the shared machine at load 10-40.)

Design: collabcausal/simulations/cohort_design.py (examples/cohort's equations: 4 confounders, binary
event, statin; 4 sites of n/4; true ATE a risk difference of about -0.045), eps 1 per party in total,
delta 1e-6, secure aggregation, trim 0.1, AIPW ATE: ``dp_effects``' defaults. Replication r draws its data
with seed ``--seed + r`` and runs one study on it (the DP noise comes from OpenDP and is not seeded:
every run differs). Per n, beside the non-private federated AIPW on the same data:

* bias against the truth and the DP-induced bias ``mean(dp - non-private)``, each with its Monte Carlo SE;
* coverage of the 95% interval of the truth and of the non-private value (with MC SEs);
* the mean reported SE against the spread of the estimates over replications;
* refused: studies ``dp_effects`` refused before any charge (too small for their eps,
  :mod:`collabcausal.analyst.dp_effects_feasibility`); they enter no other column.

Then examples/cohort/cohort.csv itself (600 subjects, 4 parties by position) with ``--cohort-draws`` DP
draws against its non-private AIPW.

``--decompose`` instead prints where the DP bias comes from: the same computation in process
(:mod:`collabcausal.simulations.dp_effects_decomposition`, numpy noise of the study's sds) with one source
switched at a time, each variant's mean minus the non-private AIPW on the same data (with its Monte Carlo SE).
``--replicates`` prints, at n = 2,000 and 10,000 (of ``--design``), the interval's nuisance-noise term (the noise
replicates' mean square) against the variance it estimates, beside the same refits in antithetic pairs
(:mod:`collabcausal.simulations.dp_effects_replicate_check`).

Targets (full mode, exit 1 when missed), for every n whose studies ran (not refused): |DP-induced bias|
at most 0.25 x the mean reported SE plus 2 Monte Carlo SEs, and coverage of the truth and of the non-private
AIPW each in [0.93, 0.97] (a 95% interval neither short nor needlessly wide; at 300 replications one Monte
Carlo SE is 0.013, so an exact interval misses the band by chance about one run in ten); and
n = 600 at eps 1 is refused (before the refusal existed it measured +0.08, 0.26 SE, above the non-private
AIPW with coverage 0.91; the issue's 0.9 SE on cohort.csv came from 16 draws). ``--quick`` checks that
n = 600 is refused and every other study gives finite numbers.

``--no-refusal`` measures what the check prevents, ``--design multisite`` runs the held-out design
(bench_dp_effects.py's 10 confounders at small n), ``--sizes`` and ``--epsilon`` move the grid (no targets
then), ``--cohort-only`` runs only the cohort.csv table.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd
from _run_mode import BenchmarkParser

from collabcausal.analyst import dp_effects_feasibility
from collabcausal.errors import CollabCausalError
from collabcausal.simulations.cohort_design import COHORT_DESIGN, cohort_sites, cohort_true_ate
from collabcausal.simulations.dp_effects_benchmark import (
    Z95,
    Design,
    Estimate,
    federated_aipw,
    quiet_clipping_log,
    run_private,
    study_spec,
)
from collabcausal.simulations.dp_effects_decomposition import NoiseSources, decomposed_estimate
from collabcausal.simulations.dp_effects_replicate_check import CLIP_FRACTIONS, replicate_check
from collabcausal.simulations.multisite import OUTCOME_RANGE, Site, covariate_bounds, simulate_sites, true_effects

SIZES = (600, 2000, 10_000)
EPSILON = 1.0
BIAS_SHARE = 0.25
MIN_COVERAGE = 0.93
MAX_COVERAGE = 0.97
COHORT_CSV = "examples/cohort/cohort.csv"


@dataclass(frozen=True)
class Row:
    """One n's replications: DP estimates and SEs, non-private estimates, refusals."""

    dp: np.ndarray
    se: np.ndarray
    reference: np.ndarray
    refused: int
    reason: str = ""

    def line(self, label: str, truth: float) -> str:
        """A markdown table row (truth: the design's ATE, NaN for a fixed data set)."""
        k = len(self.dp)
        if k == 0:
            return f"| {label} | {self.refused} refused | - | - | - | - | - | - | - |"
        gap = self.dp - self.reference
        bias = self.dp.mean() - truth
        cover_t = np.abs(self.dp - truth) <= Z95 * self.se
        cover_r = np.abs(gap) <= Z95 * self.se
        return (f"| {label} | {k} ({self.refused} refused) | {_pm(bias, self.dp.std(ddof=1) / math.sqrt(k))} | "
                f"{_pm(gap.mean(), gap.std(ddof=1) / math.sqrt(k))} | {_cov(cover_t) if np.isfinite(truth) else '-'} | "
                f"{_cov(cover_r)} | "
                f"{self.se.mean():.4f} | {self.dp.std(ddof=1):.4f} | {gap.std(ddof=1):.4f} |")


def _pm(value: float, mcse: float) -> str:
    return "-" if not np.isfinite(value) else f"{value:+.4f} ({mcse:.4f})"


def _cov(hits: np.ndarray) -> str:
    if not np.isfinite(hits.mean()):
        return "-"
    p = float(hits.mean())
    return f"{p:.3f} ({math.sqrt(p * (1 - p) / len(hits)):.3f})"


DESIGNS = {
    "cohort": (COHORT_DESIGN, lambda n, rng: cohort_sites(n, rng), cohort_true_ate),
    "multisite": (Design(tuple(covariate_bounds()), OUTCOME_RANGE["binary"]),
                  lambda n, rng: simulate_sites(n // 4, "binary", rng), lambda: true_effects("binary")["ate"]),
}
"""Design name -> (public ranges, sites of n subjects, true ATE): the cohort's (tuned on) and bench_dp_effects.py's
10-confounder multi-site design at small n (held out: the refusal's threshold was not chosen on it)."""


def run_rows(sites_of: list[list[Site]], epsilon: float, design: Design = COHORT_DESIGN) -> Row:
    """One ``dp_effects`` study (and the non-private AIPW) on each list of sites."""
    spec = study_spec(design, epsilon, secure_aggregation=True)
    dp, se, ref, refused, reason = [], [], [], 0, ""
    for sites in sites_of:
        try:
            e: Estimate = run_private(sites, spec)
        except CollabCausalError as exc:
            refused, reason = refused + 1, str(exc)
            continue
        dp.append(e.estimate)
        se.append(e.se)
        ref.append(federated_aipw(sites).estimate)
    return Row(np.array(dp, dtype=float), np.array(se, dtype=float), np.array(ref, dtype=float), refused, reason)


def cohort_csv_sites(path: str) -> list[Site]:
    """examples/cohort/cohort.csv as 4 parties by position (row r to party r mod 4); true nuisances unknown."""
    frame = pd.read_csv(path)
    X = frame[["age", "sex", "bmi", "sbp"]].to_numpy(dtype=float)
    T = frame["statin"].to_numpy().astype(np.int8)
    Y = frame["event"].to_numpy(dtype=float)
    group = np.arange(len(T)) % 4
    nan = np.full(len(T), np.nan)
    return [Site(X[group == g], T[group == g], Y[group == g], nan[group == g], nan[group == g], nan[group == g])
            for g in range(4)]


VARIANTS: dict[str, NoiseSources] = {
    "study (all noise, LDA propensity, ridge scale 1)": NoiseSources(),
    "exact statistics, noisy scores": NoiseSources(statistics=False),
    "noisy statistics, exact scores": NoiseSources(scores=False),
    "no noise (the study's ridge)": NoiseSources(statistics=False, scores=False),
    "no noise, ridge floor 1": NoiseSources(statistics=False, scores=False, ridge_scale=0.0),
    "true propensity, all noise": NoiseSources(propensity="true"),
    "true propensity, noisy statistics, exact scores": NoiseSources(scores=False, propensity="true"),
    "ridge scale 0.25, all noise": NoiseSources(ridge_scale=0.25),
    "ridge scale 4, all noise": NoiseSources(ridge_scale=4.0),
}


def decompose(reps: int, seed: int, epsilon: float) -> None:
    """The bias of each :data:`VARIANTS` (and of other trims) against the non-private AIPW, per n."""
    rng = np.random.default_rng(seed)  # the variants' numpy noise (a measuring instrument, not a release)
    print(f"\n### where the bias comes from: mean(variant - non-private AIPW) (MC SE), {reps} data sets per n\n")
    print(f"| variant | {' | '.join(f'n = {n}' for n in SIZES)} |\n|---|{'---|' * len(SIZES)}")
    data = {n: [cohort_sites(n, np.random.default_rng(seed + r)) for r in range(reps)] for n in SIZES}
    reference = {n: np.array([federated_aipw(s).estimate for s in data[n]]) for n in SIZES}
    specs = {label: (study_spec(COHORT_DESIGN, epsilon, secure_aggregation=True), v) for label, v in VARIANTS.items()}
    for trim in (0.05, 0.2):
        specs[f"trim {trim:g}, all noise"] = (study_spec(COHORT_DESIGN, epsilon, trim=trim), NoiseSources())
    for label, (spec, sources) in specs.items():
        cells = [_pm_gap(np.array([decomposed_estimate(s, spec, sources, rng) for s in data[n]]) - reference[n])
                 for n in SIZES]
        print(f"| {label} | {' | '.join(cells)} |", flush=True)


def check_replicates(reps: int, seed: int, epsilon: float, design: str) -> None:
    """Per n: mean over ``reps`` data sets of ``design`` of each :class:`ReplicateCheck` figure."""
    rng = np.random.default_rng(seed)  # numpy noise of the study's sds (a measuring instrument, not a release)
    ranges, draw_sites, _ = DESIGNS[design]
    spec = study_spec(ranges, epsilon, secure_aggregation=True)
    print(f"\n### the nuisance-noise term ({design} design): means over {reps} data sets per n\n")
    print("| n | conditional variance | replicate mean square, clipped (the study's) | unclipped | antithetic pairs, "
          "clipped | unclipped | clipped share | mean move |\n|---|---|---|---|---|---|---|---|")
    redesigns = []
    for n in SIZES[1:]:
        checks = [replicate_check(draw_sites(n, np.random.default_rng(seed + r)), spec, rng) for r in range(reps)]
        v = np.mean([k.conditional_var for k in checks])
        terms = np.mean([[k.replicate_ms, k.replicate_ms_unclipped, k.antithetic, k.antithetic_unclipped]
                         for k in checks], axis=0)
        print(f"| {n} | {v:.2e} | " + " | ".join(f"{t:.2e} ({t / v:.2f}x)" for t in terms)
              + f" | {np.mean([k.clip_share for k in checks]):.3f} | {np.mean([k.mean_move for k in checks]):+.4f} |",
              flush=True)
        ratios = np.array([[*k.noisy_terms, k.first_order, k.first_order_noisy] for k in checks]) / v
        redesigns.append(f"| {n} | " + " | ".join(f"{m:.2f}x (sd {s:.2f})" for m, s in
                                                 zip(ratios.mean(axis=0), ratios.std(axis=0), strict=True)) + " |")
    print("\nThe same term with the replicate sums' own DP noise, over the conditional variance (mean, sd over data "
          "sets), at clips of 1/40 to 1/5 of the score's range; and the first-order term from exact gradients, then "
          "from gradient sums released at the replicates' budget share:\n")
    print("| n | " + " | ".join(f"clip 1/{1 / f:g}, noisy" for f in CLIP_FRACTIONS)
          + " | first order, exact | first order, noisy gradient sums |\n"
          + "|---" * (len(CLIP_FRACTIONS) + 3) + "|")
    print("\n".join(redesigns))


def _pm_gap(gap: np.ndarray) -> str:
    return _pm(float(gap.mean()), float(gap.std(ddof=1) / math.sqrt(len(gap))))


HEADER = ("| n | studies | bias vs truth (MC SE) | DP bias vs non-private (MC SE) | coverage of truth | "
          "coverage of non-private | mean SE | spread | spread of dp - non-private |\n" + "|---" * 9 + "|")


def main(argv: list[str] | None = None) -> int:
    """Print the tables; 1 when a target (full) or a sanity check (quick) is missed."""
    parser = BenchmarkParser(__doc__)
    parser.add_size("--reps", type=int, full=300, quick=3, help="replications per n")
    parser.add_size("--cohort-draws", type=int, full=100, quick=1, help="DP draws on cohort.csv")
    parser.add_size("--decompose-sets", type=int, full=200, quick=3, help="data sets per n of --decompose")
    parser.add_size("--replicate-sets", type=int, full=30, quick=2, help="data sets per n of --replicates")
    parser.add_argument("--seed", type=int, default=0, help="replication r draws its data with seed + r")
    parser.add_argument("--epsilon", type=float, default=EPSILON, help="each party's total (default 1)")
    parser.add_argument("--design", choices=sorted(DESIGNS), default="cohort", help="cohort (default) or the "
                        "held-out multisite design (then no cohort.csv table and no targets)")
    parser.add_argument("--sizes", help=f"comma-separated n (default {','.join(map(str, SIZES))})")
    parser.add_argument("--no-refusal", action="store_true", help="run the studies the size check would refuse "
                        "(measures what the refusal prevents; MAX_RIDGE_SHARE set to infinity in this process)")
    parser.add_argument("--cohort-only", action="store_true", help="only the cohort.csv table")
    parser.add_argument("--decompose", action="store_true", help="only the bias decomposition (--decompose-sets "
                        "data sets per n)")
    parser.add_argument("--replicates", action="store_true", help="only the nuisance-noise term's check "
                        "(--replicate-sets data sets per n)")
    args = parser.parse_args(argv)
    quiet_clipping_log()  # the designs' public ranges clip a few simulated values on purpose
    if args.no_refusal:
        dp_effects_feasibility.MAX_RIDGE_SHARE = math.inf
    if args.decompose:
        decompose(args.decompose_sets, args.seed, args.epsilon)
        return 0
    if args.replicates:
        check_replicates(args.replicate_sets, args.seed, args.epsilon, args.design)
        return 0
    reps, draws = args.reps, args.cohort_draws
    design, draw_sites, true_ate = DESIGNS[args.design]
    sizes = () if args.cohort_only else tuple(int(n) for n in args.sizes.split(",")) if args.sizes else SIZES
    start = time.perf_counter()
    rows = design_table(args, design, draw_sites, true_ate(), sizes, reps) if sizes else {}
    fixed_rows = []
    if args.design == "cohort":
        fixed = cohort_csv_sites(COHORT_CSV)
        fixed_rows.append(run_rows([fixed] * draws, args.epsilon))
        print(f"\n### {COHORT_CSV} (600 subjects, 4 parties by position), eps {args.epsilon:g}, {draws} DP draws; "
              f"non-private AIPW {federated_aipw(fixed).estimate:.4f}\n")
        print(HEADER)
        print(fixed_rows[0].line("600 (cohort.csv)", math.nan))
    for row in (*rows.values(), *fixed_rows):
        if row.refused:
            print(f"\nrefused: {row.reason}")
            break
    print(f"\n{time.perf_counter() - start:.0f} s")
    default = args.design == "cohort" and sizes == SIZES and args.epsilon == EPSILON and not args.no_refusal
    if args.quick and default:
        missed = sanity(rows)
    elif default:
        missed = targets(rows)
    else:
        print(f"no targets: they are stated for the cohort design at n = {', '.join(map(str, SIZES))}, "
              f"eps {EPSILON:g}, with the size check")
        missed = []
    for line in missed:
        print(f"TARGET MISSED: {line}")
    return 1 if missed else 0


def design_table(args: argparse.Namespace, design: Design, draw_sites: Callable[[int, np.random.Generator], list[Site]],
                 truth: float, sizes: tuple[int, ...], reps: int) -> dict[int, Row]:
    """One study per replication at each n of ``sizes``, printed as a table with each n's ridge share."""
    print(f"### {args.design} design, eps {args.epsilon:g} per party, 4 sites, secure aggregation, {reps} "
          f"replications per n (seeds {args.seed}..{args.seed + reps - 1}), true ATE {truth:.4f}"
          f"{', size check off' if args.no_refusal else ''}\n")
    print(HEADER.replace("| n |", "| n (ridge share) |"))
    rows = {}
    for n in sizes:
        sites_of = [draw_sites(n, np.random.default_rng(args.seed + r)) for r in range(reps)]
        spec = study_spec(design, args.epsilon, secure_aggregation=True)
        share = dp_effects_feasibility.ridge_share(spec, {str(i): len(s.T) for i, s in enumerate(sites_of[0])})
        rows[n] = run_rows(sites_of, args.epsilon, design)
        print(rows[n].line(f"{n} ({share:.2f})", truth), flush=True)
    return rows


def sanity(rows: dict[int, Row]) -> list[str]:
    """Quick mode: n = 600 at eps 1 refused, every other study a finite estimate and SE."""
    bad = [f"n = {n}: non-finite estimates" for n, r in rows.items() if not np.isfinite([*r.dp, *r.se]).all()]
    return _not_refused(rows) + bad


def _not_refused(rows: dict[int, Row]) -> list[str]:
    first = rows[SIZES[0]]
    return [f"n = {SIZES[0]} at eps {EPSILON:g} was not refused every time"] if len(first.dp) else []


def targets(rows: dict[int, Row]) -> list[str]:
    """Full mode's targets (module docstring), one line per miss."""
    missed = _not_refused(rows)
    for n, r in rows.items():
        if len(r.dp) < 2:
            continue
        gap = r.dp - r.reference
        mcse = gap.std(ddof=1) / math.sqrt(len(gap))
        if abs(gap.mean()) > BIAS_SHARE * r.se.mean() + 2 * mcse:
            missed.append(f"n = {n}: DP bias {gap.mean():+.4f} beyond {BIAS_SHARE} x mean SE {r.se.mean():.4f} "
                          f"+ 2 MC SE {mcse:.4f}")
        for target, value in (("the truth", cohort_true_ate()), ("the non-private AIPW", r.reference)):
            coverage = float(np.mean(np.abs(r.dp - value) <= Z95 * r.se))
            if not MIN_COVERAGE <= coverage <= MAX_COVERAGE:
                missed.append(f"n = {n}: coverage of {target} {coverage:.3f} outside [{MIN_COVERAGE}, {MAX_COVERAGE}]")
    return missed


if __name__ == "__main__":
    sys.exit(main())
