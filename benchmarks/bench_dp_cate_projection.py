"""Private effect modification (``dp_effects`` with modifiers and subgroups) beside the non-private linear DR-learner.

    .venv/bin/python benchmarks/bench_dp_cate_projection.py --reps 200     # the issue's targets (long)
    .venv/bin/python benchmarks/bench_dp_cate_projection.py --quick        # 2 replications, small n: sanity
    .venv/bin/python benchmarks/bench_dp_cate_projection.py --reps 30 --peers 30   # with the private CATE peers
    .venv/bin/python benchmarks/bench_dp_cate_projection.py --log runs.jsonl ...   # each replication as it ends
    .venv/bin/python benchmarks/bench_dp_cate_projection.py --from-log runs.jsonl more.jsonl  # summarize, pooled

Design (collabcausal/simulations/cate_benchmark.py): 4 sites x 25,000, 10 confounders, a CATE linear
in x0 (Gaussian) and x8 (binary), binary then continuous outcome; modifiers (x0, x8), subgroups:
four bins of x0. Each replication ``r`` draws its data with seed ``--seed + r`` (the DP noise comes
from OpenDP, not seedable) and runs, side by side: ``dp_effects`` at ``--epsilon`` per party in total
(secure aggregation), EconML's ``LinearDRLearner`` on the pooled rows (non-private; logistic
propensity, linear outcome models, site dummies as controls), and the constant private ATE as a CATE.
Printed per outcome: each coefficient's RMSE (private, DR-learner) against the exact projection,
coverage of the 95% intervals with Monte Carlo SE, the subgroup effects' RMSE and coverage, and how
often the private projection's PEHE beats the constant ATE's. ``--peers K`` adds, on the first K
replications, the private CATE peers at the same epsilon (collabcausal/simulations/cate_peers.py: paper
000's DP-EBM DR-learner and paper 004's DP-CATE run centrally, and the ``cate`` kind): each one's PEHE,
the constant's and the projection's at its evaluation rows, and the RMSE of its implied projection.

Targets (full mode, exit 1 when one is missed): per outcome, at eps 1, the RMSE over the three
coefficients (root of their mean squared error) <= 1.5x the DR-learner's; each coefficient's and each
subgroup effect's coverage in [0.93, 0.97] (at >= 200 replications: fewer prints the figures and fails the count);
projection beats the constant in PEHE on >= 95% of replications. ``--quick`` checks that every
number is finite.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Mapping
from pathlib import Path

import numpy as np
from _run_mode import BenchmarkParser

from collabcausal.estimators.dp.effects.projection_budget import GRAM_WEIGHT, MODIFIER_CLIP
from collabcausal.estimators.dp.effects.scores import DEFAULT_REPLICATES
from collabcausal.simulations.cate_benchmark import (
    cate,
    clipped_outcome_projection,
    linear_dr_learner,
    modifier_matrix,
    run_private,
    simulate_cate_sites,
    study_spec,
    true_projection,
    true_subgroup_effects,
)
from collabcausal.simulations.cate_peers import run_peers
from collabcausal.simulations.dp_effects_benchmark import quiet_clipping_log

Z95 = 1.959963984540054
# the dp_effects settings the command line sets: DPEffectsSpec fields, each the dest of its option
SETTINGS = ("projection_clip", "nuisance_share", "projection_allocation", "modifier_clip", "gram_weight",
            "projection_centre", "residual_clip", "clip_compensation", "nuisance_replicates", "replicate_step",
            "cross_weight")


def _coverage(estimates: np.ndarray, ses: np.ndarray, truth: np.ndarray) -> np.ndarray:
    return (np.abs(estimates - truth) <= Z95 * ses).mean(axis=0)


def _pehe(estimate: np.ndarray | float, tau: np.ndarray) -> float:
    return float(np.sqrt(np.mean((estimate - tau) ** 2)))


def replicate(outcome: str, n: int, epsilon: float, seed: int, settings: Mapping[str, object],
              peers: bool = False) -> dict[str, object]:
    """One replication of one outcome (data seed ``seed``) under the ``dp_effects`` ``settings`` (fields of
    :class:`~collabcausal.analyst.dp_effects_spec.DPEffectsSpec` by name, :data:`SETTINGS`): every method's figures,
    JSON-ready, the settings among them.

    With ``peers``, each private CATE peer's PEHE at its evaluation rows (and the constant private
    ATE's and the private projection's at the same rows) and its implied projection on ``(1, z0, z8)``.
    """
    sites = simulate_cate_sites(n, outcome, np.random.default_rng(seed))  # type: ignore[arg-type]
    spec = study_spec(outcome, epsilon, **settings)  # type: ignore[arg-type]
    run = run_private(sites, spec)
    coef, se = linear_dr_learner(sites, seed)
    X = np.vstack([s.X for s in sites])
    tau = cate(X, outcome)  # type: ignore[arg-type]
    Z = modifier_matrix(X)
    row: dict[str, object] = {
        "outcome": outcome, "seed": seed, "n": n, "epsilon": epsilon, **settings,
        "private": run.coef.tolist(), "private_se": run.coef_se.tolist(), "learner": coef.tolist(),
        "learner_se": se.tolist(), "subgroup": run.subgroup.tolist(), "subgroup_se": run.subgroup_se.tolist(),
        "pehe_projection": _pehe(Z @ run.coef, tau), "pehe_constant": _pehe(run.ate, tau),
        "pehe_learner": _pehe(Z @ coef, tau), "noise_growth": run.noise_growth,
    }
    if peers:
        row["peers"] = {
            p.name: {"pehe": _pehe(p.tau_hat, tau[p.rows]), "pehe_constant": _pehe(run.ate, tau[p.rows]),
                     "pehe_projection": _pehe(Z[p.rows] @ run.coef, tau[p.rows]),
                     "implied": np.linalg.lstsq(Z[p.rows], p.tau_hat, rcond=None)[0].tolist(), "rows": len(p.rows)}
            for p in run_peers(sites, outcome, epsilon, seed)}  # type: ignore[arg-type]
    return row


def _ratio(private_errors: np.ndarray, learner_errors: np.ndarray) -> float:
    """The root mean square over replications and coefficients of the private errors over the learner's."""
    return float(np.sqrt((private_errors**2).mean() / (learner_errors**2).mean()))


