"""Helpers for the transport tests: TLS files, a tiny party, test-only operations, party threads."""

from __future__ import annotations

import threading
import time

import grpc
import numpy as np
import pandas as pd

from collabcausal.errors import PolicyError
from collabcausal.messages import Message
from collabcausal.party import Party, PartyTable
from collabcausal.party.operations import operation
from collabcausal.protocol.arrays import CHUNK_BYTES, message_frames
from collabcausal.protocol.client import PartyClient
from collabcausal.protocol.generated import collabcausal_pb2 as pb
from collabcausal.protocol.generated import collabcausal_pb2_grpc as pb_grpc
from collabcausal.protocol.server import grpc_options
from collabcausal.protocol.tls import TlsFiles, channel_credentials


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


@operation("test_echo", parameters={"k", "x", "z", "round"}, private_data=False)
def _test_echo(party: Party, request: Message) -> Message:
    """Test-only operation: echo its params (those the tests send), double arrays."""
    return Message("test_echo", dict(request.params), {k: v * 2 for k, v in request.arrays.items()})


RENDEZVOUS = threading.Barrier(2, timeout=20)


@operation("test_rendezvous", parameters=(), private_data=False)
def _test_rendezvous(party: Party, request: Message) -> Message:
    """Test-only operation: answers once two parties (threads of this process) are both running it."""
    RENDEZVOUS.wait()
    return Message("test_rendezvous", {"party": party.name})


@operation("test_refuse", parameters=(), private_data=False)
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


def raw_stub(grid, study_ca, name: str = "a"):
    """A channel and stub to ``grid`` with identity ``name``'s certificate (for hand-made calls)."""
    channel = grpc.secure_channel(grid.address, channel_credentials(tls_of(study_ca, name)), options=grpc_options())
    return channel, pb_grpc.StudyStub(channel)


def wait_until_joined(grid, names, timeout: float = 10.0) -> None:
    """Poll until ``names`` have joined ``grid`` (without waiting for the rest of the roster)."""
    deadline = time.monotonic() + timeout
    while not set(names) <= set(grid.party_names()):
        assert time.monotonic() < deadline, f"{names} did not join"
        time.sleep(0.02)


@operation("test_bad_reply", parameters=(), private_data=False)
def _test_bad_reply(party: Party, request: Message) -> Message:
    """Test-only operation: a reply whose params cannot travel as JSON."""
    return Message("test_bad_reply", {"value": np.float32(1.0)})


def _header_frame(frames: list, **fields) -> list:
    """``frames`` with its header's first array spec (or the header itself) edited."""
    header = pb.MessageHeader()
    header.CopyFrom(frames[0].header)
    for name, value in fields.items():
        target = header if name in ("params_json", "operation") else header.arrays[0]
        if name == "shape":
            del target.shape[:]
            target.shape.extend(value)
        else:
            setattr(target, name, value)
    return [pb.Frame(header=header), *frames[1:]]


def malformed_streams(task_id: str = "t") -> dict[str, list]:
    """Hostile frame streams, each of which the receiver must refuse with one ProtocolError line.

    Every stream carries ``task_id`` so a party can address its refusal to the task.
    """
    message = Message("test_echo", {"k": 1}, {"v": np.arange(300_000, dtype=np.float64)})
    good = list(message_frames(message, task_id=task_id, chunk_bytes=CHUNK_BYTES // 2))
    empty = list(message_frames(Message("test_echo", {}, {"v": np.zeros((0, 2))}), task_id=task_id))
    two = list(message_frames(Message("test_echo", {}, {"a": np.ones(2), "b": np.ones(2)}), task_id=task_id))
    dup = _header_frame(two)
    dup[0].header.arrays[1].name = "a"
    many = pb.MessageHeader(operation="test_echo", task_id=task_id, params_json="{}")
    many.arrays.extend(pb.ArrayHeader(name=f"a{i}", dtype="f8", byte_order="<") for i in range(65))
    return {
        "no header": good[1:],
        "empty stream": [],
        "second header": [good[0], good[0]],
        "object dtype i8,O": _header_frame(good, dtype="i8,O"),
        "unknown dtype": _header_frame(good, dtype="f3"),
        "bad byte order": _header_frame(good, byte_order="?"),
        "65-dimensional shape": _header_frame(empty, shape=[1] * 65, nbytes=8),
        "shape (0, 2**63)": _header_frame(empty, shape=[0, 2**63]),
        "shape disagrees with bytes": _header_frame(good, nbytes=7),
        "oversized declaration": _header_frame(good, shape=[1 << 29], nbytes=8 << 29),
        "65 arrays": [pb.Frame(header=many)],
        "duplicate array name": dup,
        "json nested 100000 deep": _header_frame(good, params_json='{"a":' + "[" * 100_000 + "]" * 100_000 + "}"),
        "json nested 40 deep": _header_frame(good, params_json='{"a":' + "[" * 40 + "]" * 40 + "}"),
        "unreadable json": _header_frame(good, params_json="{not json"),
        "params not an object": _header_frame(good, params_json="[1]"),
        "chunk out of order": [good[0], pb.Frame(chunk=pb.Chunk(array=1, data=b"x")), *good[1:]],
        "empty chunk": [good[0], pb.Frame(chunk=pb.Chunk(array=0, data=b"")), *good[1:]],
        "extra bytes": [*good, pb.Frame(chunk=pb.Chunk(array=0, data=b"x"))],
        "truncated chunks": good[:-1],
    }
