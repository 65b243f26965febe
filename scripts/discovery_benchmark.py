"""ANM causal discovery on the simulated pair families, beside published ANM-HSIC accuracies.

Writes results/discovery/summary.csv, table.md and reference.csv: per family, tuning rule, score
and epsilon (inf = non-private; private rows are test-set privacy with the released HSIC norm,
exact closed-form accuracy), the accuracy averaged over pairs and split seeds, its 95% bootstrap
interval over pairs, its range over split seeds and the majority-direction baseline; then the
``gp`` rule's non-private HSIC accuracy per family beside the published figure given with
--reference FAMILY=ACCURACY (Mooij et al. 2016; none is built in: see docs/causal-discovery.md).
Exits 1 when a family falls more than 3 points below its reference.

With --peers causal-learn,lingam (the ``benchmarks`` extra) it instead runs, on the same pairs and in
the same process, each rule/score of the project's ANM beside causal-learn's ANM and lingam's RESIT
(their documented defaults), one decision per pair: accuracy with its exact binomial 95% interval,
the majority baseline and seconds per pair, written to results/discovery/peers.csv (appended family
by family) and checked against issue 40's targets for --method (exit 1 on a missed target).
With --private: per family, the non-private ANM of --private-rule on all rows beside its test-set-private
release and the every-row subsample-and-aggregate vote, exact accuracy over the noise, averaged over --seeds
splits and vote permutations, written to private.csv (the test-set release both as two noisy scores and as
its margin alone, ``margin_eps=E``); exit 1 unless test-set eps = 1 (the margin-only form, the discovery kind's
default) is within 5 points and the vote at the largest eps <= 10 within 10 points of the non-private accuracy
on every family.

    .venv/bin/python scripts/discovery_benchmark.py --quick                    # seconds
    .venv/bin/python scripts/discovery_benchmark.py --pairs 100 --rows 1000 --max-rows 500 --seeds 3 \\
        --reference SIM=0.XX --reference SIM-c=0.XX ...                       # about an hour on 2 cores
    .venv/bin/python scripts/discovery_benchmark.py --quick --peers causal-learn,lingam   # seconds
    .venv/bin/python scripts/discovery_benchmark.py --peers causal-learn,lingam --pairs 100 --rows 200
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

from collabcausal.commands.simulate_kinds import group_size_argument
from collabcausal.simulations.discovery_benchmark import (
    TOLERANCE,
    TUNING_RULES,
    binomial_summary,
    full_protection_accuracy,
    peer_records,
    peer_targets,
    private_records,
    private_targets,
    reference_gaps,
    run_benchmark,
    subsample,
)
from collabcausal.simulations.discovery_peers import check_peers
from collabcausal.simulations.pair_families import FAMILIES, family_pairs

QUICK = {"n_pairs": 6, "n_rows": 200, "max_rows": 200, "split_seeds": (0,), "rules": ("fixed", "gp"),
         "scores": ("hsic", "hsic_p"), "epsilons": (1.0, 10.0)}


def markdown(table: pd.DataFrame) -> str:
    """One row per (family, rule, score, epsilon): accuracy [CI] (seed range) | baseline."""
    lines = [
        "| family | rule | score | eps | accuracy [95% CI over pairs] | range over split seeds | majority baseline |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in table.itertuples(index=False):
        eps = "non-private" if r.epsilon == float("inf") else f"{r.epsilon:g}"
        lines.append(
            f"| {r.family} | {r.rule} | {r.score} | {eps} | {r.accuracy:.2f} [{r.ci_low:.2f}, {r.ci_high:.2f}] | "
            f"{r.seed_min:.2f}-{r.seed_max:.2f} | {r.majority_baseline:.2f} |"
        )
    return "\n".join(lines)


def parse_references(items: list[str]) -> dict[str, float]:
    """``["SIM=0.7", ...]`` -> ``{"SIM": 0.7}``; a bad item exits with a one-line message."""
    out = {}
    for item in items:
        family, _, value = item.partition("=")
        try:
            accuracy = float(value)
        except ValueError:
            accuracy = float("nan")
        if family not in FAMILIES or not 0.0 <= accuracy <= 1.0:
            sys.exit(f"--reference {item!r}: expected FAMILY=ACCURACY with FAMILY in {list(FAMILIES)} and "
                     "ACCURACY in [0, 1], e.g. --reference SIM=0.7")
        out[family] = accuracy
    return out


def print_full_protection(args: argparse.Namespace, options: dict) -> None:
    """The party's release (every row protected) on the same pairs: accuracy per residual width and epsilon."""
    tables = []
    for family in args.families.split(","):
        generated = family_pairs(family, options["n_pairs"], options["n_rows"])
        pairs = [subsample(p, options["max_rows"], 0) for p in generated]
        tables.append(full_protection_accuracy(pairs, epsilons=(*options["epsilons"], 100.0)).assign(family=family))
    table = pd.concat(tables, ignore_index=True)
    table.to_csv(args.out / "full_protection.csv", index=False)
    wide = table.pivot_table(index=["family", "residual_width"], columns="epsilon", values="accuracy")
    print("\nHSIC, every row protected (KRR lambda = 1, bandwidth 0.3; eps = inf: the same model non-private):")
    print(wide.round(3).to_string())


