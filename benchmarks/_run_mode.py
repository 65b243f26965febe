"""The command line every script in ``benchmarks/`` shares: a full run and a ``--quick`` one.

A full run (no ``--quick``) prints the figures the README and docs quote and exits 1 when a target
is missed. ``--quick`` is a run of seconds that the test suite makes (tests/test_benchmarks.py), so
that a change which breaks a script cannot land: small sizes, the same figures printed, the
script's own correctness checks kept (exit 1 when one fails), but no target of time or memory
judged (at a quick run's sizes those measure start-up, not the code).

A size option declares its full and its quick default once (:meth:`BenchmarkParser.add_size`); a
value given on the command line wins over both.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

QUICK_HELP = "a smoke run of seconds: small sizes, figures printed, checks kept, no time or memory target judged"


class BenchmarkParser(argparse.ArgumentParser):
    """An argument parser with ``--quick`` and size options that have a full and a quick default.

    Parameters
    ----------
    doc : str
        The script's description (its module docstring), shown by ``--help`` as written.
    """

    def __init__(self, doc: str | None) -> None:
        super().__init__(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
        self.add_argument("--quick", action="store_true", help=QUICK_HELP)
        self._sizes: dict[str, tuple[Any, Any]] = {}

    def add_size(self, *flags: str, full: Any, quick: Any, help: str = "", **kwargs: Any) -> None:
        """Add an option whose default is ``full``, or ``quick`` under ``--quick`` (``kwargs`` as ``add_argument``)."""
        action = self.add_argument(*flags, default=None, help=f"{help} (default {full}; --quick: {quick})".lstrip(),
                                   **kwargs)
        self._sizes[action.dest] = (full, quick)

    def parse_args(self, args: Sequence[str] | None = None, namespace: Any = None) -> argparse.Namespace:  # type: ignore[override]
        """Parse ``args``; each size option left unset takes its full or quick default."""
        parsed = super().parse_args(args, namespace)
        for dest, (full, quick) in self._sizes.items():
            if getattr(parsed, dest) is None:
                setattr(parsed, dest, quick if parsed.quick else full)
        return parsed


def verdict(met: bool, quick: bool) -> str:
    """How a time or memory target reads in the output: judged in a full run only."""
    if quick:
        return "not judged (--quick)"
    return "met" if met else "MISSED"


def target_ok(met: bool, quick: bool) -> bool:
    """Whether a time or memory target lets the run exit 0: always in a quick run, else when ``met``."""
    return quick or met