def paired_ratio(outcome: str, rows: list[dict[str, object]], baseline: list[dict[str, object]]) -> str:
    """The RMSE ratio of ``rows`` over that of ``baseline`` on the data seeds both ran, with its 95% bootstrap interval
    (2,000 resamples of those seeds, seeded; each seed's data, and so the learner's errors, are shared)."""
    truth = true_projection(outcome)  # type: ignore[arg-type]
    first, second = ({r["seed"]: r for r in rs if r["outcome"] == outcome} for rs in (rows, baseline))
    seeds = sorted(set(first) & set(second))
    if not seeds:
        return f"  no data seed of the {outcome} outcome in both logs"
    P, B, L = (np.array([side[s][key] for s in seeds], dtype=float) - truth
               for side, key in ((first, "private"), (second, "private"), (first, "learner")))
    resamples = np.random.default_rng(0).integers(0, len(seeds), (2000, len(seeds)))
    boot = [_ratio(P[i], L[i]) / _ratio(B[i], L[i]) for i in resamples]
    low, high = np.percentile(boot, [2.5, 97.5])
    return (f"  RMSE ratio over the baseline's on the same {len(seeds)} data seeds: "
            f"{_ratio(P, L) / _ratio(B, L):.3f} (bootstrap 95% {low:.3f}-{high:.3f}); "
            f"the baseline's ratio {_ratio(B, L):.3f}x")


