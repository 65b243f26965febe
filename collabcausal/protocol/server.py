"""The analyst's gRPC server: :class:`GrpcGrid`, the :class:`~collabcausal.analyst.grid.Grid` over the wire.

The analyst serves; parties dial out and long-poll for tasks (see docs/protocol.md for why pull).
:meth:`GrpcGrid.send_and_receive` queues one task per party and waits for the uploads; a task
stays queued until its reply is uploaded, so a party that loses its connection or is restarted
mid-task is sent the same task again when it pulls. Identity is the client certificate's common
name (mutual TLS); only parties on the roster are admitted, one live session per name, and a party
silent for ``lost_after`` seconds while it owes a reply is lost (:mod:`collabcausal.protocol.sessions`).
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent import futures
from contextlib import contextmanager
from dataclasses import dataclass

import grpc

from collabcausal import errors
from collabcausal.analyst.grid import Grid
from collabcausal.errors import ProtocolError, StudyFailedError
from collabcausal.logs import log_request
from collabcausal.messages import Message
from collabcausal.protocol.arrays import (
    CHUNK_BYTES,
    DEFAULT_MAX_MESSAGE_BYTES,
    Envelope,
    FrameStream,
    TruncatedStreamError,
    message_frames,
    read_message,
)
from collabcausal.protocol.generated import collabcausal_pb2 as pb
from collabcausal.protocol.generated import collabcausal_pb2_grpc as pb_grpc
from collabcausal.protocol.lost_parties import lost_error
from collabcausal.protocol.sessions import (
    HEARTBEAT_SECONDS,
    LOST_AFTER_SECONDS,
    SESSION_METADATA,
    DuplicateSession,
    PartySessions,
)
from collabcausal.protocol.tls import PARTY_METADATA, TlsFiles, peer_identity, require_loopback, server_credentials
from collabcausal.protocol.wire import add_study_servicer

PROTOCOL_VERSION = 6
"""v2: array bytes without v1's per-array SHA-256; v3: dp_effects' noise replicates range over 1/10 of a sum's range
(1/40 in v2), so a v2 party's replicate sums would be read at the wrong scale; v4: so do the CATE projection's; v5:
the statistics request's ``cross_weight``, which a v4 party would ignore, releasing unweighted cross sums that the
analyst would divide by the weight, and masks derived under each release's terms (docs/protocol.md)."""
MAX_FRAME_BYTES = CHUNK_BYTES + (256 << 10)
MAX_POLL_SECONDS = 30.0
MAX_STREAMS_PER_PARTY = 4
Progress = Callable[[str, str], None]


def grpc_options() -> list[tuple[str, int]]:
    """Channel/server options shared by both ends: frames above ``MAX_FRAME_BYTES`` are refused."""
    return [
        ("grpc.max_receive_message_length", MAX_FRAME_BYTES),
        ("grpc.max_send_message_length", MAX_FRAME_BYTES),
    ]


@dataclass
class _Task:
    task_id: str
    party: str
    request: Message
    frames: FrameStream
    reply: Envelope | None = None
    failure: str = ""
    lost: float | None = None  # seconds the party had been silent when it was declared lost

    @property
    def open(self) -> bool:
        """Still waiting for its reply (neither answered, nor failed by a malformed upload, nor lost)."""
        return self.reply is None and not self.failure and self.lost is None


