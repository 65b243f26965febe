"""In-process transport: the analyst's :class:`~collabcausal.analyst.grid.Grid` over party objects.

Used by simulations; requests are handed to :meth:`collabcausal.party.node.Party.handle` directly,
so policy, ledger and audit apply exactly as over gRPC. With ``workers`` > 1 the parties of one
round work concurrently, as a deployment's do: numpy releases the GIL in the array work that
dominates a large request, so a round of 10^6-10^7 subjects takes the time of its slowest party
rather than the sum.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor

from collabcausal.analyst.grid import Grid
from collabcausal.errors import InputError, StudyFailedError
from collabcausal.messages import Message
from collabcausal.party.node import Party


class InProcessGrid(Grid):
    """Parties living in the analyst's process.

    Parameters
    ----------
    parties : iterable of Party
        Each party's ``name`` must be unique.
    workers : int
        Threads that run the parties of one round concurrently; 1 (the default) asks one party
        at a time, which suits small requests (a thread's start costs more than a small party's
        reply) and runs under a process pool (e.g. a bootstrap's ``n_jobs``) without
        oversubscribing the cores. A party's reply does not depend on it: each party computes
        from its own table, so the replies are the same numbers either way.
    """

    def __init__(self, parties: Iterable[Party], *, workers: int = 1) -> None:
        if workers < 1:
            raise InputError(f"workers must be at least 1, got {workers}", "pass workers=1 or more")
        self.workers = int(workers)
        self._parties: dict[str, Party] = {}
        for party in parties:
            if party.name in self._parties:
                raise StudyFailedError(f"two parties are named {party.name!r}", "give every party a unique name")
            self._parties[party.name] = party

    def party_names(self) -> list[str]:
        return sorted(self._parties)

    def send_and_receive(self, requests: Mapping[str, Message], *, timeout: float | None = None) -> dict[str, Message]:
        """:meth:`Grid.send_and_receive`, the parties concurrently with ``workers`` > 1.

        Every party asked runs to its end, as over gRPC; the error raised is the first in request
        order, the one asking the parties one at a time raises.
        """
        unknown = [name for name in requests if name not in self._parties]
        if unknown:
            raise StudyFailedError(f"party {unknown[0]!r} is not connected", "check the study roster")
        threads = min(self.workers, len(requests))
        if threads == 1:
            return {name: self._parties[name].handle(message) for name, message in requests.items()}
        with ThreadPoolExecutor(threads, thread_name_prefix="party") as pool:
            replies = {name: pool.submit(self._parties[name].handle, message) for name, message in requests.items()}
        return {name: reply.result() for name, reply in replies.items()}
