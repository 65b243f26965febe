"""Local gRPC studies: every party its own OS process on loopback (``simulate --transport grpc``).

:func:`local_grpc_grid` turns in-memory :class:`~collabcausal.party.node.Party` objects into a real
deployment on this machine: each party's table is written to ``workdir/<name>/table.parquet`` with a
``party.toml``, a study CA and certificates are issued under ``workdir/certs``, the analyst's
:class:`~collabcausal.protocol.server.GrpcGrid` listens on 127.0.0.1 (a free port, mutual TLS by
default), and each party runs ``collabcausal party join`` as a child process. The grid it yields
replaces an :class:`~collabcausal.protocol.inprocess.InProcessGrid`: the same study code gives the
same numbers, bit for bit (tables travel as float64 Parquet, arrays as raw bytes).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

import pandas as pd

from collabcausal.certs import ANALYST, fingerprint, init_ca, issue, load_certificate
from collabcausal.errors import InputError, StudyFailedError
from collabcausal.party.node import Party
from collabcausal.party.operations import registered
from collabcausal.party.policy import PartyPolicy
from collabcausal.party.secret_keys import write_key_file
from collabcausal.protocol.server import GrpcGrid
from collabcausal.protocol.tls import TlsFiles
from collabcausal.secagg.pins import DEFAULT_MIN_PARTIES

TREATMENT, OUTCOME, SUBJECT_ID = "__treatment__", "__outcome__", "__subject_id__"
_THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


class LocalStudy:
    """An analyst grid in this process and party processes on loopback.

    Parameters
    ----------
    parties : sequence of Party
        In-memory parties (no custom ``reducer_factory``: it cannot cross a process boundary). A
        :class:`PartyPolicy` is carried over; otherwise every registered operation and every
        column is allowed, as in process. A party with a ledger gets a fresh ledger of the same
        budget in its folder (``ledger.sqlite``, its ``[privacy]`` section).
    workdir : path
        Where tables, configurations, certificates, audit and party logs go.
    tls : bool
        Mutual TLS (default) or plaintext on loopback.
    study : str
        Study id.
    task_timeout : float
        Default seconds per round of replies.
    """

    def __init__(
        self,
        parties: Sequence[Party],
        *,
        workdir: str | Path,
        tls: bool = True,
        study: str = "simulation",
        task_timeout: float = 600.0,
    ) -> None:
        for party in parties:
            if party.reducer_factory is not None:
                raise InputError(
                    f"party {party.name!r} has a custom reducer_factory, which cannot cross a process",
                    "use the in-process transport for it, or configure it through party.toml",
                )
        self.workdir = Path(workdir)
        self.tls = tls
        self.processes: dict[str, subprocess.Popen] = {}
        self.configs: dict[str, Path] = {}
        certs = self.workdir / "certs"
        analyst_files = None
        if tls:
            init_ca(certs, force=True)
            issue(certs, ANALYST, server=True, force=True)
            analyst_files = TlsFiles(certs / "ca.pem", certs / f"{ANALYST}.pem", certs / f"{ANALYST}.key")
        self.grid = GrpcGrid(
            [p.name for p in parties], address="127.0.0.1:0", tls=analyst_files, study=study, task_timeout=task_timeout
        )
        issued = {party.name: issue(certs, party.name, force=True).cert for party in parties} if tls else {}
        pins = {name: fingerprint(load_certificate(cert)) for name, cert in issued.items()}
        for party in parties:
            self.configs[party.name] = write_party_files(
                party, self.workdir / party.name, self.grid.address, study, tls, pins=pins
            )

    def start_party(self, name: str, *extra_args: str) -> subprocess.Popen:
        """Start (or restart) the process of party ``name``; its output goes to ``<name>/party.log``."""
        log = (self.workdir / name / "party.log").open("ab")
        command = [sys.executable, "-m", "collabcausal.cli", "party", "join", "--config", str(self.configs[name])]
        # One machine's cores shared by every party: no oversubscription by each party's BLAS threads.
        threads = str(max(1, (os.cpu_count() or 1) // len(self.configs)))
        env = {
            **{k: threads for k in _THREAD_VARIABLES},
            **os.environ,
            "PYTHONUNBUFFERED": "1",
            "GRPC_VERBOSITY": "ERROR",
        }
        process = subprocess.Popen(
            [*command, *extra_args], stdout=log, stderr=subprocess.STDOUT, env=env, cwd=self.workdir / name
        )
        log.close()
        self.processes[name] = process
        return process

    def wait_joined(self, timeout: float, *, names: Sequence[str] | None = None) -> None:
        """Wait until every party (or those ``names``) has joined; fail naming a party whose process died or is late."""
        expected = set(self.configs if names is None else names)
        deadline = time.monotonic() + timeout
        while not expected <= set(self.grid.party_names()):
            for name, process in self.processes.items():
                if process.poll() is not None and name not in self.grid.party_names():
                    raise StudyFailedError(
                        f"party process {name!r} exited with code {process.returncode} before joining: "
                        f"{self.log_tail(name)}",
                        f"see {self.workdir / name / 'party.log'}",
                    )
            if time.monotonic() > deadline:
                missing = sorted(expected - set(self.grid.party_names()))
                raise StudyFailedError(f"parties {missing} did not join within {timeout:g} s", "see their party.log")
            time.sleep(0.05)

    def log_tail(self, name: str, lines: int = 3) -> str:
        """The last lines of a party's log, for error messages."""
        text = (self.workdir / name / "party.log").read_text(errors="replace").strip().splitlines()
        return " | ".join(text[-lines:])

    def close(self, *, failed: str | None = None, timeout: float = 10.0) -> None:
        """Finish the study, let the parties exit, stop any that do not."""
        self.grid.finish(failed=failed, linger=min(timeout, 5.0))
        deadline = time.monotonic() + timeout
        for process in self.processes.values():
            try:
                process.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(5.0)


