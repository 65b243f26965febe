"""``collabcausal party budget``: a party's privacy budget, what is spent and left, and the audit trail.

Reads the ledger named on the command line (``--ledger``) or in the ``[privacy]`` section of the
party's config (``--config party.toml``, key ``ledger``, relative to the config's folder). Opens it
read-only in spirit: nothing is charged. ``--migrate`` converts a ledger written by an older
version (format 1, whose totals mixed two neighbouring relations) once, in place. A party whose
ledger does not exist yet (``--config``) has spent nothing, or has no ``[privacy]`` section and
answers no DP query: it is told so, exit 0. With ``--config`` it also prints the party's effective
guarantee, the weakest thing it answers (:func:`~collabcausal.party.policy.effective_guarantee`):
"none" when its policy lets it answer an exact row-level operation beside its DP ones.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from collabcausal.errors import ConfigError, InputError

if TYPE_CHECKING:
    from collabcausal.ledger import PrivacyLedger

DESCRIPTION = """\
Show a party's privacy budget: the total, what is spent, what is left, and every charge (the
audit trail). Reads the ledger given with --ledger, or the one named by the [privacy] ledger key
of party.toml (relative to party.toml's folder). Nothing is charged. --migrate converts, once and
in place, a ledger written by an older version (format 1, whose totals mixed two neighbouring
relations). A party that has spent nothing yet (no ledger), or has no [privacy] section, is told
so. With --config it prints the party's effective guarantee: "none" when its policy answers an
exact row-level operation (dc_representation, weighted_moments) beside its DP ones.

examples:
  collabcausal party budget --config party.toml
  collabcausal party budget --ledger hospital-a.ledger.sqlite --dataset hospital-a.csv --json
  collabcausal party budget --ledger old.ledger.sqlite --migrate
"""


def register(actions: argparse._SubParsersAction) -> None:
    """Add the ``budget`` action to the ``party`` group."""
    parser = actions.add_parser(
        "budget",
        help="show spent and remaining privacy budget",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--ledger", type=Path, help="the ledger file")
    source.add_argument("--config", type=Path, help="party.toml whose [privacy] section names the ledger")
    parser.add_argument("--dataset", help="only this dataset (default: every dataset in the ledger)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")
    parser.add_argument(
        "--migrate",
        action="store_true",
        help="convert an old-format ledger to the substitution-only format first (add/remove costs doubled)",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Print the budget report; return 0."""
    from collabcausal.ledger import PrivacyLedger, ledger_budgets, migrate_ledger

    path = args.ledger if args.ledger is not None else ledger_path_from_config(args.config)
    guarantee = None if args.config is None else guarantee_from_config(args.config)
    if args.ledger is None and not Path(path).is_file():
        print("[]" if args.json else f"{_nothing_spent(args.config, path)}\neffective guarantee: {guarantee}")
        return 0
    if not Path(path).is_file():
        raise InputError(f"ledger {path} does not exist", "check the path (a ledger is created by the first charge)")
    if args.migrate:
        print(f"migrated {migrate_ledger(path)} charges of {path}", file=sys.stderr)
    names = [args.dataset] if args.dataset else sorted(ledger_budgets(path))
    report = [_dataset_report(PrivacyLedger.from_file(path, name)) for name in names]
    if guarantee is not None:
        report = [entry | {"guarantee": guarantee} for entry in report]
    if args.json:
        json.dump(report, sys.stdout, indent=2)
        print()
    else:
        for entry in report:
            print(_format(entry))
    return 0


def ledger_path_from_config(config: Path) -> Path:
    """The ledger of a party config: ``[privacy] ledger``, else the default next to ``[data] path``."""
    from collabcausal.config_schema import read_toml
    from collabcausal.ledger import default_ledger_location

    data = read_toml(config)
    ledger = data.get("privacy", {}).get("ledger")
    source = data.get("data", {}).get("path")
    if isinstance(ledger, str):
        return (Path(config).parent / ledger).resolve()
    if isinstance(source, str):
        return default_ledger_location((Path(config).parent / source).resolve())[0]
    raise ConfigError(f"{config} names neither a [privacy] ledger nor a [data] path", "add ledger = ... to [privacy]")


def guarantee_from_config(config: Path) -> str:
    """The party's effective guarantee (:func:`collabcausal.party.policy.effective_guarantee`) from ``config``."""
    from collabcausal.config_schema import read_toml
    from collabcausal.party.policy import effective_guarantee

    doc = read_toml(config)
    policy, privacy = doc.get("policy", {}), doc.get("privacy")
    return effective_guarantee(
        policy.get("operations", []),
        allow_plain_with_dp=bool(policy.get("allow_plain_with_dp", False)),
        epsilon=None if privacy is None else float(privacy.get("epsilon", 0.0)),
        delta=0.0 if privacy is None else float(privacy.get("delta", 0.0)),
    )


def _nothing_spent(config: Path, ledger: Path) -> str:
    """What a party whose ledger does not exist yet has spent: nothing (a ledger starts at the first charge)."""
    from collabcausal.config_schema import read_toml

    doc = read_toml(config)
    name = doc.get("party", {}).get("name", str(config))
    privacy = doc.get("privacy")
    if privacy is None:
        return f"party {name} has no [privacy] section: it answers no DP query (and no ledger at {ledger})"
    budget = f"epsilon={privacy.get('epsilon', 0):.6g}, delta={privacy.get('delta', 0.0):.3g}"
    return (
        f"party {name} has spent nothing: no DP release yet (budget {budget}; its ledger {ledger} "
        "is created by the first charge)"
    )


def _dataset_report(ledger: PrivacyLedger) -> dict:
    spent, remaining = ledger.spent(), ledger.remaining()
    return {
        "dataset": ledger.dataset,
        "relation": ledger.relation,
        "budget": {"epsilon": ledger.epsilon, "delta": ledger.delta},
        "spent": {"epsilon": spent[0], "delta": spent[1]},
        "remaining": {"epsilon": remaining[0], "delta": remaining[1]},
        "charges": [
            {
                "id": c.id,
                "time": c.time,
                "study": c.study,
                "operation": c.operation,
                "epsilon": c.epsilon,
                "delta": c.delta,
                "rho": c.rho,
                "partition": c.partition,
                "subset": c.subset,
                "details": dict(c.details),
            }
            for c in ledger.history()
        ],
    }


def _format(entry: dict) -> str:
    b, s, r = entry["budget"], entry["spent"], entry["remaining"]
    lines = [
        f"dataset {entry['dataset']} (neighbouring relation: {entry['relation']})",
        f"  budget     epsilon={b['epsilon']:.6g}  delta={b['delta']:.3g}",
        f"  spent      epsilon={s['epsilon']:.6g}  delta={s['delta']:.3g}",
        f"  remaining  epsilon={r['epsilon']:.6g}  delta={r['delta']:.3g}",
        *([f"  effective guarantee: {entry['guarantee']}"] if "guarantee" in entry else []),
        f"  audit trail ({len(entry['charges'])} charges):",
    ]
    for c in entry["charges"]:
        parallel = f" parallel {c['partition']}/{c['subset']}" if c["partition"] is not None else ""
        cost = (f"epsilon={c['epsilon']:.6g}" if c["rho"] is None
                else f"zCDP rho={c['rho']:.6g} (alone epsilon={c['epsilon']:.6g}; zCDP charges compose by rho)")
        lines.append(
            f"    #{c['id']} {c['time']} study={c['study'] or '-'} {c['operation']} "
            f"{cost} delta={c['delta']:.3g}{parallel} {json.dumps(c['details'], sort_keys=True)}"
        )
    return "\n".join(lines)
