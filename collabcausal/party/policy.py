"""What a party allows, enforced on every request whatever the analyst asks.

A :class:`PartyPolicy` is the ``[policy]`` section of ``party.toml``. :meth:`PartyPolicy.authorize`
runs in :meth:`collabcausal.party.node.Party.handle` before any operation, in process and over
gRPC alike, and refuses with a :class:`~collabcausal.errors.PolicyError` naming the rule:

* ``operations``: only the listed operations run;
* ``columns``: the party's table may hold only these covariates, and a request naming columns
  (``params["columns"]``) may name only these;
* ``min_subjects``: the table, a resample (``rows``: distinct subjects) and every arm of a weighted
  request (``arms`` + ``weights``: subjects with a non-zero weight) must cover at least this many
  subjects, so that no reply describes a handful of people (e.g. a one-hot weight vector would
  otherwise return one subject's covariates);
* differentially private operations need a privacy ledger (the ``[privacy]`` section).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from collabcausal.errors import ConfigError, PolicyError
from collabcausal.messages import Message
from collabcausal.party.operations import Operation

if TYPE_CHECKING:
    from collabcausal.party.node import Party

_FIX = "ask the party to change its party.toml [policy], or change the study"


@dataclass(frozen=True)
class PartyPolicy:
    """A party's rules.

    Parameters
    ----------
    operations : iterable of str
        Operation names the party answers.
    columns : iterable of str
        Covariates the party lets the study use.
    min_subjects : int
        Smallest group of subjects a reply may describe.
    alignment_key : bytes, optional
        The row group's shared secret: subject ids leave the party only as HMAC-SHA256 under it
        (see :mod:`collabcausal.party.alignment`); ``None`` refuses alignment.
    """

    operations: frozenset[str]
    columns: frozenset[str]
    min_subjects: int = 10
    alignment_key: bytes | None = None

    def __init__(
        self,
        operations: Iterable[str],
        columns: Iterable[str],
        min_subjects: int = 10,
        alignment_key: bytes | None = None,
    ) -> None:
        if isinstance(min_subjects, bool) or not isinstance(min_subjects, int) or min_subjects < 1:
            raise ConfigError(f"policy min_subjects must be a positive integer, got {min_subjects!r}", "e.g. 50")
        object.__setattr__(self, "operations", frozenset(operations))
        object.__setattr__(self, "columns", frozenset(columns))
        object.__setattr__(self, "min_subjects", min_subjects)
        object.__setattr__(self, "alignment_key", alignment_key)

    def authorize(self, party: Party, op: Operation, request: Message) -> None:
        """Return if the request is allowed; raise :class:`PolicyError` naming the rule if not."""
        who = f"party {party.name!r}"
        if op.name not in self.operations:
            raise PolicyError(f"{who} does not allow the operation {op.name!r}", _FIX)
        extra = sorted(set(party.table.covariate_names) - self.columns)
        asked = request.params.get("columns")
        if asked is not None:
            extra += sorted(set(asked if isinstance(asked, list) else [asked]) - self.columns)
        if extra:
            raise PolicyError(f"{who} does not allow the column {extra[0]!r} to be used", _FIX)
        if op.differentially_private and party.ledger is None:
            raise PolicyError(f"{who} has no privacy budget for {op.name!r}", "configure [privacy] in party.toml")
        self._check_subjects(who, op, party.table.n_subjects, "the rows of its table")
        if "rows" in request.arrays:
            self._check_subjects(
                who, op, _distinct(request.arrays["rows"], party.table.n_subjects), "the requested rows"
            )
        if "arms" in request.arrays and "weights" in request.arrays:
            arms = np.asarray(request.arrays["arms"])
            nonzero = np.asarray(request.arrays["weights"]) != 0
            if arms.shape != nonzero.shape:
                return  # the operation itself reports the malformed request
            for arm in (0, 1):
                self._check_subjects(who, op, int(np.sum(nonzero & (arms == arm))), f"arm {arm} of the weights")

    def _check_subjects(self, who: str, op: Operation, count: int, what: str) -> None:
        if count < self.min_subjects:
            raise PolicyError(
                f"{who} refuses {op.name!r}: {what} cover only {count} subjects, below its minimum of "
                f"{self.min_subjects}",
                _FIX,
            )


def _distinct(rows: np.ndarray, n: int) -> int:
    """Number of distinct valid positions in ``rows`` (O(n), unlike sorting)."""
    rows = np.asarray(rows)
    if not np.issubdtype(rows.dtype, np.integer):
        return 0
    seen = np.zeros(n, dtype=bool)
    seen[rows[(rows >= 0) & (rows < n)]] = True
    return int(np.count_nonzero(seen))
