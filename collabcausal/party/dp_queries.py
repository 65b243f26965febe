"""Party operations that release differentially private aggregates of the party's own rows.

Every release is epsilon-DP for the project's one neighbouring relation, substitution of one record
with n public (docs/differential-privacy.md). Every operation validates its request (names and
bounds only, no private data), charges the
party's :class:`~collabcausal.ledger.PrivacyLedger` (refusing when over budget), and only
then touches the table. Noise comes from OpenDP (:mod:`collabcausal.estimators.dp.mechanisms`);
the request can carry no seed. Clip counts are written to the charge's ledger entry, never sent.

Requests (``Message.params``); every one takes ``epsilon`` (> 0) and ``study`` (str):

===============  ============================================================================
operation        parameters and reply
===============  ============================================================================
dp_count         ``by_arm`` (bool). Reply ``counts`` (1, arms).
dp_sum           ``sums``. Reply ``sums`` (columns,): all of epsilon on the sums.
dp_mean          ``sums``. eps/2 count, eps/2 sums. Reply ``count`` (1,), ``sums``, ``means``
                 (columns,); means = clip(S / max(C, 1), bounds).
dp_histogram     ``partition`` (a :meth:`Partition.to_spec`), ``by_arm``, optional ``sums``.
                 Reply ``counts`` (cells, arms) and ``sums`` (cells, arms, columns): paper 001,
                 Algorithm 1, lines 5-6, for one party's rows.
dp_range         ``columns``, ``bounds`` (one public coarse (lo, hi) per column),
                 ``quantiles`` (default (0.025, 0.975)). Reply ``ranges`` (columns, quantiles).
===============  ============================================================================

``sums`` is a list of ``{"column": name, "bounds": [lo, hi]}``; ``name`` is a covariate of the
table or :data:`~collabcausal.estimators.dp.aggregates.OUTCOME` (``"@outcome"``). Arms (and
``"@outcome"``) need a label-holding party. Every covariate a request reads (partition, sums)
must be listed in ``columns``, the list the party's policy checks (:func:`referenced_columns`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from collabcausal.errors import InputError, PolicyError
from collabcausal.estimators.dp.aggregates import OUTCOME, noisy_aggregates, sum_sensitivity
from collabcausal.estimators.dp.mechanisms import check_quantiles, clip, dp_quantiles, laplace, quantile_candidates
from collabcausal.estimators.dp.partitions import Partition, partition_from_spec
from collabcausal.estimators.validation import check_bounds, check_epsilon, refuse_unknown_keys
from collabcausal.ledger import Charge
from collabcausal.messages import Message
from collabcausal.party.operations import operation

if TYPE_CHECKING:
    from collabcausal.party.node import Party

DEFAULT_RANGE_QUANTILES = (0.025, 0.975)
QUERY_PARAMETERS = frozenset({"epsilon", "columns"})
"""The parameters every query applies (:func:`_admit`, :func:`_charge`); each adds its own (module docstring)."""
SUM_KEYS = frozenset({"column", "bounds"})
"""The keys of one entry of ``sums``: an entry carrying any other is refused (:func:`_sum_specs`)."""


def referenced_columns(request: Message) -> list[str]:
    """Covariate names a DP request reads (partition and summed columns), without duplicates.

    Every one must also be declared in ``params["columns"]``, which the party's policy checks
    (:class:`collabcausal.party.policy.PartyPolicy`); a request that reads an undeclared column
    is refused before anything is charged.
    """
    params = request.params
    names: list[str] = []
    spec = params.get("partition")
    if isinstance(spec, Mapping):
        names += [str(c) for c in spec.get("columns", [])]
    names += [str(s.get("column")) for s in params.get("sums", []) if isinstance(s, Mapping)]
    return [c for i, c in enumerate(names) if c != OUTCOME and c not in names[:i]]


def _check_declared(request: Message) -> None:
    declared = request.params.get("columns", [])
    declared = {str(c) for c in (declared if isinstance(declared, list) else [declared])}
    hidden = [c for c in referenced_columns(request) if c not in declared]
    if hidden:
        raise InputError(
            f"{request.operation} reads column {hidden[0]!r} but does not declare it in params['columns']",
            "list every covariate the request reads in columns=[...] (the party's policy checks that list)",
        )


@operation("dp_count", parameters=QUERY_PARAMETERS | {"by_arm"}, differentially_private=True)
def dp_count(party: Party, request: Message) -> Message:
    """Noisy number of rows (per arm with ``by_arm``): discrete Laplace, L1 sensitivity 2 (substitution)."""
    eps = _admit(request)
    arms = _arms(party, request)
    _charge(party, request, eps)
    cells = np.zeros(party.table.n_subjects, dtype=np.int64)
    result = noisy_aggregates(cells, 1, eps, arms=arms)
    return Message(request.operation, {"epsilon": eps}, {"counts": result.counts})


@operation("dp_sum", parameters=QUERY_PARAMETERS | {"sums"}, differentially_private=True)
def dp_sum(party: Party, request: Message) -> Message:
    """Noisy sums of clipped columns: Laplace with L1 sensitivity ``sum_j (hi_j - lo_j)`` (substitution)."""
    eps = _admit(request)
    names, bounds = _sums(party, request)
    charge = _charge(party, request, eps)
    clipped = [clip(_values(party, name), *b) for name, b in zip(names, bounds, strict=True)]
    sums = laplace(np.array([v.sum() for v, _ in clipped]), sum_sensitivity(bounds), eps)
    annotate_clipping(party, charge, names, [n for _, n in clipped])
    return Message(request.operation, {"epsilon": eps}, {"sums": sums})


@operation("dp_mean", parameters=QUERY_PARAMETERS | {"sums"}, differentially_private=True)
def dp_mean(party: Party, request: Message) -> Message:
    """Noisy count and sums (eps/2 each), and their post-processed ratio clipped to the bounds."""
    eps = _admit(request)
    names, bounds = _sums(party, request)
    charge = _charge(party, request, eps)
    values = np.column_stack([_values(party, name) for name in names])
    result = noisy_aggregates(np.zeros(values.shape[0], dtype=np.int64), 1, eps, values=values, bounds=bounds)
    annotate_clipping(party, charge, names, result.n_clipped)
    count, sums = result.counts[0, 0], result.sums[0, 0]
    box = np.array(bounds)
    means = np.clip(sums / max(count, 1.0), box[:, 0], box[:, 1])
    return Message(request.operation, {"epsilon": eps}, {"count": np.array([count]), "sums": sums, "means": means})


@operation("dp_histogram", parameters=QUERY_PARAMETERS | {"partition", "by_arm", "sums"},
           differentially_private=True)
def dp_histogram(party: Party, request: Message) -> Message:
    """Noisy counts (and sums) per cell of a public partition, per arm with ``by_arm``.

    Each subject is in one (cell, arm): epsilon covers the whole histogram (parallel composition).
    """
    eps = _admit(request)
    partition = _partition(request)
    names, bounds = _sum_specs(request, required=False)  # both specifications checked before any column is read
    for name in partition.columns:
        party.table.column(name)  # covariates only: the cells are read from the table's columns
    arms = _arms(party, request)
    _check_values(party, names)
    charge = _charge(party, request, eps, n_cells=partition.n_cells)
    cells = partition.assign(np.column_stack([party.table.column(c) for c in partition.columns]))
    values = np.column_stack([_values(party, name) for name in names]) if names else None
    result = noisy_aggregates(cells, partition.n_cells, eps, arms=arms, values=values, bounds=bounds)
    annotate_clipping(party, charge, names, result.n_clipped)
    return Message(request.operation, {"epsilon": eps}, {"counts": result.counts, "sums": result.sums})


@operation("dp_range", parameters=QUERY_PARAMETERS | {"bounds", "quantiles"}, differentially_private=True)
def dp_range(party: Party, request: Message) -> Message:
    """DP quantiles of each column within public coarse bounds (e.g. anchor ranges for DC-QE).

    Epsilon is split evenly across columns, then across quantiles (basic composition); each
    quantile is calibrated for substitution (symmetric distance 2).
    """
    eps = _admit(request)
    names = [str(c) for c in request.params.get("columns", [])]
    raw_bounds = request.params.get("bounds", [])
    if not names or len(raw_bounds) != len(names):
        raise InputError(
            f"dp_range needs columns and one (low, high) bound per column, got {names} and {raw_bounds!r}",
            "pass columns=[...] and bounds=[[lo, hi], ...]",
        )
    bounds = [check_bounds(b, f"bounds of {n!r}") for n, b in zip(names, raw_bounds, strict=True)]
    quantiles = check_quantiles(request.params.get("quantiles", DEFAULT_RANGE_QUANTILES))
    for name, b in zip(names, bounds, strict=True):
        party.table.column(name)  # covariates only, as read below
        quantile_candidates(b, f"bounds of {name!r}")
    charge = _charge(party, request, eps)
    pairs = list(zip(names, bounds, strict=True))
    ranges = np.stack([dp_quantiles(party.table.column(n), quantiles, b, eps / len(names)) for n, b in pairs])
    annotate_clipping(party, charge, names, [clip(party.table.column(n), *b)[1] for n, b in pairs])
    return Message(request.operation, {"epsilon": eps, "quantiles": quantiles}, {"ranges": ranges})


def _admit(request: Message) -> float:
    """Check the declared columns and epsilon of a request; return epsilon."""
    _check_declared(request)
    if "epsilon" not in request.params:
        raise InputError(f"{request.operation} request has no epsilon", "pass params={'epsilon': ..., ...}")
    return check_epsilon(request_number(request.params["epsilon"], "epsilon", request.operation),
                         f"epsilon of {request.operation}")


def request_number(value: object, name: str, operation: str) -> float:
    """A real number (not a bool, not text) from a request, or a one-line :class:`InputError`."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputError(
            f"{name} of {operation} must be a number, got {value!r}",
            f"send a complete {operation} request (see docs/protocol.md)",
        )
    return float(value)


