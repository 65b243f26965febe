"""A byte changed in transit never reaches a receiver: TLS refuses it and the task is sent again.

Protocol v2 carries no digest of the array bytes (docs/protocol.md): their integrity in transit is
TLS's, every record authenticated. A TCP proxy between a party and the analyst flips one bit in
the middle of a 1 MB array, in either direction; the connection fails, and the analyst, which
keeps a task queued until its reply arrives, gets the exact reply after the party reconnects.
"""

from __future__ import annotations

import socket
import threading

import numpy as np
import pytest
from protocol_helpers import PartyThread, small_party, tls_of, wait_until_joined

from collabcausal.messages import Message
from collabcausal.protocol.server import GrpcGrid


class TamperingProxy:
    """Forwards TCP to ``target``; flips one bit, once, at byte ``at`` of one direction of a connection.

    Parameters
    ----------
    target : str
        ``host:port`` to forward to.
    at : int
        Position of the flipped bit's byte in the connection's stream.
    from_party : bool
        Flip in the party's stream (its uploads) rather than in the analyst's (its tasks).
    """

    def __init__(self, target: str, *, at: int, from_party: bool) -> None:
        host, port = target.rsplit(":", 1)
        self.target = (host, int(port))
        self.at = at
        self.from_party = from_party
        self.flipped = 0
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{self._listener.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self) -> None:
        self._listener.close()

    def _accept(self) -> None:
        while True:
            try:
                party, _ = self._listener.accept()
            except OSError:
                return
            analyst = socket.create_connection(self.target)
            threading.Thread(target=self._pump, args=(party, analyst, self.from_party), daemon=True).start()
            threading.Thread(target=self._pump, args=(analyst, party, not self.from_party), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket, tamper: bool) -> None:
        seen = 0
        try:
            while data := source.recv(1 << 16):
                if tamper and seen <= self.at < seen + len(data):
                    with self._lock:
                        if not self.flipped:
                            data = bytearray(data)
                            data[self.at - seen] ^= 1
                            self.flipped += 1
                seen += len(data)
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for end in (source, sink):
                end.close()


@pytest.mark.parametrize("from_party", [False, True], ids=["task", "reply"])
def test_a_bit_flipped_in_transit_is_refused_by_tls_and_the_task_is_resent(study_ca, from_party):
    grid = GrpcGrid(["a"], tls=tls_of(study_ca, "analyst"), study="s", task_timeout=60)
    proxy = TamperingProxy(grid.address, at=500_000, from_party=from_party)
    party = PartyThread(small_party("a"), proxy.address, tls_of(study_ca, "a"), study="s", reconnect_timeout=30)
    try:
        wait_until_joined(grid, ["a"])
        array = np.random.default_rng(0).normal(size=125_000)  # 1 MB: the bit lands inside its bytes
        reply = grid.request("a", Message("test_echo", {}, {"v": array}))
        assert proxy.flipped == 1
        np.testing.assert_array_equal(reply.array("v"), array * 2)
    finally:
        grid.finish()
        party.join(60)
        proxy.close()
    assert party.error is None
