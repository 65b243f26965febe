"""Hostile parties against a real analyst server (GrpcGrid on loopback, mutual TLS).

An evil party is a :class:`PartyClient` subclass or hand-made calls on the generated stubs. Each
attack must be refused (the study failing with a one-line StudyFailedError naming the party where
the attack is a reply), and the server must keep serving honest parties.
"""

from __future__ import annotations

import itertools
import threading
import time
from concurrent import futures

import grpc
import pytest
from protocol_helpers import PartyThread, malformed_streams, raw_stub, small_party, tls_of, wait_until_joined

from collabcausal.analyst.dcqe import run_dcqe
from collabcausal.errors import StudyFailedError
from collabcausal.messages import Message
from collabcausal.protocol.client import PartyClient
from collabcausal.protocol.generated import collabcausal_pb2 as pb
from collabcausal.protocol.server import MAX_STREAMS_PER_PARTY, PROTOCOL_VERSION, GrpcGrid


@pytest.fixture
def grid(study_ca):
    g = GrpcGrid(["a", "b"], tls=tls_of(study_ca, "analyst"), study="s", task_timeout=20, max_message_bytes=1 << 30)
    yield g
    g.stop(0)


class MalformedClient(PartyClient):
    """Answers tasks with the next stream of ``cases`` (built for the task's id), then honestly."""

    def __init__(self, *args, cases: list[str], **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.cases = list(cases)

    def _answer(self, stub, envelope) -> None:
        if not self.cases:
            return super()._answer(stub, envelope)
        stream = malformed_streams(task_id=envelope.task_id)[self.cases.pop(0)]
        try:
            stub.UploadResult(iter(stream), timeout=10, metadata=self._metadata)
        except grpc.RpcError:
            pass


def test_every_malformed_upload_fails_its_round_naming_the_party_and_the_analyst_keeps_serving(grid, study_ca):
    # A truncated stream is what a crashed party leaves: its task stays queued for the restarted
    # party (tests/protocol/test_launcher.py), so the round waits for task_timeout instead.
    cases = sorted(set(malformed_streams()) - {"truncated chunks", "empty stream"})
    evil = MalformedClient(small_party("b"), grid.address, tls=tls_of(study_ca, "b"), poll_seconds=0.5, cases=cases)
    thread = threading.Thread(target=lambda: _swallow(evil.run), daemon=True)
    thread.start()
    honest = PartyThread(small_party("a"), grid.address, tls_of(study_ca, "a"))
    grid.wait_for_parties(10)
    for case in cases:
        with pytest.raises(StudyFailedError, match="party 'b' sent a malformed reply to 'test_echo'") as info:
            grid.send_and_receive({"a": Message("test_echo", {"x": 1}), "b": Message("test_echo")})
        assert "\n" not in str(info.value), case
    assert grid.request("a", Message("test_echo", {"x": 2})).params == {"x": 2}
    grid.finish(failed="test over", linger=2)
    honest.join()
    thread.join(10)
    assert isinstance(honest.error, StudyFailedError) and "test over" in str(honest.error)


def test_a_truncated_upload_keeps_the_task_queued_for_the_resend(grid, study_ca):
    cases = ["truncated chunks", "empty stream"]
    evil = MalformedClient(small_party("b"), grid.address, tls=tls_of(study_ca, "b"), poll_seconds=0.5, cases=cases)
    thread = threading.Thread(target=lambda: _swallow(evil.run), daemon=True)
    thread.start()
    wait_until_joined(grid, ["b"])
    assert grid.request("b", Message("test_echo", {"x": 3}), timeout=20).params == {"x": 3}
    assert evil.cases == []
    grid.finish(linger=2)
    thread.join(10)


def test_status_is_refused_to_a_certificate_off_the_roster(grid, study_ca):
    channel, stub = raw_stub(grid, study_ca, "mallory")
    with channel, pytest.raises(grpc.RpcError) as info:
        stub.Status(pb.StatusRequest(), timeout=5)
    assert info.value.code() == grpc.StatusCode.PERMISSION_DENIED and "not on the roster" in info.value.details()


def test_one_party_with_40_long_polls_cannot_starve_an_honest_register(grid, study_ca):
    channel, stub = raw_stub(grid, study_ca, "b")
    run_id = stub.Register(pb.RegisterRequest(protocol_version=PROTOCOL_VERSION, study="s"), timeout=5).run_id

    def long_poll(_: int) -> grpc.StatusCode:
        try:
            list(stub.PullTask(pb.PullRequest(run_id=run_id, wait_ms=20_000), timeout=20))
        except grpc.RpcError as err:
            return err.code()
        return grpc.StatusCode.OK

    with channel, futures.ThreadPoolExecutor(40) as pool:
        polls = [pool.submit(long_poll, i) for i in range(40)]
        refused = [p.result() for p in itertools.islice(futures.as_completed(polls), 40 - MAX_STREAMS_PER_PARTY)]
        honest = PartyThread(small_party("a"), grid.address, tls_of(study_ca, "a"))
        wait_until_joined(grid, ["a"], timeout=10)
        assert grid.request("a", Message("test_echo", {"x": 1}), timeout=10).params == {"x": 1}
        grid.finish(linger=2)
        honest.join()
    assert refused.count(grpc.StatusCode.RESOURCE_EXHAUSTED) == 40 - MAX_STREAMS_PER_PARTY
    assert honest.error is None


def test_cancelled_long_polls_give_their_stream_slots_back_at_once(grid, study_ca):
    channel, stub = raw_stub(grid, study_ca, "b")
    with channel:
        run_id = stub.Register(pb.RegisterRequest(protocol_version=PROTOCOL_VERSION, study="s"), timeout=5).run_id
        request = pb.PullRequest(run_id=run_id, wait_ms=20_000)
        for _ in range(3):  # three reconnects' worth of abandoned polls
            polls = [stub.PullTask(request, timeout=20) for _ in range(MAX_STREAMS_PER_PARTY)]
            time.sleep(0.2)
            for poll in polls:
                poll.cancel()
        time.sleep(0.2)
        fresh = pb.PullRequest(run_id=run_id, wait_ms=100)  # served (IDLE after 0.1 s), not RESOURCE_EXHAUSTED
        assert [f.header.state for f in stub.PullTask(fresh, timeout=5)] == [pb.IDLE]


def test_a_4_gib_upload_with_no_task_outstanding_is_refused_before_its_bytes_are_read(study_ca):
    grid = GrpcGrid(["a"], tls=tls_of(study_ca, "analyst"), study="s")  # default limit: 4 GiB declarations pass it
    frames = malformed_streams()["oversized declaration"]  # header declares 4 GiB of float64
    sent = []

    def stream():
        yield frames[0]
        for _ in range(4096):
            sent.append(1)
            yield pb.Frame(chunk=pb.Chunk(array=0, data=b"\0" * (1 << 20)))

    channel, stub = raw_stub(grid, study_ca, "a")
    with grid, channel:
        stub.Register(pb.RegisterRequest(protocol_version=PROTOCOL_VERSION, study="s"), timeout=5)
        ack = stub.UploadResult(stream(), timeout=10)
    assert not ack.accepted and "no task 't' outstanding for party 'a'" in ack.detail
    assert len(sent) < 4096  # the analyst answered without waiting for the declared bytes


class AnchorRowShortClient(PartyClient):
    """Honest, except that its anchor images lack their last row."""

    def _answer(self, stub, envelope) -> None:
        request = envelope.message
        if request is not None and request.operation == "dc_representation":
            handle = self.party.handle

            def short(message: Message) -> Message:
                reply = handle(message)
                return Message(reply.operation, reply.params, {**reply.arrays, "a_tilde": reply.arrays["a_tilde"][:-1]})

            self.party.handle = short
            try:
                return super()._answer(stub, envelope)
            finally:
                del self.party.handle
        return super()._answer(stub, envelope)


def test_anchor_images_one_row_short_fail_the_study_naming_the_party_over_grpc(lalonde_2x2):
    parties, plan = lalonde_2x2
    grid = GrpcGrid([p.name for p in parties], tls=None, study=plan.study, task_timeout=30)
    honest = [PartyThread(p, grid.address, None) for p in parties if p.name != "p12"]
    evil = AnchorRowShortClient(next(p for p in parties if p.name == "p12"), grid.address, tls=None, poll_seconds=0.5)
    evil_thread = threading.Thread(target=lambda: _swallow(evil.run), daemon=True)
    evil_thread.start()
    with grid:
        grid.wait_for_parties(20)
        with pytest.raises(StudyFailedError, match=r"party 'p12' sent a dc_representation reply .*a_tilde has shape"):
            run_dcqe(grid, plan)
        grid.finish(failed="p12 sent a bad reply", linger=3)
    for thread in honest:
        thread.join()
        assert isinstance(thread.error, StudyFailedError) and "p12 sent a bad reply" in str(thread.error)
    evil_thread.join(5)
    assert not evil_thread.is_alive()


def _swallow(run) -> None:
    try:
        run()
    except StudyFailedError:
        pass
