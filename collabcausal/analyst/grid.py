"""The analyst's only view of the parties: a :class:`Grid` of named parties to send requests to.

Study logic in :mod:`collabcausal.analyst` is written against this small interface; the transport
layer (:mod:`collabcausal.protocol`) implements it in process (simulations) and over gRPC
(deployments), so both run the same study code (cf. Flower's ``Grid``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping

from collabcausal.errors import StudyFailedError
from collabcausal.messages import Message


class Grid(ABC):
    """Named parties reachable by the analyst."""

    @abstractmethod
    def party_names(self) -> list[str]:
        """Names of the parties currently connected, sorted."""

    @abstractmethod
    def send_and_receive(self, requests: Mapping[str, Message], *, timeout: float | None = None) -> dict[str, Message]:
        """Send one request to each named party and return their replies by name.

        Parameters
        ----------
        requests : mapping of party name to Message
        timeout : float, optional
            Seconds to wait for all replies; ``None`` uses the transport's default.

        Raises
        ------
        StudyFailedError
            A party is unknown, disconnected or missed the deadline.
        CollabCausalError
            The error a party raised (policy, budget, input), re-raised on the analyst side.
        """

    def send_each(
        self, requests: Mapping[str, Message], *, timeout: float | None = None
    ) -> tuple[dict[str, Message], set[str]]:
        """Send one request to each named party; a party that does not answer is lost, not fatal.

        Returns
        -------
        replies : dict of str to Message
            The replies of the parties that answered, in the order of ``requests``.
        lost : set of str
            The parties for which the transport raised :class:`StudyFailedError` (disconnected,
            past the deadline, a malformed reply).

        Raises
        ------
        CollabCausalError
            Any other error a party raised (policy, budget, input), the first in request order.

        Asks one party at a time; a transport whose parties run concurrently asks them all at once.
        """
        replies, lost = {}, set()
        for party, message in requests.items():
            try:
                replies[party] = self.request(party, message, timeout=timeout)
            except StudyFailedError:
                lost.add(party)
        return replies, lost

    def request(self, party: str, message: Message, *, timeout: float | None = None) -> Message:
        """Send one request to one party."""
        return self.send_and_receive({party: message}, timeout=timeout)[party]
