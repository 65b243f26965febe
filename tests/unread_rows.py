"""A party whose rows cannot be read, for the tests that a request is refused before any row is read.

tests/party/test_operations.py's ``UnreadTable`` fails on any read of the table: it holds for refusals that come
before the request is checked against the table. A nested specification is parsed after the request's columns
and size are checked against the table's (no row read), so :class:`RowlessTable` lets those through and fails on
anything else. Imported by the tests of the nested specifications a party parses (the tests folder is on sys.path,
as for fault_injection.py).
"""

from __future__ import annotations

from typing import Any

import pytest

from collabcausal.errors import InputError
from collabcausal.messages import Message
from collabcausal.party import Party

METADATA = frozenset({"in_memory", "source", "n_subjects", "covariate_names", "has_labels"})
"""What a party may know of its table before reading a row: where it is, its size, its columns' names."""


class RowlessTable:
    """``table``'s :data:`METADATA`; reading anything else (a column, the arms, a pass over the rows) fails the test."""

    def __init__(self, table: Any) -> None:
        self._table = table

    def __getattr__(self, name: str) -> Any:
        if name in METADATA:
            return getattr(self._table, name)
        raise AssertionError(f"the party read its table's {name} before refusing")


def refused_unread(party: Party, message: Message, match: str) -> InputError:
    """``party`` refuses ``message`` with a one-line :class:`InputError` matching ``match``, before any row of its
    table is read and with its ledger unchanged (a read would surface as another error: :class:`Party` reports an
    unexpected one of a DP operation as a ``CollabCausalError``)."""
    table, charges = party.table, len(party.ledger.history())
    party.table = RowlessTable(table)
    try:
        with pytest.raises(InputError, match=match) as caught:
            party.handle(message)
    finally:
        party.table = table
    assert "\n" not in str(caught.value)
    assert len(party.ledger.history()) == charges
    return caught.value
