"""``dp_discover_vote``: the ANM direction between two of a party's columns, every row protected.

The subsample-and-aggregate release of :mod:`collabcausal.estimators.discovery.subsample_vote`: the
party checks the request (public facts only), charges its ledger ``(epsilon, 0)``, then draws a fresh
permutation, lets each group of ``group_size`` rows vote with the non-private ANM of ``rule`` and
releases the count of votes for ``x -> y`` with ``Lap(1/epsilon)`` (OpenDP's sampler). Unlike
``dp_discover`` no public bounds are needed: a group's scaling and tuning stay inside its one vote.

Request ``params``: ``columns`` [x, y], ``epsilon``, optionally ``group_size`` (rows per group, or
``"auto"``, the default: the public function
:func:`~collabcausal.estimators.discovery.subsample_vote.auto_group_size` of n and epsilon), ``rule``
("krr": KRR with leave-one-out width and regularisation and median-heuristic HSIC widths; "gp": the
reference ANM-HSIC, the default), ``study``. Reply ``params``: the fields of
:class:`~collabcausal.estimators.discovery.subsample_vote.VoteRelease`.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from collabcausal.errors import InputError, PolicyError
from collabcausal.estimators.discovery.subsample_vote import AUTO, group_votes, release_votes, resolve_group_size
from collabcausal.estimators.validation import check_vector
from collabcausal.messages import Message
from collabcausal.party.dp_queries import request_number
from collabcausal.party.operations import operation

if TYPE_CHECKING:
    from collabcausal.party.node import Party

OPERATION = "dp_discover_vote"
RULES: dict[str, dict[str, Any]] = {
    "gp": {"regression": "gp", "hsic_widths": "median"},
    "krr": {"kernel_width": "loo", "regularization": "loo", "hsic_widths": "median"},
}


@operation(OPERATION, parameters={"columns", "epsilon", "rule", "group_size"}, differentially_private=True)
def dp_discover_vote(party: Party, request: Message) -> Message:
    """Charge, then release the noisy vote count of the groups' ANM decisions (module docstring)."""
    params = request.params
    columns = params.get("columns")
    if not isinstance(columns, (list, tuple)) or len(columns) != 2 or columns[0] == columns[1]:
        raise InputError(f"{OPERATION} needs columns=[x, y] (two different covariates), got {columns!r}", "fix it")
    epsilon = request_number(params.get("epsilon"), "epsilon", OPERATION)
    if not 0.0 < epsilon < float("inf"):
        raise InputError(f"epsilon of {OPERATION} must be finite and > 0, got {epsilon!r}", "send e.g. epsilon=1")
    rule = params.get("rule", "gp")
    if rule not in RULES:
        raise InputError(f"rule of {OPERATION} must be one of {list(RULES)}, got {rule!r}", "send rule='gp'")
    if party.ledger is None:
        raise PolicyError(f"party {party.name!r} has no privacy ledger for {OPERATION}", "configure [privacy]")
    x_name, y_name = (str(c) for c in columns)
    x = check_vector(party.table.column(x_name), "x")
    y = check_vector(party.table.column(y_name), "y", n=x.size)
    group_size = resolve_group_size(params.get("group_size", AUTO), x.size, epsilon)  # public: n and the request
    party.ledger.charge(OPERATION, epsilon, 0.0, study=str(params.get("study", "")),
                        details={"columns": [x_name, y_name], "rule": rule, "group_size": group_size})
    votes = group_votes(x, y, group_size=group_size, model=RULES[rule])
    return Message(OPERATION, asdict(release_votes(votes, epsilon)))
