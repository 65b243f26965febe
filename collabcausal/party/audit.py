"""A party's audit log: one JSON line per request received, per release and per refusal.

:meth:`collabcausal.party.node.Party.handle` writes, through :class:`JsonlAuditLog`:

``received``
    before anything else: operation, study, params, and for every array received its shape,
    dtype and SHA-256 (so weights, arms or rows sent by a hostile analyst are on record), plus
    ``request_sha256`` (:func:`payload_digest` of the request);
``released``
    before the reply leaves the party: the same ``request_sha256``, every array sent (shape,
    dtype, SHA-256: what was sent, whichever transport carried it),
    the reply's ``sha256`` and the ledger charges the release made (``charges``: id, epsilon,
    delta);
``refused``
    a request the policy, the ledger or the operation refused (or that failed): the error's
    class and one-line problem, and any charge made before the failure;
``data_loaded``
    each time the party loads its table (no request): the source (file path, or database URL
    without password), ``query_sha256`` (the cohort query's SHA-256) and ``rows``.

Every line carries ``seq`` (1, 2, ... over the file) and ``prev``, the SHA-256 of the previous
line's bytes: a hash chain that shows a line removed, edited or reordered (it is not a signature:
whoever can write the file can rewrite the whole chain). Each line is written atomically in the
sense that matters after a crash: the file is opened with ``O_APPEND``, locked (``flock``), and
the complete line goes out in one ``os.write`` followed by ``fsync``, before the reply is
released. A process killed during that write can leave at most a truncated last line (a "torn
tail"); the next writer seals it with a newline instead of appending to it, so no two records are
ever merged, and :mod:`collabcausal.party.audit_verify` reports torn lines instead of failing on
them. The file is created with mode 0600 (and an existing log is set to 0600); nothing rewrites it.

A cut tail leaves a valid chain; with ``head`` (:class:`~collabcausal.party.audit_head.AuditHead`)
each append is followed, still under the lock, by storing the new last record's ``seq`` and
SHA-256 apart from the log (the ledger, or a file beside the log), against which
``collabcausal party audit`` detects truncation; the order (log first, then head) and what a crash
between them leaves are in :mod:`collabcausal.party.audit_head`.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
from collections.abc import Iterable, Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from collabcausal.errors import ConfigError
from collabcausal.messages import Message, nesting
from collabcausal.party.audit_verify import line_digest, read_audit_log

if TYPE_CHECKING:
    from collabcausal.party.audit_head import AuditHead
    from collabcausal.party.node import Party
    from collabcausal.party.sources import DataSource

_TAIL_BLOCK = 1 << 16
_MAX_DEPTH = 64


def array_digest(array: np.ndarray) -> str:
    """Hex SHA-256 of an array's bytes in C order."""
    return hashlib.sha256(np.require(array, requirements="C").reshape(-1).view(np.uint8)).hexdigest()


def payload_digest(message: Message, records: Mapping[str, Mapping[str, Any]] | None = None) -> str:
    """Hex SHA-256 of a message's payload: its params as canonical JSON, then each array.

    Each array contributes its name, dtype, shape and SHA-256, in name order; ``records`` are the
    message's :func:`array_records` when the caller has them already (each array is hashed once).
    """
    records = array_records(message.arrays) if records is None else records
    digest = hashlib.sha256(_params_json(message.params).encode())
    for name in sorted(records):
        record = records[name]
        digest.update(f"\n{name}:{record['dtype']}:{tuple(record['shape'])}\n".encode())
        digest.update(bytes.fromhex(record["sha256"]))
    return digest.hexdigest()