class GrpcGrid(Grid):
    """Parties connected to this analyst over gRPC.

    Parameters
    ----------
    roster : sequence of str
        Party identities admitted (certificate common names).
    address : str
        ``host:port`` to listen on; port 0 picks a free port (see :attr:`address` after start).
    tls : TlsFiles or None
        The analyst's certificate, key and the study CA; ``None`` serves plaintext, allowed only
        on a loopback address (with a warning).
    study : str
        Study identifier; a party registering for another study is refused.
    task_timeout : float
        Default seconds :meth:`send_and_receive` waits for all replies.
    max_message_bytes : int
        Largest upload accepted (sum of its arrays' bytes).
    progress : callable, optional
        ``progress(party, event)`` called on joins, refused replies and failures; each task sent
        and reply received is a DEBUG line (:func:`collabcausal.logs.log_request`), one per request.
    lost_after : float, optional
        Seconds of silence after which a party owing a reply is lost, named at once rather than at
        the deadline (default :data:`~collabcausal.protocol.sessions.LOST_AFTER_SECONDS`; a
        deadline shorter than that ends the wait first).
    """

    def __init__(
        self,
        roster: Sequence[str],
        *,
        address: str = "127.0.0.1:0",
        tls: TlsFiles | None,
        study: str = "study",
        task_timeout: float = 600.0,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        progress: Progress | None = None,
        lost_after: float | None = None,
    ) -> None:
        if len(set(roster)) != len(roster) or not roster:
            raise StudyFailedError(f"invalid roster {list(roster)}", "list every party once, at least one")
        self.roster = tuple(roster)
        self.study = study
        self.task_timeout = task_timeout
        self.max_message_bytes = max_message_bytes
        self._tls = tls
        self._progress = progress or (lambda party, event: None)
        self._cond = threading.Condition()
        self._joined: dict[str, float] = {}
        self._told_done: set[str] = set()
        self._pending: dict[str, _Task] = {}
        self._streams: Counter[str] = Counter()
        self._sessions = PartySessions(LOST_AFTER_SECONDS if lost_after is None else lost_after)
        self._received: dict[str, Counter[str]] = {name: Counter() for name in roster}  # replies per operation
        self._state = pb.IDLE
        self._detail = ""
        self.run_id = uuid.uuid4().hex
        if tls is None:
            require_loopback(address)
        self._server = grpc.server(
            futures.ThreadPoolExecutor(
                max_workers=MAX_STREAMS_PER_PARTY * len(roster) + 8, thread_name_prefix="collabcausal-grid"
            ),
            options=[*grpc_options(), ("grpc.so_reuseport", 0)],  # a second analyst on the port must fail
        )
        add_study_servicer(_Servicer(self), self._server)
        host = address.rsplit(":", 1)[0]
        try:
            if tls is None:
                port = self._server.add_insecure_port(address)
            else:
                port = self._server.add_secure_port(address, server_credentials(tls))
        except RuntimeError:
            port = 0
        if port == 0:
            raise StudyFailedError(
                f"cannot listen on {address}: the port is in use or the address is not this machine's",
                "choose a free port or another address",
            )
        self.address = f"{host}:{port}"
        self._server.start()

    # ---- Grid -------------------------------------------------------------------------------
    def party_names(self) -> list[str]:
        with self._cond:
            return sorted(self._joined)

    def send_and_receive(self, requests: Mapping[str, Message], *, timeout: float | None = None) -> dict[str, Message]:
        limit = self.task_timeout if timeout is None else timeout
        tasks = self._exchange(requests, limit)
        lost = {name: task for name, task in tasks.items() if task.lost is not None}
        if lost:
            raise self._lost(lost)
        missing = sorted(name for name, task in tasks.items() if task.open)
        if missing:
            raise _no_reply(missing, next(iter(requests.values())).operation, limit)
        malformed = [task for task in tasks.values() if task.failure]
        if malformed:
            raise _malformed(malformed[0])
        return {name: _outcome(task, limit) for name, task in tasks.items()}

    def send_each(
        self, requests: Mapping[str, Message], *, timeout: float | None = None
    ) -> tuple[dict[str, Message], set[str]]:
        """:meth:`Grid.send_each <collabcausal.analyst.grid.Grid.send_each>` with every task queued at once.

        The parties work concurrently; a party that misses the deadline is lost, as it would be
        asked alone, and the replies keep the order of ``requests`` whatever order they arrive in.
        """
        limit = self.task_timeout if timeout is None else timeout
        replies, lost = {}, set()
        for name, task in self._exchange(requests, limit).items():
            try:
                replies[name] = self._outcome(task, limit)
            except StudyFailedError:
                lost.add(name)
        return replies, lost

    def _outcome(self, task: _Task, limit: float) -> Message:
        """:func:`_outcome`, and for a lost party the error naming it and what was charged."""
        if task.lost is not None:
            raise self._lost({task.party: task})
        return _outcome(task, limit)

    def _lost(self, tasks: Mapping[str, _Task]) -> StudyFailedError:
        with self._cond:
            received = {name: Counter(ops) for name, ops in self._received.items()}
        return lost_error(
            {name: task.request.operation for name, task in tasks.items()},
            {name: task.lost or 0.0 for name, task in tasks.items()},
            received,
            heartbeat=HEARTBEAT_SECONDS,
        )

    def _exchange(self, requests: Mapping[str, Message], limit: float) -> dict[str, _Task]:
        """Queue one task per party and wait until each is answered or failed, or ``limit`` seconds pass.

        The tasks are dequeued on return: a reply uploaded after the deadline is refused as late.
        """
        unknown = [name for name in requests if name not in self.roster]
        if unknown:
            raise StudyFailedError(f"party {unknown[0]!r} is not on the study roster", "check the study roster")
        tasks = {}
        for name, message in requests.items():
            task_id = uuid.uuid4().hex
            tasks[name] = _Task(task_id, name, message, message_frames(message, task_id=task_id))
        deadline = time.monotonic() + limit
        with self._cond:
            busy = [name for name in tasks if name in self._pending]
            if busy:
                raise StudyFailedError(f"party {busy[0]!r} already has a task outstanding", "send one task at a time")
            self._pending.update(tasks)
            self._cond.notify_all()
            try:
                while any(task.open for task in tasks.values()) and (remaining := deadline - time.monotonic()) > 0:
                    self._cond.wait(min(remaining, 1.0))
                    self._mark_lost(tasks)
            finally:
                for name in tasks:
                    self._pending.pop(name, None)
        return tasks

    def _mark_lost(self, tasks: Mapping[str, _Task]) -> None:
        """Declare lost each party owing a reply that has been silent for ``lost_after`` s (caller holds the lock)."""
        owing = [name for name, task in tasks.items() if task.open]
        for name, silence in self._sessions.lost(owing, self._streams).items():
            tasks[name].lost = silence
            self._progress(name, f"lost during {tasks[name].request.operation!r}: no contact for {silence:.0f} s")

    # ---- study lifecycle --------------------------------------------------------------------
    def wait_for_parties(self, timeout: float, *, on_missing: str = "fail") -> list[str]:
        """Wait until every roster party has joined; return the parties that joined.

        Parameters
        ----------
        timeout : float
            The join deadline in seconds.
        on_missing : {"fail", "continue"}
            What to do when some parties have not joined by the deadline: raise
            :class:`StudyFailedError` naming them, or go on without them (if any joined).
        """
        deadline = time.monotonic() + timeout
        with self._cond:
            while len(self._joined) < len(self.roster) and (remaining := deadline - time.monotonic()) > 0:
                self._cond.wait(remaining)
            joined = sorted(self._joined)
        missing = [name for name in self.roster if name not in joined]
        if missing and (on_missing == "fail" or not joined):
            raise StudyFailedError(
                f"part{'ies' if len(missing) > 1 else 'y'} {', '.join(missing)} did not join study "
                f"{self.study!r} within {timeout:g} s",
                "start them with `collabcausal party join` and check their output for certificate or roster "
                'errors, or set on_missing_party = "continue" in study.toml',
            )
        for name in missing:
            self._progress(name, f"did not join within {timeout:g} s; continuing without it")
        return joined

    def finish(self, *, failed: str | errors.CollabCausalError | None = None, linger: float = 10.0) -> None:
        """End the study (DONE, or FAILED with a reason), tell the parties, stop serving.

        Of an error the parties are told the problem only: its fix is the coordinator's (it names
        study.toml, the analyst's log), not the hospital's. Waits up to ``linger`` seconds for every
        joined party to learn the outcome on its next poll.
        """
        deadline = time.monotonic() + linger
        if isinstance(failed, errors.CollabCausalError):
            failed = failed.problem
        with self._cond:
            self._state = pb.FAILED if failed else pb.DONE
            self._detail = failed or "study complete"
            self._cond.notify_all()
            while not self._told_done >= set(self._joined) and (remaining := deadline - time.monotonic()) > 0:
                self._cond.wait(remaining)
        self.stop()

    def stop(self, grace: float = 1.0) -> None:
        """Stop serving now (in-flight calls get ``grace`` seconds)."""
        self._server.stop(grace).wait(grace + 1.0)

    def __enter__(self) -> GrpcGrid:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ---- used by the servicer ---------------------------------------------------------------
    def _identify(self, context: grpc.ServicerContext, *, registering: bool = False) -> str:
        """The calling party's name (refused off the roster, or from a session another process replaced)."""
        metadata = dict(context.invocation_metadata())
        claimed = metadata.get(PARTY_METADATA, "")
        name = claimed
        if self._tls is not None:
            name = peer_identity(context) or ""
            if claimed and claimed != name:
                context.abort(
                    grpc.StatusCode.PERMISSION_DENIED,
                    f"certificate identity {name!r} does not match the party name {claimed!r}; "
                    "fix: set [party] name to the name on your certificate",
                )
        if name not in self.roster:
            context.abort(
                grpc.StatusCode.PERMISSION_DENIED,
                f"party {name!r} is not on the roster of study {self.study!r} ({', '.join(self.roster)}); "
                "fix: ask the study coordinator to add you to study.toml",
            )
        if not registering:
            session = metadata.get(SESSION_METADATA, "")
            with self._cond:
                replaced = name in self._joined and not self._sessions.current(name, session)
                self._sessions.seen(name, session)
            if replaced:
                context.abort(
                    grpc.StatusCode.FAILED_PRECONDITION,
                    f"another process answers for party {name!r} now: register again",
                )
        return name

    def _wake(self) -> None:
        with self._cond:
            self._cond.notify_all()

    def _register(self, request: pb.RegisterRequest, context: grpc.ServicerContext) -> pb.RegisterReply:
        name = self._identify(context, registering=True)
        if request.protocol_version != PROTOCOL_VERSION:
            context.abort(
                grpc.StatusCode.FAILED_PRECONDITION,
                f"party {name!r} speaks protocol v{request.protocol_version}, this analyst v{PROTOCOL_VERSION}; "
                "fix: install the same collabcausal version on both sides",
            )
        if request.study and request.study != self.study:
            context.abort(
                grpc.StatusCode.NOT_FOUND,  # the party's configuration names a study not served here
                f"party {name!r} asked to join study {request.study!r} but this analyst runs {self.study!r}; "
                "fix: set [party] study in party.toml to the coordinator's study id",
            )
        session = dict(context.invocation_metadata()).get(SESSION_METADATA, "")
        with self._cond:
            try:
                event = self._sessions.register(name, session, self._streams[name])
            except DuplicateSession as exc:
                refusal = str(exc)
            else:
                refusal = ""
                self._joined[name] = time.time()
                self._cond.notify_all()
        if refusal:
            self._progress(name, f"second process refused: {refusal}")
            context.abort(
                grpc.StatusCode.ALREADY_EXISTS,
                f"{refusal}; fix: stop the other `collabcausal party join` of {name} (one process per party)",
            )
        self._progress(name, event)
        return pb.RegisterReply(protocol_version=PROTOCOL_VERSION, study=self.study, party=name, run_id=self.run_id)

    @contextmanager
    def _stream_slot(self, name: str, context: grpc.ServicerContext) -> Iterator[None]:
        """Hold one of the party's :data:`MAX_STREAMS_PER_PARTY` stream slots (so one party cannot starve the rest)."""
        with self._cond:
            if self._streams[name] >= MAX_STREAMS_PER_PARTY:
                self._progress(name, f"stream refused: already {MAX_STREAMS_PER_PARTY} open")
                context.abort(
                    grpc.StatusCode.RESOURCE_EXHAUSTED,
                    f"party {name!r} already has {MAX_STREAMS_PER_PARTY} streams open; "
                    "fix: run one collabcausal party join per party",
                )
            self._streams[name] += 1
        session = dict(context.invocation_metadata()).get(SESSION_METADATA, "")
        try:
            yield
        finally:
            with self._cond:
                self._streams[name] -= 1
                self._sessions.seen(name, session)  # silence counts from the end of its last stream

    def _pull(self, request: pb.PullRequest, context: grpc.ServicerContext) -> Iterator[pb.Frame]:
        name = self._identify(context)
        with self._stream_slot(name, context):
            yield from self._pull_task(name, request, context)

    def _pull_task(self, name: str, request: pb.PullRequest, context: grpc.ServicerContext) -> Iterator[pb.Frame]:
        if request.run_id != self.run_id or name not in self._joined:
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, "unknown run: register again")
        deadline = time.monotonic() + min(request.wait_ms / 1000.0, MAX_POLL_SECONDS)
        context.add_callback(self._wake)  # a cancelled poll frees its thread and stream slot at once
        with self._cond:
            while True:
                task = self._pending.get(name)
                if self._state != pb.IDLE or (task is not None and task.open):
                    break
                remaining = deadline - time.monotonic()
                if remaining <= 0 or not context.is_active():
                    break
                self._cond.wait(remaining)
            state, detail = self._state, self._detail
            if state != pb.IDLE:
                self._told_done.add(name)
                self._cond.notify_all()
                task = None
        if task is None or not task.open:
            yield pb.Frame(header=pb.MessageHeader(state=state, detail=detail))
            return
        log_request(name, f"{task.request.operation}: sent")
        yield from task.frames.encoded()

    def _upload(self, frames: Iterable[pb.Frame], context: grpc.ServicerContext) -> pb.UploadAck:
        name = self._identify(context)
        with self._stream_slot(name, context):
            return self._receive(name, frames, context)

    def _receive(self, name: str, frames: Iterable[pb.Frame], context: grpc.ServicerContext) -> pb.UploadAck:
        """Read one upload; its header is checked against the party's outstanding task before buffering."""

        def outstanding(header: pb.MessageHeader) -> None:
            with self._cond:
                task = self._pending.get(name)
                if task is None or task.task_id != header.task_id or not task.open:
                    raise _NotOutstanding(f"no task {header.task_id!r} outstanding for party {name!r}")

        try:
            envelope = read_message(frames, max_bytes=self.max_message_bytes, check_header=outstanding)
        except _NotOutstanding as exc:
            return pb.UploadAck(accepted=False, detail=str(exc))
        except (grpc.RpcError, TruncatedStreamError):  # what a party's crash or lost connection leaves
            self._progress(name, "upload interrupted; the task stays queued")
            context.abort(grpc.StatusCode.CANCELLED, "upload interrupted")
        except ProtocolError as exc:
            self._progress(name, f"upload refused: {exc}")
            with self._cond:
                task = self._pending.get(name)
                if task is not None and task.open:
                    task.failure = str(exc)
                    self._cond.notify_all()
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        with self._cond:
            task = self._pending.get(name)
            if task is None or task.task_id != envelope.task_id or not task.open:
                return pb.UploadAck(task_id=envelope.task_id, accepted=False, detail="no such task outstanding")
            task.reply = envelope
            if envelope.error is None:
                self._received[name][task.request.operation] += 1
            self._cond.notify_all()
        if envelope.error is None:
            log_request(name, f"{task.request.operation}: reply received")
        else:
            self._progress(name, f"{task.request.operation}: reply refused")
        return pb.UploadAck(task_id=envelope.task_id, accepted=True)

    def _status(self, context: grpc.ServicerContext) -> pb.StatusReply:
        self._identify(context)
        with self._cond:
            return pb.StatusReply(
                study=self.study,
                state=self._state,
                roster=self.roster,
                connected=sorted(self._joined),
                detail=self._detail,
            )


