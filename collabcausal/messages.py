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
        from collabcausal.errors import ProtocolError

        if name not in self.arrays:
            raise ProtocolError(
                f"message {self.operation!r} lacks the array {name!r}",
                "upgrade the sender so both sides speak the same protocol version",
            )
        return self.arrays[name]
