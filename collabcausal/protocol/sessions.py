"""Who answers for each party, and whether it is still there (issue 38, items 1 and 3).

Each :class:`~collabcausal.protocol.client.PartyClient` sends a random session id with every call
(metadata ``collabcausal-session``). The analyst keeps one session per party name:

* a party is live while it has a stream open (a long poll, an upload) or calls: between polls,
  and while it computes a task, the client calls ``Status`` every :data:`HEARTBEAT_SECONDS`;
* a second session registering under a name whose session is live is refused (nothing is sent
  to it, so nothing is charged); once the first is gone (no open stream and no contact for a
  third of ``lost_after``) a new session replaces it and gets its outstanding task: a restarted
  party process rejoins (the client retries a refused registration for its ``connect_timeout``);
* a party with a task outstanding that is silent for ``lost_after`` seconds is lost, named at
  once, without waiting out the task's deadline.

The bookkeeping only; :class:`~collabcausal.protocol.server.GrpcGrid` holds the lock around it.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

SESSION_METADATA = "collabcausal-session"
HEARTBEAT_SECONDS = 2.0
"""How often a party computing a task tells the analyst it is alive."""
LOST_AFTER_SECONDS = 20.0
"""Default silence after which a party owing a reply is lost (well above :data:`HEARTBEAT_SECONDS`)."""


@dataclass
class Session:
    """One party process's session: its id, when it joined, when it was last heard from (monotonic s)."""

    session_id: str
    joined: float
    last_seen: float


class DuplicateSession(Exception):
    """A second live session for a party name (the text says which and since when)."""


class PartySessions:
    """The live session of each party name.

    Parameters
    ----------
    lost_after : float
        Seconds of silence (no open stream, no call) after which a session is gone.
    """

    def __init__(self, lost_after: float) -> None:
        self.lost_after = lost_after
        self._sessions: dict[str, Session] = {}

    def register(self, name: str, session_id: str, streams_open: int) -> str:
        """Record ``session_id`` as ``name``'s session; return the event to log ("joined", "rejoined ...").

        Raises
        ------
        DuplicateSession
            ``name`` has another session that is still live.
        """
        now = time.monotonic()
        current = self._sessions.get(name)
        event = "joined"
        if current is not None and current.session_id != session_id:
            silent = now - current.last_seen
            if streams_open or silent <= self.lost_after / 3:
                raise DuplicateSession(
                    f"party {name!r} already has a live session (joined {now - current.joined:.0f} s ago, "
                    f"last contact {silent:.0f} s ago); this second process was refused and sent nothing"
                )
            event = f"rejoined (its previous process was silent for {silent:.0f} s and is replaced)"
        elif current is not None:
            event = "rejoined"
        joined = now if current is None or current.session_id != session_id else current.joined
        self._sessions[name] = Session(session_id, joined, now)
        return event

    def current(self, name: str, session_id: str) -> bool:
        """Whether ``session_id`` is ``name``'s registered session."""
        session = self._sessions.get(name)
        return session is not None and session.session_id == session_id

    def seen(self, name: str, session_id: str) -> None:
        """Note a call (or the end of a stream) of ``name``'s current session."""
        session = self._sessions.get(name)
        if session is not None and session.session_id == session_id:
            session.last_seen = time.monotonic()

    def lost(self, names: Iterable[str], streams: Mapping[str, int]) -> dict[str, float]:
        """Those of ``names`` gone silent: no open stream and no call for ``lost_after`` s; name -> silence (s)."""
        now = time.monotonic()
        silent = {}
        for name in names:
            session = self._sessions.get(name)
            if session is not None and not streams.get(name) and now - session.last_seen > self.lost_after:
                silent[name] = now - session.last_seen
        return silent
