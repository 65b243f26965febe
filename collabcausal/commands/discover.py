"""``collabcausal discover``: the private ANM direction between two columns (paper 002)."""

from __future__ import annotations

import argparse
import re
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

from collabcausal.errors import InputError
from collabcausal.strict_json import dumps

if TYPE_CHECKING:
    from collabcausal.estimators.discovery.decision import Decision
    from collabcausal.estimators.discovery.private_scores import PrivateDiscovery
    from collabcausal.ledger import PrivacyLedger
    from collabcausal.party.discovery import DiscoveryRequest

DESCRIPTION = """\
Which of two columns causes the other, under an additive noise model (paper 002), released with
differential privacy: from a local CSV or Parquet file (--data) or a party's own data (--config).

One budget per dataset: --config runs the request through the party (its [privacy] ledger and
policy); --data uses <data file>.ledger.sqlite with dataset = the data file's name, which is also
the ledger of a party whose [privacy] section names no ledger file for that data. The ledger is
charged BEFORE the scores are computed, so repeated runs add up and are refused once the budget is
spent. --budget sets (or resets) the budget; without it an existing ledger's stored budget is used.

--protect test or --protect train (paper 002, sections 4 and 5) protect one split only and treat
the other as public: NOT differentially private for the dataset, so nothing is charged and the
output says so (see docs/causal-discovery.md). --protect none (--data only) is the exact,
non-private test on your own file: HSIC independence tests of both directions' residuals.

A direction is named only when it is right with probability at least 0.95 (for a private release:
given its DP noise; for --protect none: exactly one direction's residuals pass the independence
test at level 0.05); otherwise the answer is "undecided", with the direction the margin favours.

examples:
  # every row protected (HSIC; public bounds), charged to examples/cohort/cohort.csv.ledger.sqlite (budget 3)
  collabcausal discover --data examples/cohort/cohort.csv --x dose --y response --x-bounds 0 100 --y-bounds -5 5 \\
      --regularization 1 --epsilon 1 --budget 3

  # the same release on a party's own data, charged to the party's ledger under its policy
  collabcausal discover --config party.toml --x dose --y response --x-bounds 0 100 --y-bounds -5 5 \\
      --regularization 1 --epsilon 1
"""

# The scores with a private release (the keys of private_scores.PROTECTIONS with a protection;
# a test keeps the two in step). Spelled out so that `discover --help` imports no numerics.
SCORES = ("spearman", "kendall", "hsic", "iqr")


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``discover`` parser."""
    p = subparsers.add_parser(
        "discover",
        help="private cause-effect direction between two columns (additive noise model, paper 002)",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--data", type=Path, metavar="FILE", help="a CSV or Parquet file")
    source.add_argument("--config", type=Path, metavar="TOML", help="a party.toml: its data, policy and ledger")
    p.add_argument("--x", required=True, metavar="COL", help="first column")
    p.add_argument("--y", required=True, metavar="COL", help="second column")
    p.add_argument("--score", choices=SCORES, default="hsic", help="dependence score (default hsic)")
    p.add_argument("--epsilon", required=True, type=float, help="privacy cost of this release")
    p.add_argument("--delta", type=float, default=0.0, help="delta (iqr and --protect train ranks need > 0)")
    p.add_argument(
        "--protect",
        choices=("both", "test", "train", "none"),
        default="both",
        help="rows protected (default both; test/train are not DP for the dataset and charge nothing; "
        "none: the exact, non-private test, --data only)",
    )
    p.add_argument("--x-bounds", nargs=2, type=float, metavar=("LO", "HI"), help="public bounds of --x")
    p.add_argument("--y-bounds", nargs=2, type=float, metavar=("LO", "HI"), help="public bounds of --y")
    p.add_argument("--regularization", type=float, default=1e-3, help="KRR lambda in (0, 1] (default 1e-3)")
    p.add_argument("--test-size", type=float, default=0.5, help="test fraction (default 0.5)")
    p.add_argument("--release", choices=("scores", "margin"), default="scores",
                   help="Laplace releases: both scores (default) or their margin alone, with less noise at the same "
                   "epsilon (docs/causal-discovery.md)")
    p.add_argument("--ledger", type=Path, help="ledger file (default: <data>.ledger.sqlite)")
    p.add_argument("--budget", type=float, help="total epsilon of the dataset in the ledger")
    p.add_argument("--budget-delta", type=float, default=0.0, help="total delta of the dataset (default 0)")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Charge the ledger (full protection only), release, print; return 0."""
    from collabcausal.party.discovery import DiscoveryRequest, discover, discover_unrecorded
    from collabcausal.party.table import PartyTable, read_table_file

    if args.protect == "none":
        return _run_exact(args)
    try:
        request = DiscoveryRequest(
            epsilon=args.epsilon,
            score=args.score,
            protect=args.protect,
            delta=args.delta,
            x_bounds=None if args.x_bounds is None else tuple(args.x_bounds),
            y_bounds=None if args.y_bounds is None else tuple(args.y_bounds),
            regularization=args.regularization,
            test_size=args.test_size,
            release=args.release,
        ).checked()
    except InputError as exc:
        fix = None if exc.fix is None else in_option_terms(exc.fix)
        raise InputError(in_option_terms(exc.problem), fix) from None
    if args.config is not None:
        result, remaining = _through_party(args, request)
    else:
        table = PartyTable.from_frame(read_table_file(args.data), [args.x, args.y], source=str(args.data))
        x, y = table.column(args.x), table.column(args.y)
        if request.protect == "both":
            ledger = open_ledger(args)
            result = discover(ledger, x, y, request, columns=(args.x, args.y))
            remaining = ledger.remaining()
        else:
            result, remaining = discover_unrecorded(x, y, request, columns=(args.x, args.y)), None
    if args.json:
        charged = None if remaining is None else list(remaining)
        decision = release_decision(result)
        print(dumps({**asdict(result), "x": args.x, "y": args.y, "charged": remaining is not None,
                     "remaining_budget": charged, "decision": decision.direction,
                     "probability": decision.probability}, indent=None))
    else:
        print(format_result(result, args.x, args.y, remaining))
    return 0


