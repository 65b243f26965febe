"""One live session per party name, and parties lost mid-study named at once (issue 38, items 1 and 3)."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import grpc
import numpy as np
import pytest
from protocol_helpers import PartyThread, raw_stub, small_party, tls_of, wait_until_joined

from collabcausal.errors import IdentityError, StudyFailedError
from collabcausal.messages import Message
from collabcausal.party import Party
from collabcausal.party.operations import operation
from collabcausal.protocol.generated import collabcausal_pb2 as pb
from collabcausal.protocol.server import PROTOCOL_VERSION, GrpcGrid
from collabcausal.protocol.sessions import SESSION_METADATA
from collabcausal.protocol.tls import PARTY_METADATA

ECHO = Message("test_echo", {}, {"v": np.arange(3.0)})

HANGING_PARTY = """
import sys, time
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from protocol_helpers import small_party, tls_of
from collabcausal.messages import Message
from collabcausal.party.operations import operation
from collabcausal.protocol.client import PartyClient

@operation("test_hang", parameters=(), private_data=False)
def _hang(party, request):
    print("computing", flush=True)
    time.sleep(600)

PartyClient(small_party("b"), sys.argv[2], tls=tls_of(Path(sys.argv[3]), "b"), poll_seconds=0.5,
            heartbeat_seconds=0.1).run()
"""


@operation("test_slow", parameters={"seconds"}, private_data=False)
def _test_slow(party: Party, request: Message) -> Message:
    """Test-only operation: answers after ``params["seconds"]`` seconds."""
    time.sleep(request.params["seconds"])
    return Message("test_slow", {"party": party.name})


@pytest.fixture
def grid(study_ca):
    g = GrpcGrid(["a", "b"], tls=tls_of(study_ca, "analyst"), study="s", task_timeout=60, lost_after=1.0)
    yield g
    g.stop(0)


def test_a_second_live_session_for_a_name_is_refused_and_sent_nothing(grid, study_ca):
    first = PartyThread(small_party("a"), grid.address, tls_of(study_ca, "a"), study="s")
    wait_until_joined(grid, ["a"])
    second = PartyThread(small_party("a"), grid.address, tls_of(study_ca, "a"), study="s", connect_timeout=1.0)
    second.join()
    assert isinstance(second.error, IdentityError)
    assert "party 'a' already has a live session" in str(second.error)
    assert "stop the other `collabcausal party join` of a" in str(second.error)
    np.testing.assert_array_equal(grid.request("a", ECHO).array("v"), np.arange(3.0) * 2)
    grid.finish()
    first.join()
    assert first.error is None
    assert (first.client.tasks_done, second.client.tasks_done) == (1, 0)


def test_a_session_that_is_gone_is_replaced_and_cannot_come_back(grid, study_ca):
    channel, stub = raw_stub(grid, study_ca)
    old = ((PARTY_METADATA, "a"), (SESSION_METADATA, "old"))
    with channel:
        run = stub.Register(pb.RegisterRequest(protocol_version=PROTOCOL_VERSION, study="s"), metadata=old).run_id
        time.sleep(1.5)  # silent for longer than lost_after = 1 s
        party = PartyThread(small_party("a"), grid.address, tls_of(study_ca, "a"), study="s")
        np.testing.assert_array_equal(grid.request("a", ECHO).array("v"), np.arange(3.0) * 2)
        with pytest.raises(grpc.RpcError) as replaced:
            next(iter(stub.PullTask(pb.PullRequest(run_id=run, wait_ms=100), metadata=old, timeout=5)))
    assert replaced.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "another process answers for party 'a' now" in replaced.value.details()
    grid.finish()
    party.join()
    assert party.error is None


def test_a_party_computing_longer_than_lost_after_is_kept_alive_by_its_heartbeat(grid, study_ca):
    party = PartyThread(small_party("a"), grid.address, tls_of(study_ca, "a"), study="s", heartbeat_seconds=0.1)
    wait_until_joined(grid, ["a"])
    assert grid.request("a", Message("test_slow", {"seconds": 2.5})).params == {"party": "a"}
    grid.finish()
    party.join()


def test_a_party_killed_mid_task_is_named_lost_before_the_deadline_with_what_was_charged(grid, study_ca):
    party = PartyThread(small_party("a"), grid.address, tls_of(study_ca, "a"), study="s")
    helpers = Path(__file__).parent
    process = subprocess.Popen(
        [sys.executable, "-c", HANGING_PARTY, str(helpers), grid.address, str(study_ca)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        wait_until_joined(grid, ["a", "b"], timeout=120)
        assert sorted(grid.send_and_receive({"a": ECHO, "b": ECHO})) == ["a", "b"]

        def kill_when_computing() -> None:
            assert process.stdout.readline().strip() == "computing"
            process.kill()

        killer = threading.Thread(target=kill_when_computing, daemon=True)
        killer.start()
        with pytest.raises(StudyFailedError) as lost:
            grid.send_and_receive({"a": ECHO, "b": Message("test_hang")})
        killer.join(5)
    finally:
        process.kill()
        process.wait()
    message = str(lost.value)
    assert message.startswith("party lost: b during 'test_hang' (no contact for ")
    assert "within 60 s" not in message  # named by liveness, not at the task deadline
    assert "no differentially private release was received" in message
    assert "b's 'test_hang' is not differentially private (no charge)" in message
    assert "\n" not in message
    grid.finish()
    party.join()
