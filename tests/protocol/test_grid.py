"""GrpcGrid and PartyClient on loopback (party clients in threads): traffic, identity, faults."""

from __future__ import annotations

import datetime as dt
import time

import grpc
import numpy as np
import pytest
from protocol_helpers import PartyThread, raw_stub, small_party, tls_of, wait_until_joined

from collabcausal import certs
from collabcausal.errors import IdentityError, PolicyError, ProtocolError, StudyFailedError
from collabcausal.messages import Message
from collabcausal.protocol.arrays import message_frames
from collabcausal.protocol.generated import collabcausal_pb2 as pb
from collabcausal.protocol.server import PROTOCOL_VERSION, GrpcGrid
from collabcausal.protocol.tls import PARTY_METADATA


@pytest.fixture
def grid(study_ca):
    g = GrpcGrid(["a", "b"], tls=tls_of(study_ca, "analyst"), study="s", task_timeout=20)
    yield g
    g.stop(0)


def test_mutual_tls_study_round_trips_an_80_mb_array(grid, study_ca):
    party = PartyThread(small_party("a"), grid.address, tls_of(study_ca, "a"), study="s")
    wait_until_joined(grid, ["a"])
    big = np.random.default_rng(1).normal(size=10_000_000)  # 80 MB, 20x gRPC's 4 MiB default limit
    reply = grid.request("a", Message("test_echo", {"k": 0.1}, {"v": big}))
    assert reply.params["k"] == 0.1 and np.array_equal(reply.array("v"), big * 2)
    grid.finish()
    party.join()
    assert party.error is None and party.result == "study complete"


def test_party_refusal_is_re_raised_at_the_analyst_with_its_class(grid, study_ca):
    party = PartyThread(small_party("a"), grid.address, tls_of(study_ca, "a"))
    wait_until_joined(grid, ["a"])
    with pytest.raises(PolicyError, match="party 'a': party 'a' refuses the test"):
        grid.request("a", Message("test_refuse"))
    grid.finish()
    party.join()


def test_party_off_the_roster_is_refused_by_name(grid, study_ca):
    party = PartyThread(small_party("mallory"), grid.address, tls_of(study_ca, "mallory"))
    party.join()
    assert isinstance(party.error, IdentityError)
    assert "'mallory' is not on the roster of study 's'" in str(party.error)
    assert grid.party_names() == []


def test_certificate_from_another_ca_is_refused_with_a_clear_message(grid, study_ca, tmp_path, monkeypatch):
    certs.init_ca(tmp_path)
    certs.issue(tmp_path, "a")
    files = tls_of(tmp_path, "a")
    # The party trusts the study CA but holds a certificate of another CA.
    files = type(files)(study_ca / "ca.pem", files.cert, files.key)
    party = PartyThread(small_party("a"), grid.address, files)
    party.join()
    assert isinstance(party.error, IdentityError) and "not issued by the study CA" in str(party.error)
    monkeypatch.setattr(type(files), "check", lambda self: "a")  # skip the local check: the analyst refuses
    party = PartyThread(small_party("a"), grid.address, files)
    party.join()
    assert isinstance(party.error, IdentityError) and "does not accept this party's certificate" in str(party.error)
    assert grid.party_names() == []


def test_expired_certificate_is_refused_with_its_date(grid, study_ca, tmp_path):
    for name in ("ca.pem", "ca.key"):
        (tmp_path / name).write_bytes((study_ca / name).read_bytes())
    old = dt.datetime(2020, 1, 1, tzinfo=dt.timezone.utc)
    certs.issue(tmp_path, "a", days=30, not_before=old)
    party = PartyThread(small_party("a"), grid.address, tls_of(tmp_path, "a"))
    party.join()
    assert isinstance(party.error, IdentityError) and "expired on 2020-01-31" in str(party.error)


def test_plaintext_client_is_refused_by_a_tls_analyst(grid):
    party = PartyThread(small_party("a"), grid.address, None)
    party.join()
    assert isinstance(party.error, IdentityError) and "refused a plaintext connection" in str(party.error)


def test_insecure_mode_is_refused_off_loopback():
    with pytest.raises(IdentityError, match="not a loopback address"):
        GrpcGrid(["a"], address="8.8.8.8:0", tls=None)


def test_insecure_mode_on_loopback_warns_and_works(capsys):
    grid = GrpcGrid(["a"], address="127.0.0.1:0", tls=None)
    assert "WARNING: plaintext" in capsys.readouterr().err
    party = PartyThread(small_party("a"), grid.address, None)
    grid.wait_for_parties(10)
    assert grid.request("a", Message("test_echo", {"z": 1})).params == {"z": 1}
    grid.finish()
    party.join()


def test_party_that_never_joins_fails_the_study_naming_it(grid, study_ca):
    party = PartyThread(small_party("a"), grid.address, tls_of(study_ca, "a"))
    # a joins first (up to 10 s): the 1 s deadline below times only b, not a's TLS join on a loaded machine
    wait_until_joined(grid, ["a"])
    with pytest.raises(StudyFailedError, match="party b did not join study 's' within 1 s"):
        grid.wait_for_parties(1.0)
    assert grid.wait_for_parties(0.1, on_missing="continue") == ["a"]
    grid.finish()
    party.join()