# The request's keywords (docs/protocol.md) and the options that set them here.
OPTIONS = {
    "test_size": "--test-size", "regularization": "--regularization", "delta": "--delta", "epsilon": "--epsilon",
    "x_bounds": "--x-bounds", "y_bounds": "--y-bounds", "protect": "--protect", "score": "--score",
}


def in_option_terms(text: str) -> str:
    """A request-validation message said in this command's options: ``protect='train'`` is
    ``--protect train``, ``send test_size = ...`` is ``pass --test-size ...``."""
    from collabcausal.party.discovery import OPERATION

    text = text.replace(f" of {OPERATION}", "").replace("send ", "pass ")
    text = re.sub(r" \(CLI: [^)]*\)", "", text)
    for keyword, option in OPTIONS.items():
        text = re.sub(rf"\b{keyword}\s*=\s*'?([^'\s,;]+)'?", rf"{option} \1", text)
        text = re.sub(rf"(?<![-\w]){keyword}\b", option, text)
    return text


def _through_party(args: argparse.Namespace, request: DiscoveryRequest) -> tuple[PrivateDiscovery, tuple[float, float]]:
    """Send the request to the party of ``--config`` (policy, ledger, audit log): one budget."""
    from collabcausal.estimators.discovery.private_scores import PrivateDiscovery
    from collabcausal.messages import Message
    from collabcausal.party.config import load_party_config
    from collabcausal.party.discovery import OPERATION
    from collabcausal.party.process_lock import PartyFilesLock

    if args.ledger is not None or args.budget is not None:
        raise InputError("--ledger and --budget do not go with --config", "the party's [privacy] section sets both")
    config = load_party_config(args.config)
    with PartyFilesLock(config.name, config.written_files()):  # not beside a running `party join`
        party = config.build_party()
        params = {**asdict(request), "columns": [args.x, args.y], "study": config.study}
        reply = party.handle(Message(OPERATION, params))
        return PrivateDiscovery(**reply.params), party.ledger.remaining()


def open_ledger(args: argparse.Namespace) -> PrivacyLedger:
    """The ledger named by ``--ledger`` (or next to the data), with ``--budget`` or its stored budget."""
    from collabcausal.ledger import PrivacyLedger, default_ledger_location

    path, dataset = default_ledger_location(args.data)
    if args.ledger is not None:
        path = args.ledger
    if args.budget is not None:
        return PrivacyLedger(path, epsilon=args.budget, delta=args.budget_delta, dataset=dataset)
    if not Path(path).is_file():
        raise InputError(f"no ledger at {path} and no --budget", "pass --budget EPSILON to create it")
    return PrivacyLedger.from_file(path, dataset)


