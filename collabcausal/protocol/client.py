"""The party's side of the wire: dial out to the analyst, pull tasks, answer them, upload.

:class:`PartyClient` needs no inbound port: it registers, long-polls ``PullTask`` for the next
request, runs it through :meth:`collabcausal.party.node.Party.handle` (policy, ledger and audit
apply there) and uploads the reply, until the analyst says the study is done. A lost connection
(an analyst restart, a network blip) of a running study is retried with backoff for up to
``reconnect_timeout`` seconds, re-registering when the analyst lost its state; before the first
join, an analyst that cannot be reached (DNS failure, connection refused) is retried only for
``connect_timeout`` seconds and then reported in one line naming the cause. An outage is logged
once when it starts and once, with the attempts it took, when it ends. Refusals that retrying cannot fix (a
certificate the analyst rejects, a party off the roster) end the loop with :class:`IdentityError`.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import grpc

from collabcausal import __version__
from collabcausal.errors import CollabCausalError, ConfigError, IdentityError, ProtocolError, StudyFailedError
from collabcausal.logs import log_request
from collabcausal.messages import Message
from collabcausal.party.node import Party
from collabcausal.party.request_limits import request_byte_limit
from collabcausal.protocol.arrays import DEFAULT_MAX_MESSAGE_BYTES, Envelope, message_frames, read_message
from collabcausal.protocol.generated import collabcausal_pb2 as pb
from collabcausal.protocol.generated import collabcausal_pb2_grpc as pb_grpc
from collabcausal.protocol.server import PROTOCOL_VERSION, grpc_options
from collabcausal.protocol.sessions import HEARTBEAT_SECONDS, SESSION_METADATA
from collabcausal.protocol.tls import (
    PARTY_METADATA,
    TlsFiles,
    channel_credentials,
    diagnose_refusal,
    require_loopback,
)
from collabcausal.protocol.wire import study_stub

CONNECT_TIMEOUT = 10.0


class PartyClient:
    """A party's connection to the analyst.

    Parameters
    ----------
    party : Party
        The node answering requests.
    address : str
        The analyst's ``host:port``.
    tls : TlsFiles or None
        CA, this party's certificate and key; ``None`` for plaintext (loopback only, warns).
    study : str
        The study id this party agreed to join ("" accepts any).
    reconnect_timeout : float
        Seconds to keep trying while the analyst of a running study is unreachable.
    connect_timeout : float
        Seconds to keep trying to reach the analyst before the first join.
    poll_seconds : float
        Long-poll length of one ``PullTask``.
    upload_timeout : float
        Deadline of one upload.
    max_message_bytes : int
        Largest request accepted, in bytes of arrays; lowered to the party policy's
        ``max_request_bytes`` so an oversized request is refused from its header, unbuffered.
    progress : callable, optional
        ``progress(event)`` for status lines (joins, refusals, failures); each answered request is a
        DEBUG line (:func:`collabcausal.logs.log_request`).
    heartbeat_seconds : float
        While it computes a task, the party calls ``Status`` this often so the analyst knows it is
        alive (:mod:`collabcausal.protocol.sessions`).
    """

    def __init__(
        self,
        party: Party,
        address: str,
        *,
        tls: TlsFiles | None,
        study: str = "",
        reconnect_timeout: float = 300.0,
        connect_timeout: float = CONNECT_TIMEOUT,
        poll_seconds: float = 10.0,
        upload_timeout: float = 600.0,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        progress: Callable[[str], None] | None = None,
        heartbeat_seconds: float = HEARTBEAT_SECONDS,
    ) -> None:
        self.party = party
        self.address = address
        self.tls = tls
        self.study = study
        self.reconnect_timeout = reconnect_timeout
        self.connect_timeout = connect_timeout
        self.poll_seconds = poll_seconds
        self.upload_timeout = upload_timeout
        limit = request_byte_limit(party.policy)
        self.max_message_bytes = max_message_bytes if limit is None else min(max_message_bytes, limit)
        self._progress = progress or (lambda event: None)
        self._metadata = ((PARTY_METADATA, party.name), (SESSION_METADATA, uuid.uuid4().hex))
        self.heartbeat_seconds = heartbeat_seconds
        self.tasks_done = 0

    def run(self) -> str:
        """Serve the study until the analyst ends it; return the analyst's closing note.

        Raises
        ------
        IdentityError
            The analyst refused this party's certificate or identity.
        StudyFailedError
            The analyst failed the study, could not be reached within ``connect_timeout`` s before
            the first join, or stayed unreachable for ``reconnect_timeout`` s during the study.
        """
        if self.tls is None:
            require_loopback(self.address)
            credentials = None
        else:
            identity = self.tls.check()
            if identity != self.party.name:
                raise IdentityError(
                    f"certificate {self.tls.cert} is issued to {identity!r}, but this party is {self.party.name!r}",
                    "set [party] name to the certificate's name or use the right certificate",
                )
            credentials = channel_credentials(self.tls)
        channel = (
            grpc.secure_channel(self.address, credentials, options=grpc_options())
            if credentials is not None
            else grpc.insecure_channel(self.address, options=grpc_options())
        )
        with channel:
            return self._loop(study_stub(channel))

    def _loop(self, stub: pb_grpc.StudyStub) -> str:
        run_id = ""
        joined = False
        unreachable_since: float | None = None
        attempts = 0
        backoff = 0.1
        duplicate_since: float | None = None
        while True:
            try:
                if not run_id:
                    run_id = self._register(stub)
                    joined = True
                envelope = self._pull(stub, run_id)
                if unreachable_since is not None:
                    self._progress(
                        f"analyst reachable again after {attempts} attempts in "
                        f"{time.monotonic() - unreachable_since:.1f} s"
                    )
                unreachable_since, attempts, backoff = None, 0, 0.1
                if envelope is None:
                    continue
                if envelope.state == pb.DONE:
                    self._progress(f"study finished: {envelope.detail}")
                    return envelope.detail
                if envelope.state == pb.FAILED:
                    raise StudyFailedError(
                        f"the analyst stopped the study: {envelope.detail}",
                        "nothing more is asked of this party; the study coordinator has the analyst's log",
                    )
                if envelope.state == pb.TASK:
                    self._answer(stub, envelope)
            except grpc.RpcError as err:
                code, details = err.code(), err.details() or ""
                if code == grpc.StatusCode.FAILED_PRECONDITION and "register again" in details:
                    run_id = ""
                    continue
                if code == grpc.StatusCode.ALREADY_EXISTS:  # another session of this name; gone soon if it crashed
                    duplicate_since = self._wait_for_the_other_session(details, duplicate_since)
                    continue
                if code == grpc.StatusCode.NOT_FOUND:  # [party] study is not the analyst's study
                    raise ConfigError(f"the analyst refused to register this party: {details}", None) from None
                if code == grpc.StatusCode.PERMISSION_DENIED:
                    raise IdentityError(f"the analyst refused this party: {details}", None) from None
                if code == grpc.StatusCode.FAILED_PRECONDITION:
                    raise StudyFailedError(f"the analyst refused to register this party: {details}") from None
                if not connection_lost(code, details):
                    raise ProtocolError(
                        f"the analyst answered {code.name}: {details}", "see the analyst's log"
                    ) from None
                self._refused_connection(code, details)
                now = time.monotonic()
                limit = self.reconnect_timeout if joined else self.connect_timeout
                if unreachable_since is None:
                    unreachable_since = now
                    cause = unreachable_cause(details)
                    self._progress(f"analyst unreachable ({cause}); retrying for up to {limit:g} s")
                attempts += 1
                if now - unreachable_since > limit:
                    raise StudyFailedError(
                        f"the analyst at {self.address} was unreachable for {limit:g} s "
                        f"({attempts} attempts): {unreachable_cause(details)}",
                        "check the address and that `collabcausal analyst serve` is running",
                    ) from None
                time.sleep(backoff)
                backoff = min(2 * backoff, 5.0)

    def _register(self, stub: pb_grpc.StudyStub) -> str:
        reply = stub.Register(
            pb.RegisterRequest(
                protocol_version=PROTOCOL_VERSION,
                party=self.party.name,
                study=self.study,
                software_version=__version__,
            ),
            timeout=30.0,
            metadata=self._metadata,
        )
        if reply.protocol_version != PROTOCOL_VERSION:
            raise StudyFailedError(
                f"the analyst speaks protocol v{reply.protocol_version}, this party v{PROTOCOL_VERSION}",
                "install the same collabcausal version on both sides",
            )
        self._progress(f"joined study {reply.study!r} as {reply.party!r}")
        return reply.run_id

    def _pull(self, stub: pb_grpc.StudyStub, run_id: str) -> Envelope | None:
        """The next task or study state; ``None`` after refusing a malformed task (the party keeps serving)."""
        frames = stub.PullTask(
            pb.PullRequest(party=self.party.name, run_id=run_id, wait_ms=int(self.poll_seconds * 1000)),
            timeout=self.poll_seconds + self.upload_timeout,
            metadata=self._metadata,
        )
        seen: list[pb.Frame] = []

        def recorded() -> Iterator[pb.Frame]:
            for frame in frames:
                if not seen:
                    seen.append(frame)
                yield frame

        try:
            return read_message(recorded(), max_bytes=self.max_message_bytes)
        except ProtocolError as exc:
            frames.cancel()
            header = seen[0].header if seen and seen[0].WhichOneof("kind") == "header" else None
            task_id = header.task_id if header is not None else ""
            self._progress(f"refused a malformed task: {exc}")
            if self.party.audit is not None:
                operation = header.operation if header is not None and header.operation else "(malformed)"
                self.party.audit.refused(self.party, Message(operation, {"task_id": task_id}), exc)
            if task_id:
                refusal = message_frames(None, task_id=task_id, error=exc)
                stub.UploadResult(iter(refusal), timeout=self.upload_timeout, metadata=self._metadata)
            return None

    def _answer(self, stub: pb_grpc.StudyStub, envelope: Envelope) -> None:
        request = envelope.message
        if request is None:
            raise ProtocolError("the analyst sent a task without a request", "upgrade both sides to one version")
        log_request(self.party.name, f"{request.operation}: received")
        start = time.monotonic()
        reply: Message | None = None
        error: CollabCausalError | None = None
        with self._heartbeat(stub):
            try:
                reply = self.party.handle(request)
            except CollabCausalError as exc:
                error = exc
            except Exception as exc:  # a bug in an operation must reach the analyst, not kill the party
                error = CollabCausalError(f"{request.operation} failed: {type(exc).__name__}: {exc}")
            computed = time.monotonic()
            try:
                frames = message_frames(reply, task_id=envelope.task_id, error=error)
            except ProtocolError as exc:  # a reply that cannot travel is reported, not retried forever
                error = exc
                frames = message_frames(None, task_id=envelope.task_id, error=exc)
            ack = stub.UploadResult(frames.encoded(), timeout=self.upload_timeout, metadata=self._metadata)
        self.tasks_done += 1
        outcome = f"refused ({error.problem}; its fix went to the analyst)" if error else "reply uploaded"
        late = "" if ack.accepted else ", the analyst no longer waited for it"
        line = (
            f"{request.operation}: {outcome} (compute {computed - start:.2f} s, upload "
            f"{time.monotonic() - computed:.2f} s{late})"
        )
        if error is None and ack.accepted:
            log_request(self.party.name, line)
        else:
            self._progress(line)

    def _wait_for_the_other_session(self, details: str, since: float | None) -> float:
        """Wait a second before registering again while another session holds this party's name.

        A crashed process of this party is replaced once the analyst finds it gone; a live one is not,
        and after ``connect_timeout`` s this process gives up with :class:`IdentityError`.
        """
        now = time.monotonic()
        if since is None:
            self._progress(f"another process answers for this party; waiting up to {self.connect_timeout:g} s for it")
            since = now
        if now - since > self.connect_timeout:
            raise IdentityError(f"the analyst refused this party: {details}", None)
        time.sleep(1.0)
        return since

    @contextmanager
    def _heartbeat(self, stub: pb_grpc.StudyStub) -> Iterator[None]:
        """Call ``Status`` every ``heartbeat_seconds`` meanwhile, so the analyst knows this party is alive."""
        stop = threading.Event()

        def beat() -> None:
            while not stop.wait(self.heartbeat_seconds):
                try:
                    stub.Status(pb.StatusRequest(), timeout=self.heartbeat_seconds, metadata=self._metadata)
                except grpc.RpcError:
                    pass  # the task's own calls report a lost analyst

        thread = threading.Thread(target=beat, name=f"{self.party.name}-heartbeat", daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join()

    def _refused_connection(self, code: grpc.StatusCode, details: str) -> None:
        if code != grpc.StatusCode.UNAVAILABLE or "refused" in details.lower():
            return
        reason = diagnose_refusal(self.address, self.tls)
        if reason is None:
            return
        if self.tls is None:
            raise IdentityError(
                f"the analyst at {self.address} refused a plaintext connection: {reason}",
                "drop --insecure and configure ca, cert and key in party.toml",
            )
        raise IdentityError(
            f"the TLS handshake with the analyst at {self.address} failed: {reason}",
            "use the certificate, key and ca.pem issued for this study (same study CA, not expired)",
        )


def connection_lost(code: grpc.StatusCode, details: str) -> bool:
    """A call ended by the connection (retried), not by the analyst's answer.

    gRPC reports a stream torn down under it as ``UNKNOWN: Stream removed``, e.g. when TLS finds a
    record changed in transit (``TSI_DATA_CORRUPTED``) and drops the connection.
    """
    if code == grpc.StatusCode.UNKNOWN:
        return "stream removed" in details.lower()
    return code in (
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.DEADLINE_EXCEEDED,
        grpc.StatusCode.CANCELLED,
        grpc.StatusCode.INTERNAL,
    )


def unreachable_cause(details: str) -> str:
    """gRPC's description of an unreachable peer, reduced to its cause in a few words."""
    lowered = details.lower()
    for needle, cause in (
        ("dns resolution failed", "the analyst's host name does not resolve (DNS failure)"),
        ("errors resolving", "the analyst's host name does not resolve (DNS failure)"),
        ("connection refused", "connection refused (nothing listens on that port)"),
        ("deadline", "no answer before the deadline"),
        ("stream removed", "the connection dropped: the analyst closed it or the network broke it"),
        ("socket closed", "the connection dropped: the analyst closed it or the network broke it"),
    ):
        if needle in lowered:
            return cause
    return " ".join(details.split())[:200] or "no details from gRPC"