def require_ledger(party: Party, operation: str) -> Any:
    """The party's privacy ledger; a one-line :class:`PolicyError` when it has none."""
    if party.ledger is None:
        raise PolicyError(
            f"party {party.name!r} has no privacy ledger, so it answers no DP query ({operation})",
            "configure a [privacy] section (epsilon, delta, ledger) in the party's config",
        )
    return party.ledger


def _charge(party: Party, request: Message, eps: float, **extra: Any) -> Charge:
    require_ledger(party, request.operation)
    details = {"columns": [str(c) for c in request.params.get("columns", [])], **extra}
    spec = request.params.get("partition")
    if isinstance(spec, Mapping):
        details["partition_kind"] = str(spec.get("kind"))
    return party.ledger.charge(request.operation, eps, 0.0, study=str(request.params.get("study", "")), details=details)


def annotate_clipping(party: Party, charge: Charge, names: list[str], n_clipped: Any) -> None:
    """Record in the ledger, and log on the party's own stderr, how many values of each column were clipped."""
    from collabcausal.party.clipping import log_clipping

    clipped = {name: int(n) for name, n in zip(names, n_clipped, strict=True)}
    if clipped:
        party.ledger.annotate(charge.id, {"n_clipped": clipped})
        log_clipping(party.name, charge.operation, clipped, party.table.n_subjects)