def release_decision(result: PrivateDiscovery) -> Decision:
    """The direction of a release, or undecided, given its DP noise (``estimators.discovery.decision``)."""
    from collabcausal.estimators.discovery.decision import noisy_decision, release_probability

    margin = result.margin  # every answered release carries it: its scores' difference, or itself released
    return noisy_decision(margin, release_probability(margin, result.noise_scale, result.score, result.form))


def _run_exact(args: argparse.Namespace) -> int:
    """``--protect none``: the exact ANM and its HSIC independence tests on the user's own file (NOT private)."""
    from collabcausal.estimators.discovery.anm import AdditiveNoiseModel
    from collabcausal.estimators.discovery.decision import INDEPENDENCE_ALPHA, exact_decision
    from collabcausal.party.table import PartyTable, read_table_file

    if args.data is None:
        raise InputError("--protect none does not go with --config: a party releases only private scores",
                         "use --data on a file you may read, or --protect both")
    table = PartyTable.from_frame(read_table_file(args.data), [args.x, args.y], source=str(args.data))
    model = AdditiveNoiseModel(
        regularization=args.regularization,
        test_size=args.test_size,
        x_bounds=None if args.x_bounds is None else tuple(args.x_bounds),
        y_bounds=None if args.y_bounds is None else tuple(args.y_bounds),
        random_state=0,
    ).fit(table.column(args.x), table.column(args.y))
    scores, (p_xy, p_yx) = model.scores("hsic"), model.independence_pvalues()
    decision = exact_decision(model)
    if args.json:
        print(dumps({"protect": "none", "x": args.x, "y": args.y, "decision": decision.direction,
                     "favoured": decision.favoured, "score_xy": scores.score_xy, "score_yx": scores.score_yx,
                     "p_xy": p_xy, "p_yx": p_yx, "alpha": INDEPENDENCE_ALPHA, "m_test": model.m_test_,
                     "charged": False}, indent=None))
        return 0
    x, y = args.x, args.y
    print("\n".join([
        f"direction: {decision.label(x, y)}",
        f"exact hsic scores: s({x}->{y}) = {scores.score_xy:.6g}, s({y}->{x}) = {scores.score_yx:.6g}",
        f"independence of input and residual (HSIC test, gamma approximation): p({x}->{y}) = {p_xy:.3g}, "
        f"p({y}->{x}) = {p_yx:.3g}; a direction needs exactly one p above {INDEPENDENCE_ALPHA:g}",
        f"NOT private: exact scores and tests of every row (m={model.m_test_} test, n={model.n_train_} training); "
        "nothing charged",
    ]))
    return 0


def format_result(result: PrivateDiscovery, x: str, y: str, remaining: tuple[float, float] | None) -> str:
    """A short text report; a release charged to no ledger says it is not DP for the dataset."""
    other = {"test": "training", "train": "test"}
    if result.protect in other:
        privacy = (
            f"NOT differentially private for the dataset: epsilon={result.epsilon:g}, delta={result.delta:g} "
            f"protect the {result.protect} split's rows (m={result.m_test} test, n={result.n_train} training) and "
            f"the {other[result.protect]} split's rows enter unprotected; nothing charged"
        )
    else:
        privacy = (
            f"privacy: epsilon={result.epsilon:g}, delta={result.delta:g}, every row protected (substitution of one "
            f"row; m={result.m_test} test, n={result.n_train} training)"
        )
    released = (
        f"private {result.score} margin: s({y}->{x}) - s({x}->{y}) = {result.margin:.6g} (the scores are not released)"
        if result.form == "margin" else
        f"private {result.score} scores: s({x}->{y}) = {result.score_xy:.6g}, s({y}->{x}) = {result.score_yx:.6g}"
    )
    lines = [
        f"direction: {release_decision(result).label(x, y)} (given the DP noise)",
        released,
        f"P(private decision = non-private decision) >= {result.agreement:.3f} (95% lower confidence bound)",
        privacy,
    ]
    if remaining is not None:
        lines.append(f"budget left: epsilon={remaining[0]:g}, delta={remaining[1]:g}")
    return "\n".join(lines)
