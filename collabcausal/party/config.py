"""``party.toml``: everything a party node needs, and the :class:`Party` it describes.

Sections (paths are relative to the file's folder)::

    [party]
    name = "hospital-a"             # the identity on the study roster and on the certificate
    study = "lalonde-2x2"           # the study id this party agreed to join: a request naming
                                    #   another is refused; request counts are kept under it

    [analyst]
    address = "coordinator.example.org:50051"
    ca = "certs/ca.pem"             # the study CA (from the coordinator)
    cert = "certs/hospital-a.pem"
    key = "certs/hospital-a.key"
    insecure = false                # plaintext, loopback only
    reconnect_timeout = 300         # seconds to keep trying an unreachable analyst

    [data]
    path = "hospital-a.csv"         # .csv or .parquet; or a database (docs/data-sources.md):
                                    #   url = "postgresql+psycopg://reader@db/omop", query_file = "cohort.sql",
                                    #   password_env = "OMOP_PASSWORD" (or password_file, mode 0600)
    treatment = "treat"             # label holders only, with outcome
    outcome = "re78"
    subject_id = "id"               # for subject alignment in vertical splits

    [policy]
    columns = ["age", "educ"]       # the covariates the study may use (the only ones loaded)
    operations = ["describe", "dc_representation", "weighted_moments"]   # or "dp_representation"
                                    # alone: only DP representations (needs [privacy]; docs/dcqe.md),
                                    # with "dp_weighted_moments" for DP balance moments
    min_subjects = 50
    max_components = 2              # m~ released at most (default: one fewer than the party's covariates)
    allow_full_rank = false         # true lets m~ equal the number of covariates (invertible: see threat model)
    min_anchors = 10                # smallest and largest r accepted
    max_anchors = 1000000
    max_representation_requests = 1100   # per study (B bootstrap replicates ask B + 1)
    min_weight_ratio = 0.01         # a weighted request's subject counts if its weight >= this x the largest
    max_cells = 100000              # public caps on one request (collabcausal/party/request_limits.py):
    max_request_bytes = 268435456   #   histogram entries, array bytes, params bytes / depth / list
    max_ciphertext_bytes = 2147483648   # ciphertext bytes relayed in a vertical round (2 GiB)
    max_params_bytes = 1048576      #   length, and weighted_moments requests per study
    max_params_depth = 8
    max_list_length = 10000
    max_moment_requests = 32
    allow_plain_with_dp = false     # true lets a DP operation (dp_representation, dp_weighted_moments,
                                    #   dp_sum, ...) be listed with the exact row-level dc_representation
                                    #   or weighted_moments: the party's guarantee is then none

    [privacy]                       # optional: the budget of differentially private operations
    epsilon = 1.0
    delta = 1e-6
    ledger = "ledger.sqlite"        # default: <data path>.ledger.sqlite, dataset = the data file's
                                    # name, the ledger `collabcausal discover --data` charges too

    [audit]
    path = "audit.jsonl"

    [alignment]                     # optional: the row group's shared secret (never sent)
    key_file = "alignment.key"

    [anchor]                        # the study's anchor key, shared by every party, never the analyst
    key_file = "anchor.key"         # (`collabcausal certs anchor-key`); needed for dc_representation

    [secure_aggregation]            # needed to take part in secure aggregation (dp_effects)
    peers = [                       # the parties this one aggregates with, pinned by certificate
      {name = "hospital-b", fingerprint = "3f1c...64 hex"},  # `collabcausal certs fingerprint` there,
      {name = "hospital-c", certificate = "peers/hospital-c.pem"},  # or its certificate file
    ]                               #   (exchanged out of band); or peers = "any": trust the roster the
                                    #   coordinator sends (honest-but-curious coordinator only)
    min_parties = 3                 # fewest parties on a round, this one included (default 3 with pins, 2 with "any")
    cert = "secagg/hospital-a.pem"  # optional, with key: sign round keys with a self-signed certificate
    key = "secagg/hospital-a.key"   #   (`certs self-sign`) instead of [analyst] cert/key; needs pins
    [ranges]                        # optional: the study's declared ranges; `--check` counts what DP
    outcome = [0, 1]                # releases would clip (collabcausal.party.clipping)

The file is validated against :class:`PartyFile` (:mod:`collabcausal.config_schema`): unknown
sections and keys are refused with a "did you mean" hint, every value is range-checked, and the
policy's operation names must be operations this version implements, all before the party loads
its data or dials the analyst.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, field_validator, model_validator

from collabcausal.config_schema import Endpoint, Section, load_toml_model, read_toml
from collabcausal.party.alignment import read_alignment_key
from collabcausal.party.anchor import read_anchor_key
from collabcausal.party.audit import JsonlAuditLog
from collabcausal.party.audit_head import AuditHead
from collabcausal.party.node import Party
from collabcausal.party.operations import registered
from collabcausal.party.policy import PartyPolicy
from collabcausal.party.request_limits import RequestLimits
from collabcausal.party.request_state import RequestState
from collabcausal.party.secagg import IdentityFiles
from collabcausal.party.sources import DataSource, read_table
from collabcausal.secagg.identity import fingerprint, load_certificate
from collabcausal.secagg.pins import (
    ANY,
    ANY_MIN_PARTIES,
    DEFAULT_MIN_PARTIES,
    PeerPolicy,
    is_fingerprint,
    normal_fingerprint,
)

if TYPE_CHECKING:
    from collabcausal.party.table import PartyTable

__all__ = ["Connection", "PartyConfig", "PartyFile", "load_party_config", "read_toml"]

_POSITIVE = "a positive integer"


class PartySection(Section):
    """``[party]``."""

    name: str = Field(min_length=1, description='the name on the study roster and certificate, e.g. "hospital-a"')
    study: str = Field("", description='the study id this party agreed to join, e.g. "lalonde-2x2"')


class AnalystSection(Endpoint):
    """``[analyst]``: where and how to dial."""

    reconnect_timeout: float = Field(300.0, gt=0, le=86_400, description="seconds in (0, 86400], e.g. 300")


class DataSection(Section):
    """``[data]``: the private table, from a file or a database query (:mod:`collabcausal.party.sources`)."""

    path: str | None = Field(
        None, min_length=1,
        description='the .csv or .parquet file, e.g. "hospital-a.csv", or a directory of .parquet files (out of core)',
    )
    workers: int | None = Field(
        None, ge=1, le=256, description="blocks read at once from a directory of .parquet files, e.g. 2"
    )
    format: Literal["csv", "parquet"] | None = Field(None, description='"csv" or "parquet" (default: the extension)')
    url: str | None = Field(
        None, min_length=1, description='a SQLAlchemy URL without password, e.g. "postgresql+psycopg://reader@db/omop"'
    )
    query: str | None = Field(None, min_length=1, description='the cohort query, e.g. "SELECT ... FROM cohort"')
    query_file: str | None = Field(None, min_length=1, description='a file holding the cohort query, e.g. "cohort.sql"')
    password_env: str | None = Field(None, min_length=1, description='the variable holding the password, e.g. "DB_PW"')
    password_file: str | None = Field(None, min_length=1, description='an owner-only password file, e.g. "db.pw"')
    statement_timeout: float = Field(300.0, gt=0, le=86_400, description="seconds in (0, 86400], e.g. 300")
    treatment: str | None = Field(None, description="the treatment column (label holders, with outcome)")
    outcome: str | None = Field(None, description="the outcome column (label holders, with treatment)")
    subject_id: str | None = Field(None, description="the subject id column (for alignment)")

    @model_validator(mode="after")
    def _one_source(self) -> DataSection:
        if (self.path is None) == (self.url is None):
            raise ValueError('give either path = "table.parquet" or url = "..." with query, not both or neither')
        if self.workers is not None and (self.path is None or self.path.endswith((".csv", ".txt", ".parquet"))):
            raise ValueError("workers goes with a path naming a directory of .parquet files (read out of core)")
        if self.path is not None:
            extra = [k for k in ("query", "query_file", "password_env", "password_file") if getattr(self, k)]
            if extra:
                raise ValueError(f"{extra[0]} goes with url, not with path")
        else:
            if (self.query is None) == (self.query_file is None):
                raise ValueError("a url needs exactly one of query or query_file")
            if self.password_env is not None and self.password_file is not None:
                raise ValueError("give password_env or password_file, not both")
            if self.format is not None:
                raise ValueError("format goes with path, not with url")
        return self


class PolicySection(Section):
    """``[policy]``: what the party allows (:class:`collabcausal.party.policy.PartyPolicy`)."""

    columns: list[str] = Field(description='the covariates the study may use, e.g. ["age", "educ"]')
    operations: list[str] = Field(description='operations answered, e.g. ["describe", "dc_representation"]')
    min_subjects: int = Field(10, ge=1, description=f"{_POSITIVE}, e.g. 50")
    max_components: int | None = Field(None, ge=1, description=f"{_POSITIVE}, e.g. 2")
    allow_full_rank: bool = Field(False, description="true or false")
    min_anchors: int = Field(10, ge=1, description=f"{_POSITIVE} <= max_anchors, e.g. 10")
    max_anchors: int = Field(1_000_000, ge=1, description=f"{_POSITIVE} >= min_anchors, e.g. 100000")
    max_representation_requests: int = Field(1_100, ge=1, description=f"{_POSITIVE}, e.g. 1100")
    min_weight_ratio: float = Field(0.01, ge=0.0, le=1.0, description="a number in [0, 1], e.g. 0.01")
    max_cells: int = Field(RequestLimits.max_cells, ge=1, description=f"{_POSITIVE}, e.g. 100000")
    max_request_bytes: int = Field(RequestLimits.max_request_bytes, ge=1, description=f"{_POSITIVE}, e.g. 268435456")
    max_ciphertext_bytes: int = Field(RequestLimits.max_ciphertext_bytes, ge=1,
                                      description=f"{_POSITIVE}, e.g. 2147483648")
    max_params_bytes: int = Field(RequestLimits.max_params_bytes, ge=1, description=f"{_POSITIVE}, e.g. 1048576")
    max_params_depth: int = Field(RequestLimits.max_params_depth, ge=1, description=f"{_POSITIVE}, e.g. 8")
    max_list_length: int = Field(RequestLimits.max_list_length, ge=1, description=f"{_POSITIVE}, e.g. 10000")
    max_moment_requests: int = Field(RequestLimits.max_moment_requests, ge=1, description=f"{_POSITIVE}, e.g. 32")
    allow_plain_with_dp: bool = Field(False, description="true or false")

    @field_validator("columns")
    @classmethod
    def _columns(cls, value: list[str]) -> list[str]:
        if not value or not all(value) or len(set(value)) != len(value):
            raise ValueError("columns must list covariate names, each once")
        return value

    @field_validator("operations")
    @classmethod
    def _operations(cls, value: list[str]) -> list[str]:
        if not value:
            raise ValueError("operations must list at least one operation")
        known = registered()
        for name in value:
            if name not in known:
                guess = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
                hint = f"did you mean {guess[0]!r}" if guess else f"known: {', '.join(known)}"
                raise ValueError(f"unknown operation {name!r} ({hint})")
        return value

    @model_validator(mode="after")
    def _anchors(self) -> PolicySection:
        if self.min_anchors > self.max_anchors:
            raise ValueError(f"min_anchors {self.min_anchors} exceeds max_anchors {self.max_anchors}")
        return self

    def limits(self) -> RequestLimits:
        """The request caps of this section."""
        return RequestLimits(**{f.name: getattr(self, f.name) for f in fields(RequestLimits)})


class PrivacySection(Section):
    """``[privacy]``: the budget of differentially private operations."""

    epsilon: float = Field(gt=0, description="the total epsilon, a number > 0, e.g. 1.0")
    delta: float = Field(0.0, ge=0.0, lt=1.0, description="a number in [0, 1), e.g. 1e-6")
    ledger: str | None = Field(None, description='the ledger file, e.g. "ledger.sqlite"')
    dataset: str | None = Field(None, description="the ledger's dataset name")


class AuditSection(Section):
    """``[audit]``."""

    path: str = Field("audit.jsonl", min_length=1, description='the audit log, e.g. "audit.jsonl"')


class KeyFileSection(Section):
    """``[alignment]`` or ``[anchor]``: a shared key file."""

    key_file: str = Field(min_length=1, description='the key file, e.g. "anchor.key"')


class PeerPin(Section):
    """One pinned peer of ``[secure_aggregation] peers``: its name and certificate fingerprint (or file)."""

    name: str = Field(min_length=1, description='the peer\'s roster name, e.g. "hospital-b"')
    fingerprint: str | None = Field(None, description="its certificate's SHA-256, 64 hex digits (`certs fingerprint`)")
    certificate: str | None = Field(None, min_length=1, description='its certificate file, e.g. "peers/hospital-b.pem"')

    @model_validator(mode="after")
    def _one_pin(self) -> PeerPin:
        if (self.fingerprint is None) == (self.certificate is None):
            raise ValueError(f"pin {self.name!r} by fingerprint or by certificate file, exactly one of the two")
        if self.fingerprint is not None and not is_fingerprint(normal_fingerprint(self.fingerprint)):
            raise ValueError(f"the fingerprint of {self.name!r} is not 64 hex digits (`certs fingerprint` prints it)")
        return self


class SecureAggregationSection(Section):
    """``[secure_aggregation]``: the peers this party aggregates with (:mod:`collabcausal.secagg.pins`)."""

    peers: list[PeerPin] | Literal["any"] = Field(
        description='the pinned peers, e.g. [{name = "hospital-b", fingerprint = "..."}], or "any"'
    )
    min_parties: int | None = Field(None, ge=2, le=100_000, description="an integer >= 2, e.g. 3")
    cert: str | None = Field(None, min_length=1, description='a self-signed certificate, e.g. "secagg/a.pem"')
    key: str | None = Field(None, min_length=1, description='its private key, e.g. "secagg/a.key"')

    @model_validator(mode="after")
    def _consistent(self) -> SecureAggregationSection:
        if (self.cert is None) != (self.key is None):
            raise ValueError("give cert and key together (`collabcausal certs self-sign`), or neither")
        if self.peers == ANY:
            if self.cert is not None:
                raise ValueError('a cert of its own is trusted by pins only: list the peers instead of "any"')
            return self
        names = [pin.name for pin in self.peers]
        prints = [normal_fingerprint(pin.fingerprint) for pin in self.peers if pin.fingerprint is not None]
        if len(set(names)) != len(names) or len(set(prints)) != len(prints):
            raise ValueError("peers names a party, or a fingerprint, twice: pin each party's own certificate once")
        return self

    def policy(self, base: Path) -> PeerPolicy:
        """The :class:`PeerPolicy`, pins read from fingerprints or certificate files under ``base``."""
        if self.peers == ANY:
            return PeerPolicy(None, self.min_parties or ANY_MIN_PARTIES)
        pins = {
            pin.name: normal_fingerprint(pin.fingerprint) if pin.fingerprint is not None
            else fingerprint(load_certificate(base / pin.certificate))  # type: ignore[operator]
            for pin in self.peers
        }
        return PeerPolicy(pins, self.min_parties or DEFAULT_MIN_PARTIES)


class PartyFile(Section):
    """The schema of ``party.toml`` (see the module docstring)."""

    party: PartySection
    analyst: AnalystSection
    data: DataSection
    policy: PolicySection
    privacy: PrivacySection | None = None
    audit: AuditSection = Field(default_factory=AuditSection)
    alignment: KeyFileSection | None = None
    anchor: KeyFileSection | None = None
    secure_aggregation: SecureAggregationSection | None = None
    ranges: dict[str, list[float]] | None = Field(
        None, description="the study's declared ranges, column = [lo, hi] (the outcome as outcome), e.g. age = [18, 90]"
    )

    @field_validator("ranges")
    @classmethod
    def _ranges(cls, value: dict[str, list[float]] | None) -> dict[str, list[float]] | None:
        for name, pair in (value or {}).items():
            if len(pair) != 2 or not (math.isfinite(pair[0]) and math.isfinite(pair[1]) and pair[0] < pair[1]):
                shown = ", ".join(f"{v:g}" for v in pair)
                raise ValueError(f"[ranges] {name} = [{shown}] is not a range lo < hi of two finite numbers")
        return value

    @model_validator(mode="after")
    def _database_ledger(self) -> PartyFile:
        if self.data.url is not None and self.privacy is not None and self.privacy.ledger is None:
            raise ValueError(
                'a [data] url has no data file to keep the ledger beside: set [privacy] ledger = "ledger.sqlite"'
            )
        return self


@dataclass(frozen=True)
class Connection:
    """The ``[analyst]`` section: where and how to dial."""

    address: str
    ca: Path | None
    cert: Path | None
    key: Path | None
    insecure: bool = False
    reconnect_timeout: float = 300.0


@dataclass(frozen=True)
class PartyConfig:
    """A loaded ``party.toml`` (see the module docstring)."""

    path: Path
    name: str
    study: str
    connection: Connection
    columns: tuple[str, ...]
    data: Mapping[str, Any]
    source: DataSource
    policy: PartyPolicy
    privacy: Mapping[str, Any] | None
    audit_path: Path
    anchor_key: bytes | None = None
    secure_aggregation: PeerPolicy | None = None
    signing_files: tuple[Path, Path] | None = None
    ranges: Mapping[str, tuple[float, float]] = field(default_factory=dict)

    def load_table(self) -> PartyTable:
        """The party's table from its ``[data]`` source: only the policy's columns, validated."""
        d = self.data
        return read_table(
            self.source,
            self.columns,
            treatment=d.get("treatment"),
            outcome=d.get("outcome"),
            subject_id=d.get("subject_id"),
            min_subjects=self.policy.min_subjects,
        )

    def build_party(self) -> Party:
        """Load the table (only the policy's columns), open ledger, audit log and request state; return the Party.

        The party is bound to ``[party] study`` and keeps its request counts in its ledger file, or
        without one in ``<audit log>.state.sqlite`` (:mod:`collabcausal.party.request_state`).

        Every load appends a ``data_loaded`` record to the audit log: the source (file path, or
        URL without password), the query's SHA-256 and the row count.
        """
        table = self.load_table()
        ledger = None
        location = self.ledger_location()
        if self.privacy is not None and location is not None:
            from collabcausal.ledger import PrivacyLedger

            p = self.privacy
            path, dataset = location
            ledger = PrivacyLedger(
                path, epsilon=p["epsilon"], delta=p.get("delta", 0.0), dataset=p.get("dataset", dataset)
            )
        ledger_path = None if ledger is None else ledger.path
        audit = JsonlAuditLog(self.audit_path, head=AuditHead.of(self.audit_path, ledger_path))
        audit.data_loaded(self.name, self.source, table.n_subjects)
        conn = self.connection
        identity = None  # the mutual-TLS certificate, or [secure_aggregation] cert/key, signs round keys
        tls = not conn.insecure and conn.cert is not None and conn.key is not None
        signing = self.signing_files or ((conn.cert, conn.key) if tls else None)
        if signing is not None:
            identity = IdentityFiles(None if conn.insecure else conn.ca, *signing, self.secure_aggregation)  # type: ignore[arg-type]
        dataset = ledger.dataset if ledger is not None else self.source.describe()
        return Party(
            self.name,
            table,
            policy=self.policy,
            ledger=ledger,
            audit=audit,
            anchor_key=self.anchor_key,
            secagg_identity=identity,
            study=self.study,
            requests=RequestState.of(self.audit_path, ledger_path, dataset),
        )

    def ledger_location(self) -> tuple[Path, str] | None:
        """``(ledger file, default dataset name)`` of a party with ``[privacy]``; ``None`` without one."""
        from collabcausal.ledger import default_ledger_location

        if self.privacy is None:
            return None
        if "ledger" in self.privacy:
            return self._path(self.privacy["ledger"]), "default"
        return default_ledger_location(self.source.path)  # type: ignore[arg-type]  # a url source names its ledger

    def written_files(self) -> list[Path]:
        """The files a party process of this config writes: its audit log, and its ledger if it has one.

        The request state lives in the ledger, or without one beside the audit log
        (:mod:`collabcausal.party.request_state`), so these two cover it;
        :class:`~collabcausal.party.process_lock.PartyFilesLock` holds them for one process.
        """
        location = self.ledger_location()
        return [self.audit_path] + ([] if location is None else [location[0]])

    def _path(self, value: str) -> Path:
        return (self.path.parent / value).resolve()


def load_party_config(path: str | Path) -> PartyConfig:
    """Read and check ``party.toml``; every problem is one :class:`ConfigError` naming the key."""
    file = Path(path)
    doc = load_toml_model(file, PartyFile)
    where, base = str(file), file.parent
    analyst, policy, secagg = doc.analyst, doc.policy, doc.secure_aggregation
    fix = "give ca, cert and key (from the study coordinator), or insecure = true on loopback"
    tls_paths = analyst.tls_paths(base, where, "analyst", fix)
    rules = PartyPolicy(
        policy.operations,
        policy.columns,
        min_subjects=policy.min_subjects,
        alignment_key=None if doc.alignment is None else read_alignment_key(base / doc.alignment.key_file),
        max_components=policy.max_components,
        allow_full_rank=policy.allow_full_rank,
        min_anchors=policy.min_anchors,
        max_anchors=policy.max_anchors,
        max_representation_requests=policy.max_representation_requests,
        min_weight_ratio=policy.min_weight_ratio,
        limits=policy.limits(),
        allow_plain_with_dp=policy.allow_plain_with_dp,
    )
    connection = Connection(
        address=analyst.address, insecure=analyst.insecure, reconnect_timeout=analyst.reconnect_timeout, **tls_paths
    )
    return PartyConfig(
        path=file.resolve(),
        name=doc.party.name,
        study=doc.party.study,
        connection=connection,
        columns=tuple(policy.columns),
        data=doc.data.model_dump(),
        source=DataSource.from_section(doc.data.model_dump(exclude_none=True), base),
        policy=rules,
        privacy=None if doc.privacy is None else doc.privacy.model_dump(exclude_none=True),
        audit_path=(base / doc.audit.path).resolve(),
        anchor_key=None if doc.anchor is None else read_anchor_key(base / doc.anchor.key_file),
        secure_aggregation=None if secagg is None else secagg.policy(base),
        signing_files=None if secagg is None or secagg.cert is None else (
            (base / secagg.cert).resolve(), (base / secagg.key).resolve()  # type: ignore[operator]
        ),
        ranges={name: (pair[0], pair[1]) for name, pair in (doc.ranges or {}).items()},
    )