def _partition(request: Message) -> Partition:
    spec = request.params.get("partition")
    if spec is None:
        raise InputError("dp_histogram request has no partition", "pass partition=Partition.to_spec()")
    return partition_from_spec(spec)


def _arms(party: Party, request: Message) -> np.ndarray | None:
    if not request.params.get("by_arm", False):
        return None
    if party.table.treatment is None:
        raise InputError(f"party {party.name!r} holds no treatment column", "ask the row group's label holder")
    return party.table.treatment


def _sums(party: Party, request: Message) -> tuple[list[str], list[tuple[float, float]]]:
    names, bounds = _sum_specs(request, required=True)
    _check_values(party, names)
    return names, bounds


def _sum_specs(request: Message, *, required: bool) -> tuple[list[str], list[tuple[float, float]]]:
    """The summed columns and their bounds, every entry checked from the request alone (no column read)."""
    specs = request.params.get("sums", [])
    if required and not specs:
        raise InputError(f"{request.operation} request has no sums", "pass sums=[{'column': ..., 'bounds': [lo, hi]}]")
    names, bounds = [], []
    for spec in specs:
        if not isinstance(spec, Mapping) or "column" not in spec or "bounds" not in spec:
            raise InputError(f"bad sum spec {spec!r}", "use {'column': name, 'bounds': [lo, hi]}")
        refuse_unknown_keys(spec, SUM_KEYS, f"{request.operation} sum")
        names.append(str(spec["column"]))
        bounds.append(check_bounds(spec["bounds"], f"bounds of {spec['column']!r}"))
    if bounds and not math.isfinite(sum_sensitivity(bounds, n_cells=2)):  # the larger of the two sensitivities
        raise InputError(
            f"the sum bounds of {request.operation} give an infinite sensitivity (their width overflows)",
            "declare bounds of a usable width",
        )
    return names, bounds


def _check_values(party: Party, names: list[str]) -> None:
    """Every summed column is one the party holds (the outcome only at its label holder), refused before the charge."""
    for name in names:
        _values(party, name)


def _values(party: Party, name: str) -> np.ndarray:
    if name == OUTCOME:
        if party.table.outcome is None:
            raise InputError(f"party {party.name!r} holds no outcome column", "ask the row group's label holder")
        return party.table.outcome
    return party.table.column(name)