def summarize(outcome: str, rows: list[dict[str, object]]) -> dict[str, object]:
    """The summary figures of one outcome's replications (:func:`replicate` rows).

    ``rmse_ratio_interval``: the 2.5% and 97.5% quantiles of the ratio over 2,000 bootstrap resamples of the
    replications (seeded); ``rmse_ratio_clipped``: the private errors taken against the projection of the
    clipped outcome's CATE (:func:`~collabcausal.simulations.cate_benchmark.clipped_outcome_projection`, what an
    estimator clipping ``Y`` to the declared range estimates), the learner's against the truth.
    """
    truth, sub_truth = true_projection(outcome), true_subgroup_effects(outcome)  # type: ignore[arg-type]

    def col(key: str) -> np.ndarray:
        return np.array([r[key] for r in rows], dtype=float)

    P, L = col("private"), col("learner")
    rmse_p, rmse_l = np.sqrt(((P - truth) ** 2).mean(axis=0)), np.sqrt(((L - truth) ** 2).mean(axis=0))
    resamples = np.random.default_rng(0).integers(0, len(rows), (2000, len(rows)))
    boot = [_ratio(P[i] - truth, L[i] - truth) for i in resamples]
    clipped = clipped_outcome_projection(outcome)  # type: ignore[arg-type]
    return {
        "outcome": outcome, "reps": len(rows), "epsilon": float(rows[0]["epsilon"]),  # type: ignore[arg-type]
        "truth": truth, "rmse_private": rmse_p, "rmse_learner": rmse_l,
        "rmse_ratio": _ratio(P - truth, L - truth),
        "rmse_ratio_interval": np.percentile(boot, [2.5, 97.5]),
        "error_mean": (P - truth).mean(axis=0), "error_sd": (P - truth).std(axis=0),
        "clipped_truth": clipped, "rmse_ratio_clipped": _ratio(P - clipped, L - truth),
        "coverage_private": _coverage(P, col("private_se"), truth),
        "coverage_learner": _coverage(L, col("learner_se"), truth),
        "subgroup_rmse": np.sqrt(((col("subgroup") - sub_truth) ** 2).mean(axis=0)),
        "subgroup_error_mean": (col("subgroup") - sub_truth).mean(axis=0),
        "subgroup_mean_se": col("subgroup_se").mean(axis=0),
        "subgroup_coverage": _coverage(col("subgroup"), col("subgroup_se"), sub_truth),
        "pehe_wins": float(np.mean(col("pehe_projection") < col("pehe_constant"))),
        "noise_growth": float(rows[-1]["noise_growth"]),  # type: ignore[arg-type]
        "mean_se_private": col("private_se").mean(axis=0), "mean_se_learner": col("learner_se").mean(axis=0),
        "pehe": {"dp_effects projection": col("pehe_projection").mean(), "constant private ATE":
                 col("pehe_constant").mean()} | ({"LinearDRLearner (non-private)": col("pehe_learner").mean()}
                                                 if all("pehe_learner" in r for r in rows) else {}),
        "peers": _peer_summary(rows, truth),
    }


def _peer_summary(rows: list[dict[str, object]], truth: np.ndarray) -> dict[str, dict[str, float]]:
    """Per peer, over the replications that ran it: coefficient RMSE of its implied projection, mean PEHE, wins."""
    ran = [r["peers"] for r in rows if "peers" in r]
    out = {}
    for name in ran[0] if ran else ():
        cells = [r[name] for r in ran]  # type: ignore[index]
        implied = np.array([c["implied"] for c in cells])
        out[name] = {"reps": len(cells), "rows": cells[0]["rows"],
                     "rmse": float(np.sqrt(((implied - truth) ** 2).mean())),
                     "pehe": float(np.mean([c["pehe"] for c in cells])),
                     "pehe_projection": float(np.mean([c["pehe_projection"] for c in cells])),
                     "pehe_constant": float(np.mean([c["pehe_constant"] for c in cells])),
                     "beats_constant": float(np.mean([c["pehe"] < c["pehe_constant"] for c in cells]))}
    return out


def run_outcome(outcome: str, reps: int, n: int, epsilon: float, seed: int, settings: Mapping[str, object],
                log: Path | None = None, peers: int = 0) -> list[dict[str, object]]:
    """Every replication of one outcome (seeds ``seed .. seed + reps - 1``), each appended to ``log`` as it ends;
    the first ``peers`` of them also run the private CATE peers."""
    rows = []
    for r in range(reps):
        row = replicate(outcome, n, epsilon, seed + r, settings, peers=r < peers)
        rows.append(row)
        if log is not None:
            with log.open("a") as fh:
                fh.write(json.dumps(row) + "\n")
        print(f"{outcome} replication {r}: coefficients {np.round(row['private'], 4).tolist()}", file=sys.stderr,
              flush=True)
    return rows


