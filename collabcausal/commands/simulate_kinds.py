"""``collabcausal simulate KIND``: a study on a simulated grid, through ``analyst serve``'s code.

KIND is adum, cate, discovery or dp_effects, or dcqe with ``--balance-epsilon`` (below).

The options become a study (the dict a study.toml would hold, validated by
:class:`~collabcausal.analyst.config.StudyFile` with the same one-line errors), the data set is
split into parties (each with a privacy ledger in a temporary folder holding exactly the study's
budget), and :func:`~collabcausal.commands.analyst.run_study` runs it over an in-process grid or,
with ``--transport grpc``, over party processes behind mutual TLS; report.json and report.html go
to ``--out`` as ``analyst serve`` writes them.

Public ranges are the data set's observed ranges (covariates and, without ``--outcome-range``, the
outcome): a simulation convenience computed from all rows, so not private; a deployment declares
them. eps-ADUM and discovery split the rows only (every party holds every covariate: parties hold
different subjects); DP-CATE uses the DC-QE grid (``--rows`` x column groups).

``--balance-epsilon`` (with ``--balance-delta``) adds ``[balance]``: the study's balance moments are
``dp_weighted_moments``, (epsilon, delta) charged per request. ``simulate dcqe`` with it runs the
DC-QE study of all parties as ``analyst serve`` does (not paper 003's table of settings); each
party's policy then lists exactly the study's operations (``describe``, ``dc_representation``,
``dp_weighted_moments``: no exact moments) and its ledger holds exactly the study's budget
(:meth:`~collabcausal.analyst.dcqe.DCQEPlan.balance_requests` x (epsilon, delta)). The plain
representations are exact row-level releases of the same covariates, so the policy opts out of the
DP rule explicitly (``allow_plain_with_dp``) and the report says the parties' guarantee is none
(:data:`PLAIN_WITH_DP_WARNING`): the DP moments add protection only beside DP representations.
"""

from __future__ import annotations

import argparse
import tempfile
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from collabcausal.analyst.study_defaults import BOOTSTRAP, INTERVAL, PARTY_COMPONENTS
from collabcausal.errors import InputError

if TYPE_CHECKING:
    from collabcausal.analyst.config import StudyConfig
    from collabcausal.simulations.datasets import CausalDataset
    from collabcausal.simulations.partition import GridPartition

RANGE_WARNING = (
    "simulation: the public ranges (covariates{outcome}) are the data set's observed ranges, computed from all "
    "rows: not private; a deployment declares them in study.toml."
)


