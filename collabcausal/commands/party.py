"""``collabcausal party ...``: the commands a data holder runs.

Each action is a module in :mod:`collabcausal.commands` named ``party_<action>`` with
``register(subparsers)``.
"""

from __future__ import annotations

import argparse
import importlib

PARTY_ACTIONS: tuple[str, ...] = ("audit", "budget", "init", "join")

DESCRIPTION = """\
The commands a data holder runs.

examples:
  collabcausal party init --out party.toml         # a commented party.toml to fill in
  collabcausal party join --config party.toml --check   # validate it, connect to nothing
  collabcausal party join --config party.toml      # serve a study
  collabcausal party budget --config party.toml    # privacy budget spent and left
  collabcausal party audit --config party.toml     # verify and summarise the audit log
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``party`` and its actions."""
    parser = subparsers.add_parser(
        "party",
        help="run a party node (data holder)",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    for name in PARTY_ACTIONS:
        importlib.import_module(f"collabcausal.commands.party_{name}").register(actions)
