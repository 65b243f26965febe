"""The ``collabcausal`` command.

Each subcommand lives in :mod:`collabcausal.commands` as a module with ``register(subparsers)``
that adds its parser and sets ``func`` (``func(args) -> int``). Errors derived from
:class:`~collabcausal.errors.CollabCausalError` are printed as one line on stderr and turned into
the class's exit code (table in :mod:`collabcausal.errors`).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from collabcausal import __version__
from collabcausal.errors import CollabCausalError

COMMAND_MODULES: tuple[str, ...] = ("simulate", "party", "certs", "analyst", "discover")


def build_parser() -> argparse.ArgumentParser:
    """The top-level parser with every subcommand registered."""
    parser = argparse.ArgumentParser(
        prog="collabcausal",
        description="Privacy-preserving causal inference across institutions.",
    )
    parser.add_argument("--version", action="version", version=f"collabcausal {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMAND_MODULES:
        importlib.import_module(f"collabcausal.commands.{name}").register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except CollabCausalError as exc:
        print(f"collabcausal: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("collabcausal: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
