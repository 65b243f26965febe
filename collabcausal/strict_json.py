"""Strict JSON for every file the project writes: undefined numbers become null, with a reason.

Python's :mod:`json` writes ``NaN``, ``Infinity`` and ``-Infinity`` by default: not JSON (RFC 8259),
refused by strict parsers and by ``JSON.parse`` in browsers. :func:`dumps` replaces every non-finite
number by ``null``, records why under the top-level ``"undefined"`` mapping (JSON path, keys joined
by ``/``, to reason), and then serialises with ``allow_nan=False``, so nothing non-strict can slip
through. A writer that knows why a value is undefined puts its own reason under ``"undefined"``
first (:func:`undefined_reasons`); the generic one says only ``NaN``, ``+inf`` or ``-inf``.
numpy scalars and arrays are written as the numbers and lists they hold.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

UNDEFINED = "undefined"
"""Top-level key of the mapping from the JSON path of each null-for-undefined number to its reason."""


def strict(value: Any, path: str = "") -> tuple[Any, dict[str, str]]:
    """``value`` with every non-finite float replaced by None, and ``{path: reason}`` of the replaced ones.

    Parameters
    ----------
    value : any
        Mappings, lists, tuples, numpy arrays and scalars, str, int, float, bool, None.
    path : str
        Where ``value`` sits in the document (keys and list positions joined by ``/``).
    """
    if hasattr(value, "tolist"):  # a numpy array or scalar (numpy is not imported: --help stays light)
        value = value.tolist()
    if isinstance(value, float) and not math.isfinite(value):
        return None, {path: "NaN" if math.isnan(value) else ("+inf" if value > 0 else "-inf")}
    reasons: dict[str, str] = {}
    if isinstance(value, Mapping):
        out = {}
        for key, item in value.items():
            out[key], found = strict(item, f"{path}/{key}" if path else str(key))
            reasons |= found
        return out, reasons
    if isinstance(value, list | tuple):
        items = []
        for i, item in enumerate(value):
            clean, found = strict(item, f"{path}/{i}" if path else str(i))
            items.append(clean)
            reasons |= found
        return items, reasons
    return value, reasons


def undefined_reasons(document: Mapping[str, Any]) -> dict[str, str]:
    """The reasons already recorded in ``document`` (its ``"undefined"`` mapping; empty when absent)."""
    return dict(document.get(UNDEFINED) or {})


def dumps(document: Any, *, indent: int | None = 2, sort_keys: bool = False) -> str:
    """Strict JSON text of ``document`` (module docstring); its undefined numbers are listed under ``"undefined"``.

    Raises
    ------
    ValueError
        ``document`` is not a mapping but holds an undefined number (there is nowhere to say why).
    """
    clean, reasons = strict(document)
    if reasons:
        if not isinstance(clean, dict):
            raise ValueError(f"undefined numbers at {sorted(reasons)} in a JSON document that is not an object")
        clean[UNDEFINED] = reasons | undefined_reasons(clean)
    return json.dumps(clean, indent=indent, sort_keys=sort_keys, allow_nan=False)


def write_json(path: str | Path, document: Any, *, indent: int | None = 2) -> Path:
    """Write :func:`dumps` of ``document`` (and a newline) to ``path``; return the path."""
    file = Path(path)
    file.write_text(dumps(document, indent=indent) + "\n")
    return file