TABLE = "dcqe table"
"""Reader name of paper 003's table of settings: ``simulate`` (kind dcqe) without ``--balance-epsilon``."""
# option dest -> (the kinds that read it, its default): the one place that says which option each kind reads.
# An option given to a kind that does not read it is refused (:func:`kind_options`); "dcqe" is both dcqe runs
# (paper 003's table and, with --balance-epsilon, the study), TABLE the table only. Options every kind reads
# (the data set, --rows, --row-rule, --seed, --transport, --out, --quiet: a kind without a progress bar shows
# none either way) are not listed.
KIND_OPTIONS: dict[str, tuple[tuple[str, ...], Any]] = {
    "columns": (("dcqe", "cate", "dp_effects"), None),
    "estimand": (("dcqe", "adum", "cate", "dp_effects"), None),
    "estimators": (("dcqe",), "psm,ipw,aipw"),
    "party_components": (("dcqe", "cate"), str(PARTY_COMPONENTS)),
    "anchors": (("dcqe", "cate"), None),
    "bootstrap": (("dcqe",), BOOTSTRAP),
    "interval": (("dcqe",), INTERVAL),
    "settings": ((TABLE,), None),
    "components": ((TABLE,), ""),
    "jobs": ((TABLE,), 1),
    "benchmark": ((TABLE,), None),
    "epsilon": (("adum", "cate", "discovery", "dp_effects"), 1.0),
    "delta": (("cate", "dp_effects"), None),
    "outcome_range": (("adum", "cate", "dp_effects"), None),
    "partition_columns": (("adum",), None),
    "cells": (("adum",), None),
    "kmeans": (("adum",), None),
    "learner": (("cate",), "r"),
    "feature_bound": (("cate",), 0.2),
    "pairs": (("discovery",), None),
    "release": (("discovery",), "margin"),
    "group_size": (("discovery",), "auto"),
    "rule": (("discovery",), "gp"),
    "trim": (("dp_effects",), 0.1),
    "nuisance": (("dp_effects",), "pooled"),
    "secure_aggregation": (("dp_effects",), True),
    "modifiers": (("dp_effects",), None),
    "subgroups": (("dp_effects",), None),
    "simultaneous": (("dp_effects",), "none"),
    "projection_clip": (("dp_effects",), None),
    "projection_centre": (("dp_effects",), None),
    "residual_clip": (("dp_effects",), None),
    "clip_compensation": (("dp_effects",), None),
    "cross_weight": (("dp_effects",), None),
    "replicate_step": (("dp_effects",), None),
    "balance_epsilon": (("dcqe", "cate"), None),
    "balance_delta": (("dcqe", "cate"), 1e-6),
}
BALANCE_OPERATIONS = ("describe", "dc_representation", "dp_weighted_moments")
"""A simulated party's policy in a study with ``[balance]``: the study's operations, no exact moments."""
PLAIN_WITH_DP_WARNING = (
    "simulation: each party answers the plain (exact) DC-QE representations beside the DP balance moments, so "
    "its policy opts out of the DP rule (allow_plain_with_dp = true) and its guarantee is none: DP balance "
    "moments add protection only when the representations are DP too."
)