def array_records(arrays: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Shape, dtype and SHA-256 of every array, by name."""
    out = {}
    for name, value in arrays.items():
        array = np.asarray(value)
        out[name] = {"shape": list(array.shape), "dtype": array.dtype.str, "sha256": array_digest(array)}
    return out


class JsonlAuditLog:
    """Append-only, hash-chained JSONL audit log (see the module docstring).

    Parameters
    ----------
    path : path
        The log file (created with its folder if absent, mode 0600).
    head : AuditHead, optional
        Where the chain head is stored after each append (truncation detection); ``None``: nowhere.
    """

    def __init__(self, path: str | Path, *, head: AuditHead | None = None) -> None:
        self.path = Path(path)
        self.head = head
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                os.fchmod(fd, 0o600)
            finally:
                os.close(fd)
        except OSError as exc:
            raise ConfigError(f"cannot write the audit log {self.path} ({exc.strerror})", "fix [audit] path") from None

    def received(self, party: Party, request: Message) -> int:
        """Record a request as it arrives, before it is authorized or run; return the record's ``seq``."""
        records = array_records(request.arrays)
        return self._write(
            party,
            request,
            "received",
            request_sha256=payload_digest(request, records),
            params=json.loads(_params_json(request.params)),
            arrays=records,
        )

    def released(self, party: Party, request: Message, reply: Message, *, charges: Iterable[Any] = ()) -> int:
        """Record a reply before it leaves the party; return the record's ``seq``."""
        records = array_records(reply.arrays)
        return self._write(
            party,
            request,
            "released",
            arrays=records,
            sha256=payload_digest(reply, records),
            charges=_charges(charges),
        )

    def refused(self, party: Party, request: Message, error: BaseException, *, charges: Iterable[Any] = ()) -> int:
        """Record a refused or failed request; return the record's ``seq``."""
        kind = type(error).__name__
        problem = getattr(error, "problem", str(error))
        return self._write(
            party, request, "refused", error={"kind": kind, "problem": problem}, charges=_charges(charges)
        )

    def entries(self) -> list[dict]:
        """Every complete record, oldest first (torn lines skipped; see :mod:`.audit_verify`)."""
        return read_audit_log(self.path).entries

    def data_loaded(self, party: str, source: DataSource, rows: int) -> int:
        """Record the table a party loaded: source (never a password), query SHA-256, row count."""
        entry: dict[str, Any] = {"event": "data_loaded", "party": party, "source": source.describe(), "rows": rows}
        if source.is_query:
            entry["query_sha256"] = source.query_digest()
        return self._append(entry)

    def _write(
        self, party: Party, request: Message, event: str, *, request_sha256: str | None = None, **fields: Any
    ) -> int:
        """Append one record of ``request`` (its :func:`payload_digest` computed unless given)."""
        return self._append(
            {
                "event": event,
                "party": party.name,
                "study": str(request.params.get("study", "")),
                "operation": request.operation,
                "request_sha256": request_sha256 or payload_digest(request),
                **fields,
                **({} if self.head is None else {"head": self.head.kind}),
            }
        )

    def _append(self, fields: dict[str, Any]) -> int:
        entry = {"time": datetime.now(timezone.utc).isoformat(timespec="milliseconds"), **fields}
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)
        except OSError as exc:
            raise ConfigError(f"cannot write the audit log {self.path} ({exc.strerror})", "fix [audit] path") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            seq, prev, torn = _chain_state(fd)
            line = json.dumps({"seq": seq + 1, "prev": prev, **entry}, sort_keys=True, default=str).encode()
            data = (b"\n" if torn else b"") + line + b"\n"
            written = os.write(fd, data)
            if written != len(data):
                raise ConfigError(
                    f"the audit log {self.path} took {written} of {len(data)} bytes (disk full?)",
                    "free space on the audit log's disk; the reply was not released",
                )
            os.fsync(fd)
            if self.head is not None:  # after the fsync, before the lock goes: see audit_head
                self.head.record(str(entry["party"]), seq + 1, line_digest(line))
        finally:
            os.close(fd)
        return seq + 1


def _params_json(params: Mapping[str, Any]) -> str:
    """Canonical JSON of params; params nested deeper than :data:`_MAX_DEPTH` as a marker string.

    A hostile request may nest its params 100,000 deep; the log records that fact instead of
    failing on it (the policy then refuses the request, see ``max_params_depth``).
    """
    if nesting(dict(params), _MAX_DEPTH)[0] > _MAX_DEPTH:
        return json.dumps(f"params nested deeper than {_MAX_DEPTH} levels")
    return json.dumps(dict(params), sort_keys=True, default=str)


def _charges(charges: Iterable[Any]) -> list[dict[str, Any]]:
    return [{"id": c.id, "epsilon": c.epsilon, "delta": c.delta} for c in charges]


def _chain_state(fd: int) -> tuple[int, str, bool]:
    """``(seq, sha256, torn)`` of the file's last complete record; ``torn`` if it ends mid-line.

    Reads backwards from the end in growing blocks until a complete line parses, so the cost is
    the size of the last record, not of the log. Sealed torn lines (not JSON) are skipped.
    """
    size = os.fstat(fd).st_size
    if size == 0:
        return 0, "", False
    torn = os.pread(fd, 1, size - 1) != b"\n"
    block = _TAIL_BLOCK
    while True:
        start = max(0, size - block)
        text = os.pread(fd, size - start, start)
        lines = text.split(b"\n")
        complete = lines[1:-1] if start > 0 else lines[:-1]
        for line in reversed(complete):
            entry = _parse(line)
            if entry is not None:
                return int(entry.get("seq", 0)), line_digest(line), torn
        if start == 0:
            return 0, "", torn
        block *= 4


def _parse(line: bytes) -> dict | None:
    try:
        entry = json.loads(line)
    except ValueError:
        return None
    return entry if isinstance(entry, dict) else None