def _row(name: str, values: np.ndarray, digits: int = 4) -> str:
    return f"  {name:<34}" + "  ".join(f"{v:>9.{digits}f}" for v in np.atleast_1d(values))


def report(s: dict[str, object]) -> None:
    """Print one outcome's figures."""
    reps = int(s["reps"])  # type: ignore[call-overload]
    mcse = math.sqrt(0.95 * 0.05 / reps)
    print(f"\n{s['outcome']} outcome, {reps} replications; coefficients (intercept, z0, z8); "
          f"noise growth of the score release {s['noise_growth']:.2f}x")
    for key, name in (("truth", "exact projection"), ("clipped_truth", "projection of the clipped outcome"),
                      ("rmse_private", "RMSE dp_effects projection"), ("error_mean", "mean error dp_effects"),
                      ("error_sd", "sd of the error dp_effects"),
                      ("rmse_learner", "RMSE LinearDRLearner (non-private)"), ("mean_se_private", "mean SE dp_effects"),
                      ("mean_se_learner", "mean SE LinearDRLearner"), ("coverage_private", "coverage dp_effects"),
                      ("coverage_learner", "coverage LinearDRLearner"), ("subgroup_rmse", "subgroups (4 x0 bins) RMSE"),
                      ("subgroup_error_mean", "subgroups mean error"), ("subgroup_mean_se", "subgroups mean SE"),
                      ("subgroup_coverage", "subgroups coverage")):
        print(_row(name, s[key]))  # type: ignore[arg-type]
    low, high = s["rmse_ratio_interval"]  # type: ignore[misc]
    print(f"  RMSE ratio over the coefficients: {s['rmse_ratio']:.3f}x (bootstrap 95% {low:.2f}-{high:.2f}; "
          f"{s['rmse_ratio_clipped']:.3f}x with the private errors against the clipped outcome's projection); "
          f"coverage Monte Carlo SE {mcse:.3f}; "
          f"projection beats the constant ATE in PEHE on {s['pehe_wins']:.3f} of replications")
    print("  mean PEHE (every row): " + "; ".join(f"{k} {v:.4f}" for k, v in s["pehe"].items()))  # type: ignore[attr-defined]
    peers: dict[str, dict[str, float]] = s["peers"]  # type: ignore[assignment]
    if peers:
        print(f"  private CATE peers at eps {s['epsilon']:g} (central; rows = evaluation rows, PEHE there):")
        print(f"  {'peer':<34} {'reps':>5} {'rows':>7} {'coef RMSE':>10} {'PEHE':>8} {'PEHE proj.':>10} "
              f"{'PEHE const':>10} {'beats const':>11}")
        for name, p in peers.items():
            print(f"  {name:<34} {p['reps']:>5d} {p['rows']:>7d} {p['rmse']:>10.4f} {p['pehe']:>8.4f} "
                  f"{p['pehe_projection']:>10.4f} {p['pehe_constant']:>10.4f} {p['beats_constant']:>11.3f}")


def misses(s: dict[str, object]) -> list[str]:
    """The targets (module docstring) this outcome missed."""
    out = []
    if float(s["rmse_ratio"]) > 1.5:  # type: ignore[arg-type]
        out.append(f"{s['outcome']}: RMSE ratio {s['rmse_ratio']:.3f} > 1.5")
    for name, key in (("coverage", "coverage_private"), ("subgroups' coverage", "subgroup_coverage")):
        cov = np.asarray(s[key])
        if ((cov < 0.93) | (cov > 0.97)).any():
            out.append(f"{s['outcome']}: {name} {np.round(cov, 3).tolist()} outside [0.93, 0.97]")
    if int(s["reps"]) < 200:  # type: ignore[call-overload]
        out.append(f"{s['outcome']}: {s['reps']} replications < 200")
    if float(s["pehe_wins"]) < 0.95:  # type: ignore[arg-type]
        out.append(f"{s['outcome']}: projection beats the constant on {s['pehe_wins']:.3f} < 0.95")
    return out


