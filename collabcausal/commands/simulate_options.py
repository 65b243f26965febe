"""Grid options that ``simulate`` and its study kinds (:mod:`collabcausal.commands.simulate_kinds`) parse alike.

Apart from both commands so that :mod:`collabcausal.commands.simulate` imports
:mod:`collabcausal.commands.simulate_kinds` and never the other way round.
"""

from __future__ import annotations

import argparse

from collabcausal.errors import InputError


def column_groups(args: argparse.Namespace) -> list[tuple[str, ...]] | None:
    """``--columns "a,b;c,d"``: the column groups, or None for the data set's own."""
    if not args.columns:
        return None
    return [tuple(c.strip() for c in g.split(",") if c.strip()) for g in args.columns.split(";")]


def parse_party_components(text: str) -> int | float:
    """``--party-components``: an int, or a variance fraction."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not ((value >= 1 and value.is_integer()) or 0 < value <= 1):
        raise InputError(
            f"--party-components {text} is neither a count >= 1 nor a variance fraction in (0, 1]",
            "pass an int like 3 or a fraction like 0.9",
        )
    return int(value) if value >= 1 else value
