"""In-process transport: the analyst's :class:`~collabcausal.analyst.grid.Grid` over party objects.

Used by simulations; requests are handed to :meth:`collabcausal.party.node.Party.handle` directly,
so policy, ledger and audit apply exactly as over gRPC.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from collabcausal.analyst.grid import Grid
from collabcausal.errors import StudyFailedError
from collabcausal.messages import Message
from collabcausal.party.node import Party


class InProcessGrid(Grid):
    """Parties living in the analyst's process.

    Parameters
    ----------
    parties : iterable of Party
        Each party's ``name`` must be unique.
    """

    def __init__(self, parties: Iterable[Party]) -> None:
        self._parties: dict[str, Party] = {}
        for party in parties:
            if party.name in self._parties:
                raise StudyFailedError(f"two parties are named {party.name!r}", "give every party a unique name")
            self._parties[party.name] = party

    def party_names(self) -> list[str]:
        return sorted(self._parties)

    def send_and_receive(self, requests: Mapping[str, Message], *, timeout: float | None = None) -> dict[str, Message]:
        unknown = [name for name in requests if name not in self._parties]
        if unknown:
            raise StudyFailedError(f"party {unknown[0]!r} is not connected", "check the study roster")
        return {name: self._parties[name].handle(message) for name, message in requests.items()}
