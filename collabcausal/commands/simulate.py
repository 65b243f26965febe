"""``collabcausal simulate``: split a data set into a grid of parties and run DC-QE settings."""

from __future__ import annotations

import argparse
import logging
import tempfile
from functools import partial
from typing import TYPE_CHECKING

from collabcausal.analyst.kinds import KINDS
from collabcausal.analyst.study_defaults import BOOTSTRAP, PARTY_COMPONENTS
from collabcausal.commands.simulate_kinds import add_kind_arguments, kind_options
from collabcausal.commands.simulate_options import column_groups, parse_party_components
from collabcausal.errors import InputError
from collabcausal.simulations.settings import DEFAULT_2X2, parse_settings

if TYPE_CHECKING:
    from collabcausal.simulations.datasets import CausalDataset

DESCRIPTION = """\
Split a data set into a grid of parties (row groups hold different subjects, column groups
different covariates) and compare what each setting estimates: one party alone (IA), the
collaborations of DC-QE (paper 003), and the centralized analysis (CA). Prints the paper's table
and writes table.csv, results.json, bootstrap.png and report.html to --out.

With a KIND other than dcqe, runs that study kind on the grid through the code of `analyst serve`
(the parties' policies and privacy ledgers included) and writes report.json and report.html:
adum (eps-ADUM, paper 001, parties split by rows), cate (DC-QE, then DP-CATE on the analyst's
representation, paper 004; NO guarantee against the coordinator, who holds the representation: for
effect modification that is DP against it use dp_effects --modifiers/--subgroups,
docs/dp-cate-projection.md) or discovery (each party's private ANM direction, paper 002).

examples:
  # paper 003's LaLonde table (Experiment II) with 1000 bootstrap replicates
  collabcausal simulate --dataset lalonde --bootstrap 1000 --out results/lalonde

  # Experiment I (synthetic data, true ATE 1)
  collabcausal simulate --dataset dcqe-synthetic --settings L-IA,L,T,W,CA --out results/synthetic

  # your own CSV: three hospitals split by age, two holders of different columns
  collabcausal simulate --data examples/cohort/cohort.csv --covariates age,sex,bmi,sbp --treatment statin \\
      --outcome event --rows 3 --row-rule column:age --columns "age,sex;bmi,sbp" --settings W,CA --out results/cohort

  # eps-ADUM over four hospitals holding different subjects, epsilon 1 each
  collabcausal simulate adum --rows 4 --epsilon 1 --partition-columns age --cells 8 --out results/adum

  # DP-CATE on the collaborative representation of a 2x2 grid, over gRPC with mutual TLS
  collabcausal simulate cate --epsilon 1 --outcome-range 0 60 --transport grpc --out results/cate

  # private cause-effect direction of two covariates at every party
  collabcausal simulate discovery --rows 4 --pairs age,re74 --epsilon 1 --out results/discovery
"""

log = logging.getLogger(__name__)

