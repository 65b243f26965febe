"""The one message type that roles exchange, whatever carries it.

A :class:`Message` is an operation name, JSON-serialisable parameters and named numpy arrays.
Requests (analyst -> party) and replies (party -> analyst) share the type, so the in-process
transport hands the object over and the gRPC transport serialises exactly these three fields.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np

from collabcausal.errors import ProtocolError


@dataclass(frozen=True)
class Message:
    """A request or a reply between analyst and party.

    Parameters
    ----------
    operation : str
        The operation's registered name (see :mod:`collabcausal.party.operations`).
    params : mapping
        JSON-serialisable scalars, strings, lists and dicts.
    arrays : mapping of str to numpy.ndarray
        Named numeric arrays (any shape, numeric dtype).
    """

    operation: str
    params: Mapping[str, Any] = field(default_factory=dict)
    arrays: Mapping[str, np.ndarray] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "params", MappingProxyType(dict(self.params)))
        object.__setattr__(self, "arrays", MappingProxyType(dict(self.arrays)))

    def array(self, name: str) -> np.ndarray:
        """The array called ``name``; a :class:`~collabcausal.errors.ProtocolError` if absent."""
        if name not in self.arrays:
            raise ProtocolError(
                f"message {self.operation!r} lacks the array {name!r}",
                "upgrade the sender so both sides speak the same protocol version",
            )
        return self.arrays[name]


def nesting(value: Any, max_depth: int) -> tuple[int, int]:
    """Nesting depth and longest container of JSON-like ``value``, walked level by level.

    Returns ``(depth, longest)``: the number of nested levels of mappings and lists (0 for a
    scalar, 1 for ``{"a": 1}``), counted up to ``max_depth + 1`` so that a hostile value nested
    100,000 deep costs no more than ``max_depth`` levels; and the largest number of items in
    one mapping or list among the levels walked. Iterative: no recursion limit to hit.
    """
    containers = (Mapping, list, tuple)
    level = [value] if isinstance(value, containers) else []
    depth = longest = 0
    while level and depth <= max_depth:
        depth += 1
        longest = max(longest, *(len(node) for node in level))
        children = (v for node in level for v in (node.values() if isinstance(node, Mapping) else node))
        level = [v for v in children if isinstance(v, containers) and not isinstance(v, str | bytes)]
    return depth, longest