def read_logs(paths: list[Path], outcomes: list[str]) -> dict[str, list[dict[str, object]]]:
    """Each outcome's replications from ``--log`` files, pooled.

    Raises
    ------
    SystemExit
        One line naming the problem: an unreadable file, a line that is not a replication, runs of one outcome at
        different settings (pooling them would mix two designs), or a data seed met twice (one
        replication would count twice).
    """
    by_outcome: dict[str, list[dict[str, object]]] = {o: [] for o in outcomes}
    seen: dict[tuple[str, int], Path] = {}
    design: dict[str, tuple[tuple[str, object], ...]] = {}
    for path in paths:
        try:
            lines = path.read_text().splitlines()
        except OSError as exc:
            raise SystemExit(f"--from-log {path}: {exc.strerror}; give a file that --log wrote") from None
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                outcome, seed = str(row["outcome"]), int(row["seed"])
            except (ValueError, KeyError, TypeError):
                raise SystemExit(f"{path}:{number} is not a replication line of a --log file: remove it or "
                                 "re-run that replication") from None
            if outcome not in by_outcome:
                continue
            settings = tuple((k, row.get(k)) for k in ("n", "epsilon", *SETTINGS))
            if design.setdefault(outcome, settings) != settings:
                differ = [k for (k, v), (_, w) in zip(settings, design[outcome], strict=True) if v != w]
                raise SystemExit(f"{path}:{number}: the {outcome} runs differ in {', '.join(differ)}; pool only "
                                 "replications of one declaration")
            if (outcome, seed) in seen:
                raise SystemExit(f"{path}:{number}: {outcome} data seed {seed} is also in {seen[outcome, seed]}; "
                                 "pool runs of different seeds")
            seen[outcome, seed] = path
            by_outcome[outcome].append(row)
    return by_outcome


def _numbers(value: object) -> list[np.ndarray]:
    """Every number of a summary (nested mappings flattened; the outcome's name left out)."""
    if isinstance(value, dict):
        return [a for k, v in value.items() if k != "outcome" for a in _numbers(v)]
    return [np.asarray(value, dtype=float)]


def _optional(text: str) -> float | None:
    """A number, or ``none``."""
    return None if text == "none" else float(text)


