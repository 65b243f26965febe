"""The registry of operations a party can perform.

Each operation is a function ``handler(party, request) -> reply`` registered under a name with
:func:`operation`. :meth:`collabcausal.party.node.Party.handle` looks the name up, lets the
party's policy allow or refuse it, runs it and records the release in the audit log. Modules that
define operations are imported by :mod:`collabcausal.party` so the registry is always complete.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from collabcausal.errors import ProtocolError
from collabcausal.messages import Message

if TYPE_CHECKING:
    from collabcausal.party.node import Party

Handler = Callable[["Party", Message], Message]


@dataclass(frozen=True)
class Operation:
    """A registered operation.

    Attributes
    ----------
    name : str
        Wire name, e.g. ``"dc_representation"``.
    handler : callable
        ``handler(party, request) -> reply``.
    private_data : bool
        True when the reply is computed from the party's private rows (always audited).
    differentially_private : bool
        True when the reply is a DP release charged to the party's ledger.
    """

    name: str
    handler: Handler
    private_data: bool = True
    differentially_private: bool = False


_REGISTRY: dict[str, Operation] = {}


def operation(
    name: str, *, private_data: bool = True, differentially_private: bool = False
) -> Callable[[Handler], Handler]:
    """Register ``handler`` as the party operation ``name`` (decorator)."""

    def register(handler: Handler) -> Handler:
        if name in _REGISTRY:
            raise RuntimeError(f"party operation {name!r} is registered twice")
        _REGISTRY[name] = Operation(name, handler, private_data, differentially_private)
        return handler

    return register


def lookup(name: str) -> Operation:
    """The operation called ``name``; a :class:`ProtocolError` for an unknown name."""
    try:
        return _REGISTRY[name]
    except KeyError:
        known = ", ".join(sorted(_REGISTRY))
        raise ProtocolError(f"unknown party operation {name!r}", f"use one of: {known}") from None


def registered(package: str | None = None) -> tuple[str, ...]:
    """Names of all registered operations, sorted; only those defined in ``package`` when given.

    A launched party process knows the operations of :mod:`collabcausal` only, so the launcher
    lists ``registered("collabcausal")``, not operations a caller registered in its own process.
    """
    return tuple(
        sorted(
            name for name, op in _REGISTRY.items() if package is None or op.handler.__module__.startswith(package + ".")
        )
    )
