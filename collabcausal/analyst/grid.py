"""The analyst's only view of the parties: a :class:`Grid` of named parties to send requests to.

Study logic in :mod:`collabcausal.analyst` is written against this small interface; the transport
layer (:mod:`collabcausal.protocol`) implements it in process (simulations) and over gRPC
(deployments), so both run the same study code (cf. Flower's ``Grid``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping

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

    def request(self, party: str, message: Message, *, timeout: float | None = None) -> Message:
        """Send one request to one party."""
        return self.send_and_receive({party: message}, timeout=timeout)[party]