def main(argv: list[str] | None = None) -> int:
    """Run, print, and return 0 when every target is met (or ``--quick`` gave finite numbers), else 1."""
    parser = BenchmarkParser(__doc__)
    parser.add_size("--reps", type=int, full=200, quick=2, help="replications per outcome")
    parser.add_size("--n", type=int, full=25_000, quick=2500, help="subjects per site")
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--outcomes", default="binary,continuous")
    parser.add_argument("--peers", type=int, default=0, metavar="K",
                        help="also run the private CATE peers (paper 000's DP-EBM DR-learner, paper 004's DP-CATE, the "
                             "cate kind) on the first K replications of each outcome (about 20 s each)")
    parser.add_argument("--projection-clip", type=float, default=None, metavar="C",
                        help="[dp_effects] projection_clip: the added per-subject scores bounded at C outcome-range "
                             "widths (default: the score's own bound)")
    parser.add_argument("--nuisance-share", type=float, default=0.5, metavar="S",
                        help="[dp_effects] nuisance_share: the statistics release's share of rho (scores: 1 - S)")
    parser.add_argument("--projection-allocation", default="noise-trace", choices=("noise-trace", "equal"),
                        help="[dp_effects] projection_allocation: how the projection's point sums share their budget")
    parser.add_argument("--modifier-clip", type=_optional, default=MODIFIER_CLIP, metavar="K",
                        help="[dp_effects] modifier_clip: each modifier's z phi clipped at K times its root mean "
                             f"square (from the released Gram matrix) times the bound (default {MODIFIER_CLIP:g}; "
                             "none: unclipped)")
    parser.add_argument("--gram-weight", type=_optional, default=GRAM_WEIGHT, metavar="W",
                        help="[dp_effects] gram_weight: the modifiers' Gram entries released again with the scores "
                             f"at weight W (default {GRAM_WEIGHT:g}; none: not)")
    parser.add_argument("--projection-centre", type=float, default=None, metavar="C",
                        help="[dp_effects] projection_centre: the projection's sums centred on a line fitted from the "
                             "statistics release and clipped at C outcome-range widths (default: not centred)")
    parser.add_argument("--residual-clip", type=float, default=None, metavar="F",
                        help="the projection's scores with the outcome unclipped and each residual y - mu_t clipped "
                             "at F outcome-range widths (docs/dp-cate-projection.md; default: not)")
    parser.add_argument("--clip-compensation", type=float, default=None, metavar="B",
                        help="[dp_effects] clip_compensation (binary outcome, with --projection-clip): each clipped "
                             "score gets back its clip's loss expected under the nuisance models, at most B "
                             "outcome-range widths (docs/dp-cate-projection.md; default: not)")
    parser.add_argument("--nuisance-replicates", type=int, default=DEFAULT_REPLICATES, metavar="B",
                        help=f"[dp_effects] nuisance_replicates: noise replicates of the nuisance models (default "
                             f"{DEFAULT_REPLICATES}; each weighs 1/B of their budget share)")
    parser.add_argument("--replicate-step", type=float, default=1.0, metavar="S",
                        help="[dp_effects] replicate_step: each noise replicate re-noises the statistics with S times "
                             "their noise sd, its move divided by S (docs/dp-cate-projection.md; default 1)")
    parser.add_argument("--cross-weight", type=float, default=1.0, metavar="W",
                        help="[dp_effects] cross_weight: the statistics release's outcome cross sums weighted by W "
                             "(docs/dp-effects.md; default 1)")
    parser.add_argument("--paired", type=Path, default=None, metavar="LOG",
                        help="with --from-log: also the RMSE ratio over that of LOG's replications of the same seeds")
    parser.add_argument("--log", type=Path, default=None,
                        help="append each replication's figures to this JSON-lines file as it ends")
    parser.add_argument("--from-log", type=Path, nargs="+", default=None, metavar="LOG",
                        help="summarize the replications of --log files, pooled (no new run; refused if they mix "
                             "settings or repeat a data seed)")
    args = parser.parse_args(argv)
    quiet_clipping_log()  # the designs' public ranges clip a few simulated values on purpose
    outcomes = args.outcomes.split(",")
    baseline = None
    if args.from_log is not None:
        by_outcome = read_logs(args.from_log, outcomes)
        baseline = read_logs([args.paired], outcomes) if args.paired is not None else None
        first = next((rs[0] for rs in by_outcome.values() if rs), {"epsilon": math.nan, "n": 0})
        print(f"dp_effects effect modification at eps {first['epsilon']:g} per party in total, delta 1e-6, "
              f"4 sites x {first['n']}, from {', '.join(map(str, args.from_log))}")
    else:
        reps, n = args.reps, args.n
        print(f"dp_effects effect modification at eps {args.epsilon:g} per party in total, delta 1e-6, "
              f"4 sites x {n}, seeds {args.seed}..{args.seed + reps - 1}")
        settings = {name: getattr(args, name) for name in SETTINGS}
        by_outcome = {o: run_outcome(o, reps, n, args.epsilon, args.seed, settings, args.log, args.peers)
                      for o in outcomes}
    summaries = [summarize(o, rows) for o, rows in by_outcome.items() if rows]
    for s in summaries:
        report(s)
        if baseline is not None:
            print(paired_ratio(str(s["outcome"]), by_outcome[str(s["outcome"])], baseline[str(s["outcome"])]))
    if args.quick:
        finite = all(np.isfinite(v).all() for s in summaries for v in _numbers(s))
        print("quick: every figure finite" if finite else "quick: a figure is not finite")
        return 0 if finite else 1
    missed = [m for s in summaries for m in misses(s)]
    print("\n" + ("every target met" if not missed else "MISSED: " + "; ".join(missed)))
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
