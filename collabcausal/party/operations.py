"""The registry of operations a party can perform.

Each operation is a function ``handler(party, request) -> reply`` registered under a name with
:func:`operation`. :meth:`collabcausal.party.node.Party.handle` looks the name up, lets the
party's policy allow or refuse it, runs it and records the release in the audit log. Modules that
define operations are imported by :mod:`collabcausal.party` so the registry is always complete.

The registry is also the one place that says what kind of release each operation is: a
differentially private one (``differentially_private``: noisy, charged to the ledger) or an exact
row-level one (``exact_rows``: an exact function of the rows' covariate values, e.g. a DC-QE
representation or weighted moments). The policy's rule that the two may not be answered on the
same columns (:mod:`collabcausal.party.policy`) and the effective guarantee a party prints read
these flags, nothing else.

It is also where each operation declares the request parameters it applies (``parameters``):
:meth:`collabcausal.party.node.Party.handle` refuses a request carrying any other
(:meth:`Operation.check_parameters`) before its policy, its ledger or any row is read, so an option
the party would not apply (a newer coordinator's field, a misspelling, a claimed ``sensitivity``) is
never silently ignored. Every operation also accepts :data:`ALWAYS_ACCEPTED`, and a differentially
private one :data:`IDEMPOTENCY_KEY`, which ``Party.handle`` reads itself.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from collabcausal.errors import InputError, ProtocolError
from collabcausal.messages import Message

Handler = Callable[[Any, Message], Message]
"""``handler(party, request) -> reply``; the party is a :class:`collabcausal.party.node.Party`, which
imports this registry (so the registry does not import it back)."""

ALWAYS_ACCEPTED = frozenset({"study"})
"""Request parameters every operation accepts: :meth:`~collabcausal.party.node.Party.handle` checks ``study``
against the study the party joined, and the audit log and the ledger record it."""

IDEMPOTENCY_KEY = "request_id"
"""The request parameter every differentially private operation accepts: ``Party.handle``'s idempotency key (a
retry gets the recorded reply, uncharged); no other operation is charged, so none applies it."""


@dataclass(frozen=True)
class Operation:
    """A registered operation.

    Attributes
    ----------
    name : str
        Wire name, e.g. ``"dc_representation"``.
    handler : callable
        ``handler(party, request) -> reply``.
    parameters : frozenset of str
        The request parameters the operation applies, :data:`ALWAYS_ACCEPTED` and (DP) :data:`IDEMPOTENCY_KEY`
        included: a request carrying any other is refused (:meth:`check_parameters`).
    private_data : bool
        True when the reply is computed from the party's private rows (always audited).
    differentially_private : bool
        True when the reply is a DP release charged to the party's ledger.
    exact_rows : bool
        True when the reply is an exact (noise-free) function of the rows' covariate values: beside
        a DP operation on the same columns it voids the DP guarantee.
    out_of_core : bool
        True when the handler reads the rows only through ``reduce_rows`` / ``project_rows``, so it
        runs on a table read out of core (:mod:`collabcausal.party.chunked_table`); an operation that
        reads no rows (``private_data=False``) runs on one too.
    """

    name: str
    handler: Handler
    parameters: frozenset[str]
    private_data: bool = True
    differentially_private: bool = False
    exact_rows: bool = False
    out_of_core: bool = False

    def runs_on(self, table: Any) -> bool:
        """True when the operation can answer from ``table`` (any table in memory)."""
        return table.in_memory or self.out_of_core or not self.private_data

    def check_parameters(self, request: Message) -> None:
        """Refuse ``request`` if it carries a parameter this operation does not apply (a one-line :class:`InputError`
        naming it and the accepted ones); it reads the request only, so it runs before anything else."""
        unknown = sorted(str(key) for key in request.params if key not in self.parameters)
        if unknown:
            raise InputError(
                f"{self.name} request carries parameters this party does not apply: {', '.join(unknown)}",
                f"send only {', '.join(sorted(self.parameters))} (docs/protocol.md)",
            )


_REGISTRY: dict[str, Operation] = {}


def operation(
    name: str,
    *,
    parameters: Iterable[str],
    private_data: bool = True,
    differentially_private: bool = False,
    exact_rows: bool = False,
    out_of_core: bool = False,
) -> Callable[[Handler], Handler]:
    """Register ``handler`` as the party operation ``name`` (decorator).

    Parameters
    ----------
    name : str
        The operation's wire name.
    parameters : iterable of str
        The request parameters its handler (and every helper it passes them to) applies; :data:`ALWAYS_ACCEPTED`
        and, for a DP operation, :data:`IDEMPOTENCY_KEY` are added. Required: a request carrying any other key is
        refused before the policy, the ledger or a row is read.
    private_data, differentially_private, exact_rows, out_of_core : bool
        The release's kind (:class:`Operation`).
    """
    if isinstance(parameters, str):
        raise RuntimeError(f"party operation {name!r} declares its parameters as one string, not a set of names")
    accepted = frozenset(parameters) | ALWAYS_ACCEPTED | ({IDEMPOTENCY_KEY} if differentially_private else set())

    def register(handler: Handler) -> Handler:
        if name in _REGISTRY:
            raise RuntimeError(f"party operation {name!r} is registered twice")
        if exact_rows and differentially_private:
            raise RuntimeError(f"party operation {name!r} cannot be both exact row-level and DP")
        _REGISTRY[name] = Operation(name, handler, accepted, private_data, differentially_private, exact_rows,
                                    out_of_core)
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


def release_kinds(names: Iterable[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The DP and the exact row-level operations among ``names``, each sorted (unknown names skipped)."""
    known = [_REGISTRY[n] for n in set(names) if n in _REGISTRY]
    return (
        tuple(sorted(op.name for op in known if op.differentially_private)),
        tuple(sorted(op.name for op in known if op.exact_rows)),
    )