def test_silent_party_fails_a_round_after_the_task_timeout(grid):
    with pytest.raises(StudyFailedError, match=r"no reply from b to 'test_echo' within 0\.3 s"):
        grid.send_and_receive({"b": Message("test_echo")}, timeout=0.3)


def test_malformed_truncated_and_oversized_uploads_are_refused_and_the_analyst_keeps_serving(grid, study_ca):
    channel, stub = raw_stub(grid, study_ca)
    with channel:
        stub.Register(pb.RegisterRequest(protocol_version=PROTOCOL_VERSION, study="s"), timeout=5)
        frames = list(message_frames(Message("x", {}, {"v": np.arange(10.0)}), task_id="t"))
        ack = stub.UploadResult(iter(frames[:-1]), timeout=5)  # no task "t" outstanding: refused unread
        assert not ack.accepted and "no task 't' outstanding for party 'a'" in ack.detail
        cases = {
            "malformed": frames[1:],
            "oversized": [pb.Frame(chunk=pb.Chunk(array=0, data=b"\0" * (2 << 20)))],
        }
        for case, stream in cases.items():
            with pytest.raises(grpc.RpcError) as info:
                stub.UploadResult(iter(stream), timeout=5)
            expected = grpc.StatusCode.RESOURCE_EXHAUSTED if case == "oversized" else grpc.StatusCode.INVALID_ARGUMENT
            assert info.value.code() == expected, case
        status = stub.Status(pb.StatusRequest(), timeout=5)
    assert status.study == "s" and list(status.connected) == ["a"] and list(status.roster) == ["a", "b"]


def test_wrong_protocol_version_and_wrong_study_are_refused(grid, study_ca):
    channel, stub = raw_stub(grid, study_ca)
    with channel:
        for request, code, match in (
            (pb.RegisterRequest(protocol_version=99), grpc.StatusCode.FAILED_PRECONDITION, "protocol v99"),
            (
                pb.RegisterRequest(protocol_version=PROTOCOL_VERSION, study="other"),
                grpc.StatusCode.NOT_FOUND,
                "asked to join study 'other'",
            ),
        ):
            with pytest.raises(grpc.RpcError) as info:
                stub.Register(request, timeout=5)
            assert info.value.code() == code and match in info.value.details()


def test_name_claim_must_match_the_certificate(grid, study_ca):
    channel, stub = raw_stub(grid, study_ca, "a")
    with channel, pytest.raises(grpc.RpcError) as info:
        stub.Register(
            pb.RegisterRequest(protocol_version=PROTOCOL_VERSION), metadata=((PARTY_METADATA, "b"),), timeout=5
        )
    assert info.value.code() == grpc.StatusCode.PERMISSION_DENIED


def test_party_rejoins_a_restarted_analyst(study_ca):
    first = GrpcGrid(["a"], tls=tls_of(study_ca, "analyst"))
    party = PartyThread(small_party("a"), first.address, tls_of(study_ca, "a"))
    first.wait_for_parties(10)
    assert first.request("a", Message("test_echo", {"round": 1})).params == {"round": 1}
    first.stop(0)
    time.sleep(0.5)
    second = GrpcGrid(["a"], address=first.address, tls=tls_of(study_ca, "analyst"))
    second.wait_for_parties(10)
    assert second.request("a", Message("test_echo", {"round": 2})).params == {"round": 2}
    second.finish()
    party.join()
    assert party.error is None


@pytest.mark.parametrize(
    ("address", "cause"),
    [("127.0.0.1:9", "connection refused"), ("nonexistent.invalid:443", "host name does not resolve (DNS failure)")],
)
def test_unreachable_analyst_fails_the_join_fast_naming_the_cause_in_one_logged_line(study_ca, address, cause):
    events: list[str] = []
    party = PartyThread(
        small_party("a"), address, tls_of(study_ca, "a"), connect_timeout=0.5, reconnect_timeout=300,
        progress=events.append,
    )
    party.join()
    assert isinstance(party.error, StudyFailedError) and "unreachable for 0.5 s" in str(party.error)
    assert cause in str(party.error) and "\n" not in str(party.error)
    assert len([e for e in events if "unreachable" in e]) == 1


def test_second_analyst_on_a_busy_port_is_refused(grid, study_ca):
    with pytest.raises(StudyFailedError, match="cannot listen on"):
        GrpcGrid(["a"], address=grid.address, tls=tls_of(study_ca, "analyst"))