def add_kind_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of the kinds adum, cate and discovery (absent from ``args`` unless given)."""
    group = parser.add_argument_group("study kinds adum, cate, discovery, dp_effects (see docs/protocol.md)")
    add = partial(group.add_argument, default=argparse.SUPPRESS)
    add("--epsilon", type=float,
        help="adum: each party's epsilon; discovery: each party's epsilon per pair; cate: the release's (default 1)")
    add("--delta", type=float, help="cate: the release's delta (default 1e-5); dp_effects: each party's (1e-6)")
    add("--outcome-range", type=comma_list(float), nargs="+", metavar="LO,HI", action=FlatRange,
        help="adum, cate, dp_effects: public outcome range, as study.toml's [lo, hi] (also LO HI) (default: the "
        "data's observed range, a simulation convenience)")
    add("--partition-columns", metavar="A,B", help="adum: partition covariates (default: the first)")
    add("--cells", type=comma_list(int), metavar="N,N",
        help="adum: regular-grid cells, one per partition column, as study.toml's cells = [N, N] (default 10 each)")
    add("--kmeans", type=int, metavar="K", help="adum: a DP k-means partition of K clusters instead")
    add("--learner", choices=("r", "dr"), help="cate: R- or DR-learner (default r); cate gives no guarantee "
        "against the coordinator: dp_effects --modifiers is the private path (docs/dp-cate-projection.md)")
    add("--feature-bound", type=float, help="cate: X^ columns clipped to [-b, b] (default 0.2)")
    add("--pairs", metavar="X,Y;U,V", help="discovery: covariate pairs (default: the first two covariates)")
    add("--release", choices=("margin", "scores", "vote"), help="discovery: the margin of the ANM's DP scores "
        "(default; less noise than both scores, same budget), both scores, or subsample-and-aggregate votes, every "
        "row protected without public bounds (docs/causal-discovery.md)")
    add("--group-size", type=group_size_argument, help="discovery --release vote: rows per voting group, or auto "
        "(default: a public function of n and epsilon, docs/causal-discovery.md)")
    add("--rule", choices=("gp", "krr"), help="discovery --release vote: each group's ANM (default gp)")
    add("--trim", type=float, help="dp_effects: propensities trimmed to [t, 1 - t] (default 0.1)")
    add("--nuisance", choices=("pooled", "site"),
        help="dp_effects: one pooled nuisance model with site intercepts (default) or one per party")
    add("--secure-aggregation", action=argparse.BooleanOptionalAction,
        help="dp_effects: the analyst sees only sums over parties (default on)")
    add("--modifiers", metavar="A,B", help="dp_effects: covariates the CATE is projected on, with intervals "
        "(docs/dp-cate-projection.md)")
    add("--subgroups", metavar="A=E0,E1,..;B=..", help="dp_effects: AIPW effects in bins of covariates by their "
        "edges, e.g. age=18,50,65,95;sex=0,0.5,1")
    add("--simultaneous", choices=("none", "bonferroni"),
        help="dp_effects: subgroup intervals simultaneous over all bins (Bonferroni) or not (default none)")
    add("--projection-clip", type=float, metavar="C",
        help="dp_effects: modifier-weighted and subgroup scores bounded at C outcome-range widths (default: the "
        "score's own bound; docs/dp-cate-projection.md)")
    add("--projection-centre", type=float, metavar="C",
        help="dp_effects: the modifier-weighted scores centred on a line fitted from the statistics release, "
        "bounded at C outcome-range widths around it (default: not centred; docs/dp-cate-projection.md)")
    add("--residual-clip", type=float, metavar="F",
        help="dp_effects: the modifier-weighted and subgroup scores take the outcome unclipped, each residual clipped "
        "at F outcome-range widths, e.g. 0.33 (default: the outcome clipped to its range; for an outcome whose tails "
        "pass its declared range, not a bounded one; docs/dp-cate-projection.md)")
    add("--clip-compensation", type=float, metavar="B",
        help="dp_effects, binary outcome, with --projection-clip: each clipped modifier-weighted and subgroup score "
        "gets back the loss its clip is expected to cost under the nuisance models, at most B outcome-range widths, "
        "e.g. 0.1 (default: not; docs/dp-cate-projection.md)")
    add("--cross-weight", type=float, metavar="W",
        help="dp_effects: the statistics release's outcome cross sums weighted by W against its Gram matrices "
        "(default 1; 2 helped a continuous outcome, not a binary one; docs/dp-effects.md)")
    add("--replicate-step", type=float, metavar="S",
        help="dp_effects: each noise replicate re-noises the statistics with S times their noise sd and its move is "
        "divided by S (default 1; 3 for a binary outcome with --projection-clip; docs/dp-cate-projection.md)")
    group = parser.add_argument_group("DP balance moments, dcqe and cate (study.toml [balance], docs/protocol.md)")
    add = partial(group.add_argument, default=argparse.SUPPRESS)
    add("--balance-epsilon", type=float, metavar="EPS",
        help="balance moments (eps, delta)-DP, charged to each party per request; dcqe then runs the study of "
        "all parties as analyst serve does")
    add("--balance-delta", type=float, metavar="DELTA", help="with --balance-epsilon: delta per request (default 1e-6)")


class FlatRange(argparse.Action):
    """``LO,HI`` or ``LO HI`` (study.toml's ``[lo, hi]`` either way): one list of two numbers."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        flat = [v for item in values for v in item]
        if len(flat) != 2:
            parser.error(f"{option_string} takes two numbers, LO,HI (or LO HI), got {len(flat)}")
        setattr(namespace, self.dest, flat)


def comma_list(convert: Callable[[str], Any]) -> Callable[[str], list[Any]]:
    """An argparse type: a study.toml list written as comma-separated items (``4,4`` for ``[4, 4]``).

    One grammar for a setting: a flag that stands for a study.toml key takes the values the key takes.
    """

    def parse(text: str) -> list[Any]:
        try:
            return [convert(item.strip()) for item in text.split(",")]
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{text!r} is not a comma-separated list of {convert.__name__} values (study.toml's [a, b] as a,b)"
            ) from None

    parse.__name__ = f"list of {convert.__name__}"
    return parse


def kind_options(args: argparse.Namespace) -> argparse.Namespace:
    """``args`` with every option of :data:`KIND_OPTIONS` set (its default where not given); an option the
    run does not read (:func:`readers`) is an :class:`InputError`, raised before anything runs."""
    run = readers(args)
    values = {}
    for dest, (kinds, default) in KIND_OPTIONS.items():
        if hasattr(args, dest) and not run & set(kinds):
            flag = "--" + dest.replace("_", "-")
            if kinds == (TABLE,) and args.kind == "dcqe":
                raise InputError(
                    f"{flag} is not used with --balance-epsilon",
                    "drop it: the study runs every party, as analyst serve does",
                )
            users = " or ".join("dcqe without --balance-epsilon" if k == TABLE else k for k in kinds)
            raise InputError(f"{flag} is not an option of simulate {args.kind}", f"use it with simulate {users}")
        values[dest] = getattr(args, dest, default)
    if hasattr(args, "balance_delta") and not hasattr(args, "balance_epsilon"):
        raise InputError("--balance-delta needs --balance-epsilon", "give both, e.g. --balance-epsilon 1")
    return argparse.Namespace(**vars(args) | values)


def readers(args: argparse.Namespace) -> set[str]:
    """The names under which :data:`KIND_OPTIONS` lists the options the run of ``args`` reads."""
    if args.kind == "dcqe" and not hasattr(args, "balance_epsilon"):
        return {"dcqe", TABLE}
    return {args.kind}


def run_kind(args: argparse.Namespace, dataset: CausalDataset) -> int:
    """Build the study of ``args.kind`` (options checked by :func:`kind_options`), run it through
    ``run_study`` and publish its report."""
    from pydantic import ValidationError

    from collabcausal.analyst.config import StudyFile, study_config
    from collabcausal.anchor_key import simulation_anchor_key
    from collabcausal.commands.analyst import publish_report, run_study
    from collabcausal.commands.simulate_options import column_groups
    from collabcausal.config_schema import config_error
    from collabcausal.ledger import PrivacyLedger
    from collabcausal.party.policy import PartyPolicy
    from collabcausal.party.secagg import attach_identities
    from collabcausal.protocol.inprocess import InProcessGrid
    from collabcausal.protocol.launcher import local_grpc_grid
    from collabcausal.secagg import simulation_identities
    from collabcausal.simulations.partition import build_parties, partition_grid

    if args.kind in ("dcqe", "cate"):
        columns = column_groups(args)  # None: the data set's own column groups
    elif args.kind == "dp_effects":  # every party holds every covariate unless --columns splits them
        columns = column_groups(args) or [dataset.covariates]
    else:
        columns = [dataset.covariates]
    partition = partition_grid(dataset, args.rows, column_groups=columns, row_rule=args.row_rule, seed=args.seed)
    out = Path(args.out)
    with tempfile.TemporaryDirectory(prefix="collabcausal-simulate-") as workdir:
        doc = simulated_study(args, dataset, partition, ledger=Path(workdir) / "study-ledger.sqlite")
        try:
            config = study_config(StudyFile.model_validate(doc), out / "study.toml")
        except ValidationError as exc:
            raise config_error(Path(f"simulate {args.kind}"), StudyFile, exc) from None
        parties = build_parties(dataset, partition, anchor_key=simulation_anchor_key(args.seed))
        vertical = config.kind == "dp_effects" and len(partition.column_groups) > 1
        if vertical:  # T and Y stay with the first column group: the label holder (docs/dp-effects-vertical.md)
            label_holders = {group[0] for group in partition.names()}
            for party in parties:
                if party.name not in label_holders:
                    party.table = replace(party.table, treatment=None, outcome=None)
        epsilon, delta = party_budget(doc, config)
        for party in parties:
            if epsilon > 0:
                party.ledger = PrivacyLedger(Path(workdir) / f"{party.name}.sqlite", epsilon=epsilon, delta=delta,
                                             dataset=party.name)
            if config.balance is not None:  # full rank allowed: the default --party-components 3 may equal m
                party.policy = PartyPolicy(
                    BALANCE_OPERATIONS, party.table.covariate_names, allow_full_rank=True, allow_plain_with_dp=True
                )
        if args.transport == "inprocess" and config.kind == "dp_effects" and (config.analysis.secure_aggregation
                                                                               or vertical):
            # over gRPC each party signs round keys and ciphertexts with its mutual-TLS certificate; in process,
            # throwaway ones
            attach_identities(parties, simulation_identities(config.study, [p.name for p in parties]))
        if args.transport == "grpc":
            with local_grpc_grid(parties, workdir=Path(workdir) / "grpc", study=config.study) as grid:
                report = run_study(grid, config, progress=not (args.quiet or args.log_quiet))
        else:
            report = run_study(InProcessGrid(parties), config, progress=not (args.quiet or args.log_quiet))
    ranged_outcome = args.kind in KIND_OPTIONS["outcome_range"][0] and not args.outcome_range
    report["warnings"].append(RANGE_WARNING.format(outcome=" and outcome" if ranged_outcome else ""))
    if config.balance is not None:
        report["warnings"].append(PLAIN_WITH_DP_WARNING)
    if args.kind == "adum":
        add_within_cell_imbalance(report, dataset)
    paths = publish_report(report, doc, config.out)
    print(f"report: {paths[0]} and {paths[1]}")
    return 0


def add_within_cell_imbalance(report: dict[str, Any], dataset: CausalDataset) -> None:
    """Say next to eps-ADUM's estimate whether its cells balance the covariates (measured on all rows)."""
    from collabcausal.simulations.adum_imbalance import within_cell_imbalance

    imbalance = within_cell_imbalance(
        dataset.frame, list(dataset.covariates), dataset.treatment, report["partition"], report["estimand"]
    )
    row = report["estimates"]["eps-adum"]
    row["within_cell_smd"] = imbalance.smd
    row["adjustment"] += "; " + imbalance.sentence(report["estimand"])


def simulated_study(
    args: argparse.Namespace, dataset: CausalDataset, partition: GridPartition, *, ledger: Path
) -> dict[str, Any]:
    """The study.toml content (as a dict) that ``args`` describe on ``partition``.

    The study id is the simulation's (:func:`~collabcausal.analyst.study_defaults.simulation_study_id`),
    as ``simulate``'s table uses, and every default is study.toml's: the same W-clb numbers.
    """
    from collabcausal.analyst.study_defaults import simulation_study_id

    ranges = {c: [lo, hi] for c, (lo, hi) in dataset.covariate_ranges().items()}
    y = dataset.frame[dataset.outcome]
    outcome = list(args.outcome_range) if args.outcome_range else [float(y.min()), float(y.max())]
    study = {"id": simulation_study_id(dataset.name, partition.shape), "kind": args.kind, "seed": args.seed,
             "out": str(Path(args.out).resolve())}
    if args.kind != "discovery":
        study["estimand"] = args.estimand or dataset.estimand
    sections = {} if args.balance_epsilon is None else {
        "balance": {"epsilon": args.balance_epsilon, "delta": args.balance_delta}
    }
    if args.kind in ("dcqe", "cate"):
        from collabcausal.commands.simulate_options import parse_party_components

        study |= {"party_components": parse_party_components(args.party_components)}
        if args.anchors is not None:
            study["n_anchors"] = args.anchors
    if args.kind == "dcqe":
        study |= {"estimators": [e.strip() for e in args.estimators.split(",")], "bootstrap": args.bootstrap,
                  "interval": args.interval}
    elif args.kind == "adum":
        names = _names(args.partition_columns) or [dataset.covariates[0]]
        partition_keys = {"kmeans_clusters": args.kmeans} if args.kmeans else {"cells": args.cells or [10] * len(names)}
        sections["adum"] = {"epsilon": args.epsilon, "outcome_range": outcome, "columns": names, **partition_keys}
    elif args.kind == "discovery":
        pairs = [_names(p) for p in args.pairs.split(";")] if args.pairs else [list(dataset.covariates[:2])]
        sections["discovery"] = {"epsilon": args.epsilon, "pairs": pairs, "release": args.release,
                                 "group_size": args.group_size, "rule": args.rule}
    elif args.kind == "dp_effects":
        study.pop("estimand")
        estimand = args.estimand or (dataset.estimand if len(partition.column_groups) == 1 else "ate")
        sections["dp_effects"] = {
            "epsilon": args.epsilon, "delta": args.delta or 1e-6, "outcome_range": outcome, "trim": args.trim,
            "estimands": [estimand], "nuisance": args.nuisance,
            "secure_aggregation": args.secure_aggregation, "modifiers": _names(args.modifiers),
            "subgroups": _subgroups(args.subgroups), "simultaneous": args.simultaneous,
        } | {key: value for key in ("projection_clip", "projection_centre", "residual_clip",
                                  "clip_compensation", "cross_weight", "replicate_step")
               if (value := getattr(args, key)) is not None}
    else:
        sections["cate"] = {"epsilon": args.epsilon, "delta": args.delta or 1e-5, "outcome_range": outcome,
                            "feature_bound": args.feature_bound, "learner": args.learner, "ledger": str(ledger)}
    return {
        "study": study,
        "server": {"address": "127.0.0.1:0", "insecure": True},
        "anchor_ranges": ranges,
        "row_groups": [{"parties": list(group)} for group in partition.names()],
        **sections,
    }


def party_budget(doc: dict[str, Any], config: StudyConfig) -> tuple[float, float]:
    """Each simulated party's (epsilon, delta) budget: exactly what the study asks of it.

    adum: its epsilon; discovery: epsilon per pair; ``[balance]``: (epsilon, delta) per balance
    request (:meth:`~collabcausal.analyst.dcqe.DCQEPlan.balance_requests`); cate's release is the
    analyst's, not the parties'.
    """
    kind = doc["study"]["kind"]
    if kind == "dp_effects":
        return float(doc["dp_effects"]["epsilon"]), float(doc["dp_effects"]["delta"])
    epsilon = {
        "adum": lambda: float(doc["adum"]["epsilon"]),
        "discovery": lambda: float(doc["discovery"]["epsilon"]) * len(doc["discovery"]["pairs"]),
    }.get(kind, lambda: 0.0)()
    if config.balance is None:
        return epsilon, 0.0
    requests = config.plan().balance_requests()
    return epsilon + requests * config.balance.epsilon, requests * config.balance.delta


def _subgroups(text: str | None) -> dict[str, list[float]]:
    """``"age=18,50,95;sex=0,0.5,1"`` as ``{"age": [18, 50, 95], "sex": [0, 0.5, 1]}``."""
    out: dict[str, list[float]] = {}
    for item in (text or "").split(";"):
        if not item.strip():
            continue
        name, _, edges = item.partition("=")
        try:
            out[name.strip()] = [float(e) for e in edges.split(",")]
        except ValueError:
            raise InputError(f"--subgroups item {item!r} is not NAME=EDGE,EDGE,...",
                             "give e.g. --subgroups 'age=18,50,65,95;sex=0,0.5,1'") from None
        if not name.strip():
            raise InputError(f"--subgroups item {item!r} names no covariate", "give e.g. age=18,50,95")
    return out


def _names(text: str | None) -> list[str]:
    if text is None:
        return []
    names = [c.strip() for c in text.split(",") if c.strip()]
    if not names:
        raise InputError(f"{text!r} names no column", "list covariates separated by commas, e.g. age,re74")
    return names


def group_size_argument(text: str) -> int | str:
    """``--group-size``: ``auto`` or a whole number of rows (``int`` raises ``ValueError``, which argparse reports).

    Here, not beside :func:`~collabcausal.estimators.discovery.subsample_vote.resolve_group_size`, so that
    ``--help`` imports no numerics (tests/test_cli.py).
    """
    return text if text == "auto" else int(text)