class _Servicer(pb_grpc.StudyServicer):
    def __init__(self, grid: GrpcGrid) -> None:
        self._grid = grid

    def Register(self, request: pb.RegisterRequest, context: grpc.ServicerContext) -> pb.RegisterReply:
        return self._grid._register(request, context)

    def PullTask(self, request: pb.PullRequest, context: grpc.ServicerContext) -> Iterator[pb.Frame]:
        return self._grid._pull(request, context)

    def UploadResult(self, request_iterator: Iterable[pb.Frame], context: grpc.ServicerContext) -> pb.UploadAck:
        return self._grid._upload(request_iterator, context)

    def Status(self, request: pb.StatusRequest, context: grpc.ServicerContext) -> pb.StatusReply:
        return self._grid._status(context)


class _NotOutstanding(ProtocolError):
    """An upload for a task the analyst no longer waits for (a late or repeated reply)."""


def _no_reply(missing: Sequence[str], operation: str, limit: float) -> StudyFailedError:
    return StudyFailedError(
        f"no reply from {', '.join(missing)} to {operation!r} within {limit:g} s",
        "check that those parties are running (collabcausal party join) and can reach the "
        "analyst, or raise task_timeout in study.toml",
    )


def _malformed(task: _Task) -> StudyFailedError:
    return StudyFailedError(
        f"party {task.party!r} sent a malformed reply to {task.request.operation!r}: {task.failure}",
        f"check {task.party}'s collabcausal version and log; the study cannot use its reply",
    )


def _outcome(task: _Task, limit: float) -> Message:
    """The reply of a task :meth:`GrpcGrid._exchange` returned, or the error it ended with (re-raised)."""
    name = task.party
    if task.open:
        raise _no_reply([name], task.request.operation, limit)
    if task.failure:
        raise _malformed(task)
    envelope = task.reply
    assert envelope is not None
    if envelope.error is not None:
        kind = getattr(errors, envelope.error.kind, errors.CollabCausalError)
        if not (isinstance(kind, type) and issubclass(kind, errors.CollabCausalError)):
            kind = errors.CollabCausalError
        raise kind(f"party {name!r}: {envelope.error.problem}", envelope.error.fix or None)
    if envelope.message is None:
        raise ProtocolError(f"party {name!r} replied to {task.request.operation!r} without a message", "upgrade it")
    return envelope.message