DATASETS = ("lalonde", "dcqe-synthetic")


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``simulate`` parser."""
    p = subparsers.add_parser(
        "simulate",
        help="split a data set into a grid of parties and compare DC-QE settings (paper 003)",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "kind", nargs="?", choices=KINDS, default="dcqe", help="the study kind (default dcqe: paper 003's settings)"
    )
    data = p.add_argument_group("data")
    data.add_argument("--dataset", choices=DATASETS, default="lalonde", help="bundled data set (default: lalonde)")
    data.add_argument("--data", metavar="FILE", help="a CSV or Parquet file instead of --dataset")
    data.add_argument("--covariates", metavar="A,B,...", help="covariate columns of --data")
    data.add_argument("--treatment", metavar="COL", help="0/1 treatment column of --data")
    data.add_argument("--outcome", metavar="COL", help="outcome column of --data")
    data.add_argument(
        "--benchmark", type=float, default=argparse.SUPPRESS, help="known effect to compute gaps against (--data)"
    )
    grid = p.add_argument_group("grid")
    grid.add_argument("--rows", type=int, default=2, help="row groups: parties with different subjects (default 2)")
    grid.add_argument(
        "--row-rule", default="random", help="'random' (default) or 'column:NAME' (split by a column's order)"
    )
    grid.add_argument(
        "--columns",
        metavar="A,B;C,D",
        default=argparse.SUPPRESS,
        help="column groups separated by ';' (default: the data set's own, or one group for --data)",
    )
    study = p.add_argument_group("analysis")
    study.add_argument(
        "--settings",
        default=argparse.SUPPRESS,
        help="comma-separated: CA, IA:p11, W, p11+p22, and on 2x2 L, R, T, B, L-IA, R-IA "
        f"(default on 2x2: {','.join(DEFAULT_2X2)}; otherwise W,CA)",
    )
    study.add_argument("--estimators", default=argparse.SUPPRESS, help="any of psm,ipw,aipw (default all)")
    study.add_argument(
        "--estimand", choices=("ate", "att"), default=argparse.SUPPRESS, help="default: the data set's (lalonde: att)"
    )
    study.add_argument(
        "--party-components",
        default=argparse.SUPPRESS,
        metavar="K",
        help="m~: PCA components per party, an int (capped at the party's covariates) or a variance "
        f"fraction like 0.9 (default {PARTY_COMPONENTS})",
    )
    study.add_argument(
        "--components", metavar="SETTING=K,...", default=argparse.SUPPRESS,
        help="m^ per collaboration, e.g. W-clb=4 (default: rank)",
    )
    study.add_argument(
        "--anchors", type=int, default=argparse.SUPPRESS,
        help="anchor rows r (default: number of subjects, as in paper 003)",
    )
    run = p.add_argument_group("run")
    run.add_argument(
        "--bootstrap", type=int, default=argparse.SUPPRESS, metavar="B",
        help=f"bootstrap replicates (default {BOOTSTRAP}; paper: 1000)",
    )
    run.add_argument(
        "--interval",
        default=argparse.SUPPRESS,
        help="SE and 95%% interval around each full-sample estimate: bootstrap percentile (default), "
        "bootstrap BCa, or analytic (sandwich / Abadie-Imbens with the propensity's estimation accounted for); "
        "analyst serve takes the same choice from study.toml",
    )
    run.add_argument("--seed", type=int, default=0, help="study seed (default 0)")
    run.add_argument("--jobs", type=int, default=argparse.SUPPRESS, help="parallel bootstrap workers (default 1)")
    run.add_argument("--out", default="results", help="output folder (default results/)")
    run.add_argument(
        "--transport",
        choices=("inprocess", "grpc"),
        default="inprocess",
        help="inprocess (default), or grpc: every party its own OS process on loopback behind mutual TLS",
    )
    run.add_argument("--quiet", action="store_true", help="no progress bar")
    add_kind_arguments(p)
    p.set_defaults(func=run_command)  # an option a kind may not read has no default here: KIND_OPTIONS holds it


def run_command(args: argparse.Namespace) -> int:
    """Validate everything, run, print the table and write the results."""
    from collabcausal.protocol.launcher import local_grpc_grid
    from collabcausal.reporting.out_folder import check_out_folder
    from collabcausal.simulations.dcqe_experiment import ExperimentConfig, run_experiment
    from collabcausal.simulations.partition import partition_grid
    from collabcausal.simulations.report import format_table, simulation_warnings, write_results

    check_out_folder(args.out, "--out")
    args = kind_options(args)  # refuses an option the kind does not read; sets the defaults of the others
    check_run_options(args)
    dataset = _dataset(args)
    if args.kind != "dcqe" or args.balance_epsilon is not None:
        from collabcausal.commands.simulate_kinds import run_kind

        return run_kind(args, dataset)
    partition = partition_grid(
        dataset, args.rows, column_groups=column_groups(args), row_rule=args.row_rule, seed=args.seed
    )
    tokens = args.settings.split(",") if args.settings else (DEFAULT_2X2 if partition.shape == (2, 2) else ("W", "CA"))
    settings = parse_settings(tokens, partition, _components(args.components))
    config = ExperimentConfig(
        dataset=dataset,
        partition=partition,
        settings=settings,
        estimators=tuple(e.strip() for e in args.estimators.split(",")),
        estimand=args.estimand,
        n_boot=args.bootstrap,
        seed=args.seed,
        party_components=parse_party_components(args.party_components),
        n_anchors=args.anchors,
        n_jobs=args.jobs,
        interval=args.interval,
    )
    if args.transport == "grpc":
        with tempfile.TemporaryDirectory(prefix="collabcausal-grpc-") as workdir:
            factory = partial(local_grpc_grid, workdir=workdir, tls=True, study=config.study)
            result = run_experiment(config, grid_factory=factory, progress=not (args.quiet or args.log_quiet))
    else:
        result = run_experiment(config, progress=not (args.quiet or args.log_quiet))
    title = (
        f"{dataset.name}: {partition.shape[0]}x{partition.shape[1]} grid, B = {config.n_boot}, seed {config.seed}, "
        f"{config.interval} SE and interval"
    )
    print(format_table(result.rows(), title))
    print(config.configuration_line())
    for warning in simulation_warnings(result):
        log.warning("%s", warning)
    for path in write_results(result, args.out):
        log.info("wrote %s", path)
    return 0


def check_run_options(args: argparse.Namespace) -> None:
    """The counts of the run, checked at the door in the command's own terms (the library's
    messages name its keywords: n_boot, n_jobs, n_anchors). The other kinds draw no replicates."""
    if args.kind == "dcqe" and args.bootstrap < 0:
        raise InputError(f"--bootstrap {args.bootstrap} is negative", "pass a replicate count such as 200")
    if args.kind == "dcqe" and args.bootstrap == 0 and args.interval != "analytic":
        raise InputError(
            f"--bootstrap 0 leaves the {args.interval} interval without replicates",
            "draw some (--bootstrap 200) or use the analytic interval (--interval analytic)",
        )
    if args.jobs == 0:
        raise InputError("--jobs 0 runs nothing", "pass 1 (serial), a number of workers, or -1 (all cores)")
    if args.anchors is not None and args.anchors < 1:
        raise InputError(f"--anchors {args.anchors} is not a positive count", "pass e.g. --anchors 1000, or omit it")
    parse_party_components(args.party_components)
    _components(args.components)


def _dataset(args: argparse.Namespace) -> CausalDataset:
    from collabcausal.simulations.datasets import load_csv_dataset, load_lalonde, make_dcqe_synthetic

    if args.data is None:
        return load_lalonde() if args.dataset == "lalonde" else make_dcqe_synthetic(seed=args.seed)
    missing = [f"--{k}" for k in ("covariates", "treatment", "outcome") if getattr(args, k) is None]
    if missing:
        raise InputError(f"--data needs {', '.join(missing)}", "name the covariate, treatment and outcome columns")
    return load_csv_dataset(
        args.data,
        [c.strip() for c in args.covariates.split(",") if c.strip()],
        args.treatment,
        args.outcome,
        estimand=args.estimand or "ate",
        benchmark=args.benchmark,
    )


def _components(text: str) -> dict[str, int]:
    out = {}
    for item in filter(None, (s.strip() for s in text.split(","))):
        name, _, value = item.partition("=")
        if not value.strip().isdigit() or int(value) < 1:
            raise InputError(f"--components {item} is not SETTING=K with K >= 1", "write e.g. W-clb=4,T-clb=4")
        out[name.strip()] = int(value)
    return out
