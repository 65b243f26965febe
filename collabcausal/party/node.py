"""The party role: one data holder's node, independent of any transport.

A :class:`Party` owns its private table and answers :class:`~collabcausal.messages.Message`
requests through the operation registry. Whatever carries the request (an in-process call in a
simulation, a gRPC stream in a deployment) ends in :meth:`Party.handle`, so policy, ledger and
audit log apply identically in both.
"""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np

from collabcausal.errors import CollabCausalError, PolicyError
from collabcausal.messages import Message
from collabcausal.party.chunked_table import ChunkedTable
from collabcausal.party.operations import Operation, lookup, registered
from collabcausal.party.request_state import RequestState
from collabcausal.party.table import PartyTable


class Policy(Protocol):
    """What a party allows; see :mod:`collabcausal.party.policy`."""

    def authorize(self, party: Party, op: Operation, request: Message) -> None:
        """Return if ``request`` is allowed, raise :class:`~collabcausal.errors.PolicyError` if not."""


class AuditLog(Protocol):
    """Where a party records every request, release and refusal; see :mod:`collabcausal.party.audit`."""

    def received(self, party: Party, request: Message) -> None:
        """Append a request as it arrives."""

    def released(self, party: Party, request: Message, reply: Message, *, charges: Any = ()) -> None:
        """Append a release (before the reply leaves the party) with the ledger charges it made."""

    def refused(self, party: Party, request: Message, error: BaseException, *, charges: Any = ()) -> None:
        """Append a refusal or failure with any charge made before it."""


class Party:
    """A data holder answering an analyst's requests on its own private table.

    Parameters
    ----------
    name : str
        The party's identity on the study roster, e.g. ``"hospital-a"`` or ``"p1-1"``.
    table : PartyTable or ChunkedTable
        The validated private table, in memory or read out of core
        (:class:`~collabcausal.party.chunked_table.ChunkedTable`: only operations registered
        ``out_of_core`` answer from it).
    policy : Policy, optional
        What the party allows; ``None`` allows every registered operation (simulations).
    ledger : optional
        The party's privacy ledger (:class:`collabcausal.ledger.PrivacyLedger`), charged by
        differentially private operations; ``None`` refuses them.
    audit : AuditLog, optional
        Where every request, release and refusal is recorded; ``None`` records nothing (simulations).
    anchor_key : bytes, optional
        The study's anchor key, shared by the parties and never by the analyst
        (:mod:`collabcausal.party.anchor`); ``None`` refuses ``dc_representation``.
    reducer_factory : callable, optional
        ``reducer_factory(n_components) -> transformer`` with sklearn's ``fit``/``transform``;
        defaults to :class:`collabcausal.party.reducer.StandardizedPCA`. The fitted reducer
        never leaves the party.
    secagg_identity : optional
        Its study certificate's signer and the study CA's verifier
        (:class:`collabcausal.party.secagg.Identity`); ``None`` refuses secure aggregation.
    study : str, optional
        The study the party joined (``[party] study``): :meth:`handle` refuses a request naming
        another. ``""`` (simulations) binds none; the party's request counts are then kept under
        the one study ``""``, so renaming the study resets nothing either.
    requests : RequestState, optional
        Where the party's request counts and differencing history are kept
        (:mod:`collabcausal.party.request_state`); by default in memory, for the object's life.
    """

    def __init__(
        self,
        name: str,
        table: PartyTable | ChunkedTable,
        *,
        policy: Policy | None = None,
        ledger: Any = None,
        audit: AuditLog | None = None,
        anchor_key: bytes | None = None,
        reducer_factory: Callable[[int | float], Any] | None = None,
        secagg_identity: Any = None,
        study: str = "",
        requests: RequestState | None = None,
    ) -> None:
        self.name = name
        self.table = table
        self.policy = policy
        self.ledger = ledger
        self.audit = audit
        self.anchor_key = anchor_key
        self.reducer_factory = reducer_factory
        self.secagg_identity = secagg_identity
        self.secagg_rounds: OrderedDict[str, Any] = OrderedDict()  # round id -> RoundKey; None: closed
        self.vertical_rounds: OrderedDict[str, Any] = OrderedDict()  # round id -> vertical KeyRound; None: closed
        self.vertical_evaluations: OrderedDict[str, Any] = OrderedDict()  # round id -> Evaluation; None: done
        self.study = study
        self.requests = RequestState() if requests is None else requests

    def handle(self, request: Message) -> Message:
        """Log, authorize, run and audit one request; return the reply.

        Raises
        ------
        ProtocolError
            Unknown operation or malformed request.
        InputError
            A request parameter the operation does not apply (it declares the ones it does:
            :meth:`~collabcausal.party.operations.Operation.check_parameters`), refused before the policy,
            the ledger or any row is read; or a malformed request.
        PolicyError, BudgetExceededError
            The party's policy or ledger refuses the request.

        A differentially private request may carry an idempotency key ``params["request_id"]``:
        once charged, the same key returns the recorded reply (same numbers, no new charge).
        """
        if self.audit is not None:
            self.audit.received(self, request)
        last_charge: int | None = None
        try:
            op = lookup(request.operation)
            op.check_parameters(request)
            self._check_study(request)
            if not op.runs_on(self.table):
                raise PolicyError(
                    f"party {self.name} reads its table {self.table.source} out of core, and {op.name} needs it in "
                    "memory",
                    f"ask for {', '.join(n for n in registered() if lookup(n).runs_on(self.table))}, or give the "
                    "party a table that fits in memory (one file)",
                )
            if op.differentially_private and self.audit is not None:
                last_charge = _last_charge(self.ledger)
            if self.policy is not None:
                self.policy.authorize(self, op, request)
            request_id = request.params.get("request_id") if op.differentially_private else None
            if request_id is not None and self.ledger is not None:
                reply = self._run_once(op, request, request_id)
            else:
                reply = op.handler(self, request)
        except Exception as exc:
            if self.audit is not None:
                self.audit.refused(self, request, exc, charges=_charges_after(self.ledger, last_charge))
            if op_is_private(request) and not isinstance(exc, CollabCausalError):
                raise CollabCausalError(
                    f"{request.operation} failed ({type(exc).__name__}; its message stays in the party's audit log, "
                    "as it may be computed from the private rows)",
                    "the party's operator reads the audit log; a retry is a new request, charged if it runs",
                ) from exc
            raise
        if self.audit is not None:
            self.audit.released(self, request, reply, charges=_charges_after(self.ledger, last_charge))
        return reply

    def _check_study(self, request: Message) -> None:
        """Refuse a request naming a study other than the one this party joined (issue 22, item 1).

        The study keys the party's request limits and its ledger charges: a coordinator renaming
        the study would otherwise reset the first and split the second.
        """
        named = request.params.get("study")
        if self.study and named is not None and str(named) != self.study:
            raise PolicyError(
                f"request names study {str(named)!r} but party {self.name} joined study {self.study!r}",
                "the analyst must run the study this party joined, or the party's operator changes [party] study",
            )

    def _run_once(self, op: Operation, request: Message, request_id: Any) -> Message:
        """Run a DP request with an idempotency key: a retry gets the recorded reply, uncharged."""
        fingerprint = request_fingerprint(request)
        recorded = self.ledger.recorded_outcome(request_id, fingerprint)
        if recorded is not None:
            return recorded
        with self.ledger.request(request_id, fingerprint):
            try:
                reply = op.handler(self, request)
            except CollabCausalError as exc:
                self.ledger.record_outcome(exc)
                raise
            self.ledger.record_outcome(reply)
        return reply

    def __repr__(self) -> str:
        return f"Party({self.name!r}, n={self.table.n_subjects}, columns={list(self.table.covariate_names)})"