def run_peers(args: argparse.Namespace, options: dict) -> int:
    """The project's ANM beside the peers, family by family; 0 when ``--method`` meets every target."""
    peers = check_peers(args.peers.split(","))
    methods = [f"{rule}/{score}" for rule in options["rules"] for score in options["scores"]]
    if args.method not in methods:
        sys.exit(f"--method {args.method!r} is not among the rule/score pairs run: {methods}")
    args.out.mkdir(parents=True, exist_ok=True)
    tables = []
    for family in args.families.split(","):
        pairs = [subsample(p, options["max_rows"], 0) for p in family_pairs(family, options["n_pairs"],
                                                                              options["n_rows"], seed=args.seed)]
        records = peer_records(pairs, rules=options["rules"], scores=options["scores"], peers=peers)
        tables.append(binomial_summary(records, pairs).assign(family=family))
        table = pd.concat(tables, ignore_index=True)
        table.to_csv(args.out / "peers.csv", index=False)
        for r in tables[-1].itertuples(index=False):
            print(f"{family:7s} {r.method:14s} {r.accuracy:.2f} [{r.ci_low:.2f}, {r.ci_high:.2f}] "
                  f"({r.correct}/{r.n_pairs})  {r.seconds_per_pair:7.3f} s/pair  majority {r.majority_baseline:.2f}",
                  flush=True)
    targets = peer_targets(table, args.method, peers)
    targets.to_csv(args.out / "peer_targets.csv", index=False)
    print(f"\n{args.method} against the better peer per family (targets: not below it within the interval, "
          "above the majority baseline, no slower):")
    for r in targets.itertuples(index=False):
        missed = [name for name in ("not_below_peer", "above_majority", "no_slower") if not getattr(r, name)]
        print(f"  {r.family}: {r.accuracy:.2f} vs {r.best_peer} {r.peer_accuracy:.2f} (ratio {r.accuracy_ratio:.2f}), "
              f"majority {r.majority_baseline:.2f}, time x{r.time_ratio:.2f}"
              f"{'' if r.ok else '  MISSED: ' + ', '.join(missed)}")
    return 0 if targets["ok"].all() else 1


def run_private(args: argparse.Namespace, options: dict) -> int:
    """Issue 40's private targets per family: 0 when every family meets both (module docstring)."""
    epsilons = sorted({1.0, *options["epsilons"]})
    args.out.mkdir(parents=True, exist_ok=True)
    means = []
    for family in args.families.split(","):
        pairs = [subsample(p, options["max_rows"], 0) for p in family_pairs(family, options["n_pairs"],
                                                                              options["n_rows"], seed=args.seed)]
        records = private_records(pairs, epsilons=epsilons, rule=args.private_rule, group_size=args.group_size,
                                  split_seeds=options["split_seeds"])
        majority = float(pd.Series([p.direction for p in pairs]).value_counts(normalize=True).max())
        means.append({"family": family, **records.drop(columns="pair").mean().to_dict(), "majority": majority})
        pd.DataFrame(means).to_csv(args.out / "private.csv", index=False)
        print(" ".join(f"{k}={v:.3f}" if isinstance(v, float) else f"{k}={v}" for k, v in means[-1].items()),
              flush=True)
    targets = private_targets(pd.DataFrame(means), epsilons)
    print(f"\nrule {args.private_rule}: loss vs non-private (targets: test-set eps=1 <= 0.05, all rows <= 0.10):")
    for r in targets.itertuples(index=False):
        print(f"  {r.family}: non-private {r.nonprivate:.3f}, test-set eps=1 loss {r.test_loss:+.3f}"
              f"{'' if r.test_ok else ' MISSED'} (margin-only {r.margin_loss:+.3f}{'' if r.margin_ok else ' MISSED'}), "
              f"every row eps={r.vote_eps:g} loss {r.vote_loss:+.3f}{'' if r.vote_ok else ' MISSED'}")
    # judged on the margin-only form: the discovery kind's default release (the two-score form is printed beside it)
    return 0 if targets["margin_ok"].all() and targets["vote_ok"].all() else 1