@contextmanager
def local_grpc_grid(
    parties: Sequence[Party],
    *,
    workdir: str | Path,
    tls: bool = True,
    study: str = "simulation",
    join_timeout: float = 120.0,
    task_timeout: float = 600.0,
) -> Iterator[GrpcGrid]:
    """A :class:`GrpcGrid` whose parties run as local processes (see the module docstring).

    Yields once every party has joined; on exit the study is finished and the processes stopped.
    """
    local = LocalStudy(parties, workdir=workdir, tls=tls, study=study, task_timeout=task_timeout)
    failed = None
    try:
        for name in local.configs:
            local.start_party(name)
        local.wait_joined(join_timeout)
        yield local.grid
    except BaseException as exc:
        failed = f"{type(exc).__name__}: {exc}"
        raise
    finally:
        local.close(failed=failed)


def write_party_files(
    party: Party, folder: Path, address: str, study: str, tls: bool, *, pins: Mapping[str, str] | None = None
) -> Path:
    """Write ``table.parquet`` and ``party.toml`` for ``party`` into ``folder``; return the toml path.

    ``pins`` (party name -> certificate fingerprint of every simulated party) become the party's
    ``[secure_aggregation] peers``, with ``min_parties`` the default 3 or every party of a smaller
    simulation, as in process (:func:`collabcausal.party.secagg.attach_identities`).
    """
    folder.mkdir(parents=True, exist_ok=True)
    table = party.table
    frame = pd.DataFrame(table.covariates, columns=list(table.covariate_names))
    data = {"path": "table.parquet"}
    if table.has_labels:
        frame[TREATMENT], frame[OUTCOME] = table.treatment, table.outcome
        data.update(treatment=TREATMENT, outcome=OUTCOME)
    if table.subject_ids is not None:
        frame[SUBJECT_ID] = table.subject_ids
        data["subject_id"] = SUBJECT_ID
    frame.to_parquet(folder / "table.parquet", index=False)
    policy = party.policy if isinstance(party.policy, PartyPolicy) else None
    certs = "../certs"
    sections = {
        "party": {"name": party.name, "study": study},
        "analyst": {"address": address, "insecure": not tls, "reconnect_timeout": 60}
        | (
            {"ca": f"{certs}/ca.pem", "cert": f"{certs}/{party.name}.pem", "key": f"{certs}/{party.name}.key"}
            if tls
            else {}
        ),
        "data": data,
        "policy": {
            "columns": list(table.covariate_names),
            "operations": sorted(policy.operations) if policy else list(registered("collabcausal")),
            "min_subjects": policy.min_subjects if policy else 1,
        }
        | _reduction_policy(policy),
        "audit": {"path": "audit.jsonl"},
    }
    if party.ledger is not None:
        # The party process keeps its own ledger, with the in-process ledger's budget.
        sections["privacy"] = {"epsilon": party.ledger.epsilon, "delta": party.ledger.delta, "ledger": "ledger.sqlite"}
    if party.anchor_key is not None:
        write_key_file(folder / "anchor.key", party.anchor_key)
        sections["anchor"] = {"key_file": "anchor.key"}
    if policy is not None and policy.alignment_key is not None:
        write_key_file(folder / "alignment.key", policy.alignment_key)
        sections["alignment"] = {"key_file": "alignment.key"}
    peers = {name: value for name, value in (pins or {}).items() if name != party.name}
    if peers:
        sections["secure_aggregation"] = {
            "peers": [{"name": name, "fingerprint": value} for name, value in peers.items()],
            "min_parties": min(DEFAULT_MIN_PARTIES, len(peers) + 1),
        }
    path = folder / "party.toml"
    path.write_text("\n".join(_toml_section(name, values) for name, values in sections.items()))
    return path


def _reduction_policy(policy: PartyPolicy | None) -> dict:
    """The reduction keys of ``policy``; a simulation party without a policy allows everything in process,
    so its file allows full rank and any r too."""
    if policy is None:
        return {"allow_full_rank": True, "min_anchors": 1, "max_anchors": 10**9, "max_representation_requests": 10**9,
                "allow_plain_with_dp": True}
    keys = ("allow_full_rank", "min_anchors", "max_anchors", "max_representation_requests", "allow_plain_with_dp")
    out = {k: getattr(policy, k) for k in keys}
    return out if policy.max_components is None else out | {"max_components": policy.max_components}


def _toml_section(name: str, values: dict) -> str:
    lines = [f"[{name}]"] + [f"{key} = {_toml_value(value)}" for key, value in values.items()]
    return "\n".join(lines) + "\n"


def _toml_value(value: object) -> str:
    """A TOML value: inline tables and arrays built from their entries, scalars as JSON (valid TOML for these)."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k} = {_toml_value(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    return json.dumps(value)
