"""A hostile analyst (a fake one on the generated stubs) sends malformed tasks to a real party client.

Each malformed stream must reach the analyst back as a one-line ProtocolError refusal addressed to
its task (when the stream named one), and the party must keep serving: the honest task sent after
all of them is answered and the party ends cleanly when told the study is done.
"""

from __future__ import annotations

import threading
import uuid
from concurrent import futures

import grpc
import numpy as np
from protocol_helpers import PartyThread, malformed_streams, small_party, tls_of

from collabcausal.errors import StudyFailedError
from collabcausal.ledger import PrivacyLedger
from collabcausal.messages import Message
from collabcausal.party.audit import JsonlAuditLog
from collabcausal.party.audit_verify import read_audit_log
from collabcausal.party.policy import PartyPolicy
from collabcausal.party.request_limits import RequestLimits
from collabcausal.protocol.arrays import message_frames, read_message
from collabcausal.protocol.generated import collabcausal_pb2 as pb
from collabcausal.protocol.generated import collabcausal_pb2_grpc as pb_grpc
from collabcausal.protocol.server import PROTOCOL_VERSION, grpc_options
from collabcausal.protocol.tls import server_credentials


class FakeAnalyst(pb_grpc.StudyServicer):
    """Serves ``tasks`` (frame lists) in order, then DONE; records every upload."""

    def __init__(self, tasks: list[list[pb.Frame]]) -> None:
        self.tasks = list(tasks)
        self.uploads: list = []
        self.lock = threading.Lock()
        self.run_id = uuid.uuid4().hex

    def Register(self, request, context):
        return pb.RegisterReply(protocol_version=PROTOCOL_VERSION, study="s", party=request.party, run_id=self.run_id)

    def PullTask(self, request, context):
        with self.lock:
            task = self.tasks.pop(0) if self.tasks else None
        if task is None:
            yield pb.Frame(header=pb.MessageHeader(state=pb.DONE, detail="done"))
            return
        yield from task

    def UploadResult(self, request_iterator, context):
        envelope = read_message(request_iterator)
        with self.lock:
            self.uploads.append(envelope)
        return pb.UploadAck(task_id=envelope.task_id, accepted=True)


HONEST = list(message_frames(Message("test_echo", {"x": 1}, {"v": np.arange(3.0)}), task_id="honest"))


def _serve(analyst: FakeAnalyst, party, study_ca, **kwargs) -> PartyThread:
    """Serve ``analyst`` on an ephemeral port with mutual TLS until ``party`` has run its study."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4), options=grpc_options())
    pb_grpc.add_StudyServicer_to_server(analyst, server)
    port = server.add_secure_port("127.0.0.1:0", server_credentials(tls_of(study_ca, "analyst")))
    server.start()
    try:
        thread = PartyThread(party, f"127.0.0.1:{port}", tls_of(study_ca, "a"), **kwargs)
        thread.join(60)
    finally:
        server.stop(0)
    return thread


def test_party_refuses_every_malformed_task_in_one_line_and_keeps_serving(study_ca, tmp_path):
    cases = sorted(malformed_streams())
    streams = [malformed_streams(task_id=case)[case] for case in cases]
    analyst = FakeAnalyst([*streams, HONEST])
    events: list[str] = []
    node = small_party("a")
    node.audit = JsonlAuditLog(tmp_path / "audit.jsonl")
    party = _serve(analyst, node, study_ca, progress=events.append)
    assert party.error is None and party.result == "done"
    refusals = {u.task_id: u.error for u in analyst.uploads if u.error is not None}
    headerless = {"no header", "empty stream"}
    assert set(refusals) == set(cases) - headerless
    for case, error in refusals.items():
        assert error.kind == "ProtocolError", case
        assert "\n" not in error.problem and "Traceback" not in error.problem, case
    answers = [u for u in analyst.uploads if u.task_id == "honest"]
    assert len(answers) == 1 and answers[0].error is None
    np.testing.assert_array_equal(answers[0].message.array("v"), np.arange(3.0) * 2)
    assert sum("refused a malformed task" in e for e in events) == len(cases)
    logged = read_audit_log(tmp_path / "audit.jsonl")
    assert not logged.problems and not logged.torn
    refused = [e for e in logged.entries if e["event"] == "refused"]
    assert len(refused) == len(cases) and {e["error"]["kind"] for e in refused} == {
        "ProtocolError",
        "TruncatedStreamError",
    }
    assert [e["event"] for e in logged.entries if e["operation"] == "test_echo"][-2:] == ["received", "released"]


class OlderAnalyst(FakeAnalyst):
    """An analyst of protocol v1 (per-array SHA-256 in the header)."""

    def Register(self, request, context):
        return pb.RegisterReply(protocol_version=1, study="s", party=request.party, run_id=self.run_id)


def test_party_refuses_an_analyst_of_another_protocol_version_in_one_line(study_ca):
    analyst = OlderAnalyst([HONEST])
    party = _serve(analyst, small_party("a"), study_ca)
    assert isinstance(party.error, StudyFailedError) and "\n" not in str(party.error)
    assert f"the analyst speaks protocol v1, this party v{PROTOCOL_VERSION}" in str(party.error)
    assert analyst.uploads == [] and analyst.tasks == [HONEST]


def test_party_refuses_oversized_and_differencing_requests_on_the_wire_before_charging(study_ca, tmp_path):
    party = small_party("a", n=40)
    party.policy = PartyPolicy(
        ["dp_histogram", "weighted_moments", "test_echo"],
        ["x1", "x2"],
        limits=RequestLimits(max_request_bytes=1 << 16),
        allow_plain_with_dp=True,  # a DP and an exact operation on one party: an explicit opt-out
    )
    party.ledger = PrivacyLedger(tmp_path / "l.sqlite", epsilon=10.0, dataset="d")
    grid = {"kind": "grid", "columns": ["x1"], "bounds": [[-3, 3]], "n_cells": [10**12]}
    histogram = Message("dp_histogram", {"study": "s", "epsilon": 1.0, "columns": ["x1"], "partition": grid})
    big = Message("weighted_moments", {"study": "s"}, {"arms": np.zeros(10**5, np.int64), "weights": np.ones(10**5)})
    arms, without = np.arange(40) % 2, np.ones(40)
    without[7] = 0.0  # the second request differs from the first in subject 7 only
    everyone = Message("weighted_moments", {"study": "s"}, {"arms": arms, "weights": np.ones(40)})
    differencing = Message("weighted_moments", {"study": "s"}, {"arms": arms, "weights": without})
    requests = ((histogram, "cells"), (big, "bytes"), (everyone, "everyone"), (differencing, "differencing"))
    tasks = [list(message_frames(m, task_id=t)) for m, t in requests]
    analyst = FakeAnalyst([*tasks, HONEST])
    thread = _serve(analyst, party, study_ca)
    assert thread.error is None and thread.result == "done"
    errors = {u.task_id: u.error for u in analyst.uploads}
    assert errors["cells"].kind == "PolicyError" and "max_cells" in errors["cells"].problem
    assert errors["bytes"].kind == "ProtocolError" and "above the limit of 65536" in errors["bytes"].problem
    assert "max_request_bytes" in errors["bytes"].fix
    assert errors["everyone"] is None
    assert (
        errors["differencing"].kind == "PolicyError"
        and "differs from request 1 scaled on only 1" in errors["differencing"].problem
    )
    assert errors["honest"] is None
    assert party.ledger.history() == []