def test_messages_that_cannot_travel_fail_cleanly_on_either_side(grid, study_ca):
    with pytest.raises(ProtocolError, match="cannot travel as JSON"):
        grid.request("a", Message("test_echo", {"x": np.int64(3)}), timeout=1)
    party = PartyThread(small_party("a"), grid.address, tls_of(study_ca, "a"))
    wait_until_joined(grid, ["a"])
    with pytest.raises(ProtocolError, match="party 'a': params of 'test_bad_reply' cannot travel as JSON"):
        grid.request("a", Message("test_bad_reply"))
    assert grid.request("a", Message("test_echo", {"x": 3})).params == {"x": 3}
    grid.finish()
    party.join()
    assert party.error is None


def test_a_retried_dp_request_gets_the_identical_reply_over_grpc_and_is_charged_once(grid, study_ca, tmp_path):
    from collabcausal.ledger import PrivacyLedger

    member = small_party("a")
    member.ledger = PrivacyLedger(tmp_path / "a.sqlite", epsilon=1.0, dataset="a")
    party = PartyThread(member, grid.address, tls_of(study_ca, "a"))
    wait_until_joined(grid, ["a"])
    params = {"epsilon": 0.4, "study": "s", "columns": ["x1"], "sums": [{"column": "x1", "bounds": [-3, 3]}]}
    first = grid.request("a", Message("dp_sum", {**params, "request_id": "task-7"}))
    again = grid.request("a", Message("dp_sum", {**params, "request_id": "task-7"}))
    assert again.array("sums").tobytes() == first.array("sums").tobytes()
    assert dict(again.params) == dict(first.params)
    assert [c.request_id for c in member.ledger.history()] == ["task-7"]
    grid.finish()
    party.join()


def test_info_lines_do_not_grow_with_the_number_of_requests(study_ca, caplog, monkeypatch):
    """A study asks every party once per bootstrap replicate: per-request lines are DEBUG (issue 22, item 5)."""
    import logging

    from collabcausal.logs import LOGGER, log_progress, progress_logger

    monkeypatch.setattr(logging.getLogger(LOGGER), "propagate", True)

    def info_lines(replicates: int) -> list[str]:
        caplog.clear()
        with caplog.at_level(logging.DEBUG, logger=LOGGER):
            grid = GrpcGrid(["a", "b"], address="127.0.0.1:0", tls=tls_of(study_ca, "analyst"), progress=log_progress)
            threads = [PartyThread(small_party(n), grid.address, tls_of(study_ca, n), progress=progress_logger(n))
                       for n in ("a", "b")]
            wait_until_joined(grid, ["a", "b"])
            for _ in range(replicates):
                grid.send_and_receive({n: Message("test_echo", {"x": 1}) for n in ("a", "b")}, timeout=10)
            grid.finish()
            for thread in threads:
                thread.join()
        # one record each: a capture handler another test left on the logger must not count it twice
        records = list({id(r): r for r in caplog.records}.values())
        debug = [r for r in records if r.levelno == logging.DEBUG and "test_echo" in r.getMessage()]
        assert len(debug) == 2 * 4 * replicates  # per party: sent, received, reply uploaded, reply received
        return [r.getMessage() for r in records if r.levelno >= logging.INFO]

    assert len(info_lines(20)) == len(info_lines(2))


def test_party_of_another_protocol_version_is_refused_in_one_line(grid, study_ca, monkeypatch):
    monkeypatch.setattr("collabcausal.protocol.client.PROTOCOL_VERSION", 1)  # a party of v1 (array digests)
    party = PartyThread(small_party("a"), grid.address, tls_of(study_ca, "a"))
    party.join()
    assert isinstance(party.error, StudyFailedError) and "\n" not in str(party.error)
    assert f"party 'a' speaks protocol v1, this analyst v{PROTOCOL_VERSION}" in str(party.error)


def test_send_each_asks_every_party_at_once_and_keeps_the_request_order(grid, study_ca):
    parties = [PartyThread(small_party(name), grid.address, tls_of(study_ca, name)) for name in ("a", "b")]
    wait_until_joined(grid, ["a", "b"])
    # each party answers only once both are running the request: asked one at a time, neither would
    replies, lost = grid.send_each({name: Message("test_rendezvous") for name in ("b", "a")}, timeout=60)
    assert lost == set() and list(replies) == ["b", "a"]
    assert [reply.params["party"] for reply in replies.values()] == ["b", "a"]
    grid.finish()
    for party in parties:
        party.join()
        assert party.error is None


def test_send_each_reports_a_party_that_does_not_answer_as_lost(grid, study_ca):
    party = PartyThread(small_party("a"), grid.address, tls_of(study_ca, "a"))
    wait_until_joined(grid, ["a"])
    echo = Message("test_echo", {}, {"v": np.arange(3.0)})
    replies, lost = grid.send_each({"a": echo, "b": echo}, timeout=2)
    assert lost == {"b"} and list(replies) == ["a"]
    np.testing.assert_array_equal(replies["a"].array("v"), np.arange(3.0) * 2)
    with pytest.raises(StudyFailedError, match=r"^no reply from b to 'test_echo' within 2 s"):
        grid.send_and_receive({"a": echo, "b": echo}, timeout=2)
    grid.finish()
    party.join()
