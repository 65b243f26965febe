"""``collabcausal discover``: the private ANM direction between two columns of a local file (paper 002).

Examples
--------
HSIC score, test-set privacy at epsilon 1, charged to ``cohort.csv.ledger.sqlite`` (budget 3)::

    collabcausal discover --data cohort.csv --x dose --y response --score hsic --epsilon 1 --budget 3

Every row protected (HSIC only; needs public bounds)::

    collabcausal discover --data cohort.csv --x dose --y response --protect both \\
        --x-bounds 0 100 --y-bounds -5 5 --regularization 1 --epsilon 1 --budget 3

The ledger (default: ``<data file>.ledger.sqlite`` next to the data, dataset = the data file's
name) is charged BEFORE the scores are computed, so repeated runs add up and are refused once the
budget is spent. ``--budget`` sets (or resets) the budget; without it an existing ledger's stored
budget is used. With ``--protect test`` (the default, paper 002 section 4) only the test split's
rows are protected; the training rows are not (see docs/causal-discovery.md).
"""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from pathlib import Path

from collabcausal.errors import InputError
from collabcausal.estimators.discovery.private_scores import PROTECTIONS, PrivateDiscovery
from collabcausal.party.discovery import DiscoveryRequest, discover
from collabcausal.party.ledger import PrivacyLedger
from collabcausal.party.table import PartyTable, read_table_file

SCORES = tuple(score for score, protections in PROTECTIONS.items() if protections)


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``discover`` parser."""
    p = subparsers.add_parser(
        "discover",
        help="private cause-effect direction between two columns (additive noise model, paper 002)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--data", required=True, type=Path, metavar="FILE", help="a CSV or Parquet file")
    p.add_argument("--x", required=True, metavar="COL", help="first column")
    p.add_argument("--y", required=True, metavar="COL", help="second column")
    p.add_argument("--score", choices=SCORES, default="hsic", help="dependence score (default hsic)")
    p.add_argument("--epsilon", required=True, type=float, help="privacy cost of this release")
    p.add_argument("--delta", type=float, default=0.0, help="delta (iqr and --protect train ranks need > 0)")
    p.add_argument("--protect", choices=("test", "train", "both"), default="test", help="rows protected")
    p.add_argument("--x-bounds", nargs=2, type=float, metavar=("LO", "HI"), help="public bounds of --x")
    p.add_argument("--y-bounds", nargs=2, type=float, metavar=("LO", "HI"), help="public bounds of --y")
    p.add_argument("--regularization", type=float, default=1e-3, help="KRR lambda in (0, 1] (default 1e-3)")
    p.add_argument("--test-size", type=float, default=0.5, help="test fraction (default 0.5)")
    p.add_argument("--ledger", type=Path, help="ledger file (default: <data>.ledger.sqlite)")
    p.add_argument("--budget", type=float, help="total epsilon of the dataset in the ledger")
    p.add_argument("--budget-delta", type=float, default=0.0, help="total delta of the dataset (default 0)")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Charge the ledger, release, print; return 0."""
    request = DiscoveryRequest(
        epsilon=args.epsilon,
        score=args.score,
        protect=args.protect,
        delta=args.delta,
        x_bounds=None if args.x_bounds is None else tuple(args.x_bounds),
        y_bounds=None if args.y_bounds is None else tuple(args.y_bounds),
        regularization=args.regularization,
        test_size=args.test_size,
    ).checked()
    table = PartyTable.from_frame(read_table_file(args.data), [args.x, args.y], source=str(args.data))
    x, y = table.column(args.x), table.column(args.y)
    ledger = open_ledger(args)
    result = discover(ledger, x, y, request, columns=(args.x, args.y))
    remaining = ledger.remaining()
    if args.json:
        print(json.dumps({**asdict(result), "x": args.x, "y": args.y, "remaining_budget": list(remaining)}))
    else:
        print(format_result(result, args.x, args.y, remaining))
    return 0


def default_ledger_path(data: Path) -> Path:
    """``<data file>.ledger.sqlite`` in the data file's folder."""
    return data.with_name(data.name + ".ledger.sqlite")


def open_ledger(args: argparse.Namespace) -> PrivacyLedger:
    """The ledger named by ``--ledger`` (or next to the data), with ``--budget`` or its stored budget."""
    path = args.ledger if args.ledger is not None else default_ledger_path(args.data)
    dataset = args.data.name
    if args.budget is not None:
        return PrivacyLedger(path, epsilon=args.budget, delta=args.budget_delta, dataset=dataset)
    if not Path(path).is_file():
        raise InputError(f"no ledger at {path} and no --budget", "pass --budget EPSILON to create it")
    return PrivacyLedger.from_file(path, dataset)


def format_result(result: PrivateDiscovery, x: str, y: str, remaining: tuple[float, float]) -> str:
    """A short text report."""
    arrow = f"{x} -> {y}" if result.direction == "x->y" else f"{y} -> {x}"
    protected = {"test": "the test split's rows only", "train": "the training split's rows only"}
    lines = [
        f"direction: {arrow}",
        f"private {result.score} scores: s({x}->{y}) = {result.score_xy:.6g}, s({y}->{x}) = {result.score_yx:.6g}",
        f"P(private decision = non-private decision) >= {result.agreement:.3f} (95% lower confidence bound)",
        f"privacy: epsilon={result.epsilon:g}, delta={result.delta:g}, protecting "
        f"{protected.get(result.protect, 'every row')} (m={result.m_test} test, n={result.n_train} training)",
        f"budget left: epsilon={remaining[0]:g}, delta={remaining[1]:g}",
    ]
    return "\n".join(lines)