def op_is_private(request: Message) -> bool:
    """True for a registered differentially private operation.

    Its only output about the rows is the noisy release: an unexpected error (a bug, a numerical
    failure on the values) must not carry a message computed from them, so :meth:`Party.handle`
    replaces it by one naming the operation and the error class.
    """
    try:
        return lookup(request.operation).differentially_private
    except CollabCausalError:
        return False


def _last_charge(ledger: Any) -> int:
    """Id of the ledger's latest charge (0 without a ledger or charges): one indexed read, not the history."""
    return 0 if ledger is None else ledger.last_charge_id()


def _charges_after(ledger: Any, last: int | None) -> list[Any]:
    """Charges the ledger recorded after charge ``last`` (those the current DP request made)."""
    return [] if ledger is None or last is None else ledger.history(after=last)


_CANONICAL_JSON = json.JSONEncoder(sort_keys=True, default=str)
"""The canonical JSON of :func:`request_fingerprint` (``json.dumps`` with sorted keys), built once."""


def request_fingerprint(request: Message) -> str:
    """SHA-256 of a request's operation, parameters (but its ``request_id``) and arrays."""
    params = {k: v for k, v in request.params.items() if k != "request_id"}
    digest = hashlib.sha256(_CANONICAL_JSON.encode([request.operation, params]).encode())
    for name in sorted(request.arrays):
        array = np.ascontiguousarray(request.arrays[name])
        digest.update(f"{name}:{array.dtype.str}:{array.shape}".encode())
        digest.update(array.tobytes())
    return digest.hexdigest()