def main(argv: list[str] | None = None) -> int:
    """Run, write, print; 1 when a family is more than 3 points below its reference."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="6 pairs of 200 rows per family, one split, fixed and gp")
    parser.add_argument("--families", default=",".join(FAMILIES), help="comma-separated pair families")
    parser.add_argument("--rules", default="fixed,loo,gp",
                        help=f"comma-separated tuning rules, of {','.join(TUNING_RULES)} (ls: location-scale)")
    parser.add_argument("--scores", default="hsic,hsic_p,kendall,spearman",
                        help="comma-separated scores (also likelihood, likelihood_kde, likelihood_kde_in: LOCI-M; "
                             "likelihood_hsic: LOCI-M or the ANM by Vuong's test)")
    parser.add_argument("--epsilons", default="1,10", help="comma-separated private budgets (test-set privacy)")
    parser.add_argument("--pairs", type=int, default=100, help="pairs per family")
    parser.add_argument("--rows", type=int, default=1000, help="rows per generated pair")
    parser.add_argument("--max-rows", type=int, default=None, help="subsample longer pairs to this many rows")
    parser.add_argument("--seeds", type=int, default=3, help="train/test split seeds")
    parser.add_argument("--reference", action="append", default=[], metavar="FAMILY=ACC",
                        help="published non-private ANM-HSIC accuracy of a family (repeat per family)")
    parser.add_argument("--both", action="store_true",
                        help="also the party's release (HSIC, every row protected) per residual width and epsilon")
    parser.add_argument("--peers", default="", help="comma-separated peers (causal-learn, lingam): compare with them")
    parser.add_argument("--method", default="fixed/hsic", help="the project's rule/score the peer targets check")
    parser.add_argument("--private", action="store_true",
                        help="issue 40's private targets: test-set HSIC at eps 1, every-row vote release")
    parser.add_argument("--private-rule", default="loo", help="the rule of --private (fixed or loo)")
    parser.add_argument("--group-size", type=group_size_argument, default="auto",
                        help="rows per group of the vote release, or auto (a public function of n and epsilon)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the generated pairs (held-out checks: another)")
    parser.add_argument("--out", type=Path, default=Path("results/discovery"))
    args = parser.parse_args(argv)
    references = parse_references(args.reference)
    options = {"n_pairs": args.pairs, "n_rows": args.rows, "max_rows": args.max_rows or args.rows,
               "split_seeds": range(args.seeds), "rules": tuple(args.rules.split(",")),
               "scores": tuple(args.scores.split(",")), "epsilons": tuple(float(e) for e in args.epsilons.split(","))}
    if args.quick:
        options = QUICK
    if args.peers:
        return run_peers(args, options)
    if args.private:
        return run_private(args, options)
    table = run_benchmark(families=tuple(args.families.split(",")), **options)
    gaps = reference_gaps(table, references) if "gp" in options["rules"] else pd.DataFrame()
    args.out.mkdir(parents=True, exist_ok=True)
    table.to_csv(args.out / "summary.csv", index=False)
    gaps.to_csv(args.out / "reference.csv", index=False)
    text = markdown(table)
    (args.out / "table.md").write_text(text + "\n")
    print(text)
    if args.both:
        print_full_protection(args, options)
    if gaps.empty:
        return 0
    print(f"\nANM-HSIC (gp rule), non-private, beside the published figure (tolerance {TOLERANCE:.2f}):")
    for r in gaps.itertuples(index=False):
        ref = "no reference given" if pd.isna(r.reference) else f"published {r.reference:.2f}, gap {r.gap:+.2f}"
        print(f"  {r.family}: {r.accuracy:.2f} ({ref}){'' if r.ok else '  MORE THAN 3 POINTS BELOW'}")
    return 0 if gaps["ok"].all() else 1


if __name__ == "__main__":
    raise SystemExit(main())
