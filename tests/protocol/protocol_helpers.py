"""Helpers for the transport tests: TLS files, a tiny party, test-only operations, party threads."""

from __future__ import annotations

import threading
import time

import numpy as np
import pandas as pd

from collabcausal.errors import PolicyError
from collabcausal.messages import Message
from collabcausal.party import Party, PartyTable
from collabcausal.party.operations import operation
from collabcausal.protocol.client import PartyClient
from collabcausal.protocol.tls import TlsFiles


def tls_of(folder, name: str) -> TlsFiles:
    """The TLS files of identity ``name`` in a CA folder."""
    return TlsFiles(folder / "ca.pem", folder / f"{name}.pem", folder / f"{name}.key")


def small_party(name: str, n: int = 30) -> Party:
    """A party with a tiny numeric table (two covariates, labels)."""
    rng = np.random.default_rng(len(name))
    frame = pd.DataFrame(
        {"x1": rng.normal(size=n), "x2": rng.normal(size=n), "t": np.arange(n) % 2, "y": rng.normal(size=n)}
    )
    return Party(name, PartyTable.from_frame(frame, ["x1", "x2"], treatment="t", outcome="y"))


@operation("test_echo", private_data=False)
def _test_echo(party: Party, request: Message) -> Message:
    """Test-only operation: echo params, double arrays."""
    return Message("test_echo", dict(request.params), {k: v * 2 for k, v in request.arrays.items()})


@operation("test_refuse", private_data=False)
def _test_refuse(party: Party, request: Message) -> Message:
    """Test-only operation: always refused."""
    raise PolicyError(f"party {party.name!r} refuses the test", "do not ask")


class PartyThread:
    """A :class:`PartyClient` running in a daemon thread; ``error`` holds what ended it."""

    def __init__(self, party: Party, address: str, tls: TlsFiles | None, **kwargs) -> None:
        kwargs = {"poll_seconds": 0.5, "reconnect_timeout": 10.0, **kwargs}
        self.client = PartyClient(party, address, tls=tls, **kwargs)
        self.error: BaseException | None = None
        self.result: str | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            self.result = self.client.run()
        except BaseException as exc:  # recorded for the test to assert on
            self.error = exc

    def join(self, timeout: float = 20.0) -> None:
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "the party thread did not stop"


def wait_until_joined(grid, names, timeout: float = 10.0) -> None:
    """Poll until ``names`` have joined ``grid`` (without waiting for the rest of the roster)."""
    deadline = time.monotonic() + timeout
    while not set(names) <= set(grid.party_names()):
        assert time.monotonic() < deadline, f"{names} did not join"
        time.sleep(0.02)


@operation("test_bad_reply", private_data=False)
def _test_bad_reply(party: Party, request: Message) -> Message:
    """Test-only operation: a reply whose params cannot travel as JSON."""
    return Message("test_bad_reply", {"value": np.float32(1.0)})
