"""``party.toml``: everything a party node needs, and the :class:`Party` it describes.

Sections (paths are relative to the file's folder)::

    [party]
    name = "hospital-a"             # the identity on the study roster and on the certificate
    study = "lalonde-2x2"           # the study id this party agreed to join

    [analyst]
    address = "coordinator.example.org:50051"
    ca = "certs/ca.pem"             # the study CA (from the coordinator)
    cert = "certs/hospital-a.pem"
    key = "certs/hospital-a.key"
    insecure = false                # plaintext, loopback only
    reconnect_timeout = 300         # seconds to keep trying an unreachable analyst

    [data]
    path = "hospital-a.csv"         # .csv or .parquet
    treatment = "treat"             # label holders only, with outcome
    outcome = "re78"
    subject_id = "id"               # for subject alignment in vertical splits

    [policy]
    columns = ["age", "educ"]       # the covariates the study may use (the only ones loaded)
    operations = ["describe", "dc_representation", "weighted_moments"]   # or "dp_representation"
                                    # alone: only DP representations (needs [privacy]; docs/dcqe.md)
    min_subjects = 50
    max_components = 2              # m~ released at most (default: one fewer than the party's covariates)
    allow_full_rank = false         # true lets m~ equal the number of covariates (invertible: see threat model)
    min_anchors = 10                # smallest and largest r accepted
    max_anchors = 1000000
    max_representation_requests = 1100   # per study (B bootstrap replicates ask B + 1)
    min_weight_ratio = 0.01         # a weighted request's subject counts if its weight >= this x the largest

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
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from collabcausal.errors import ConfigError
from collabcausal.party.alignment import read_alignment_key
from collabcausal.party.anchor import read_anchor_key
from collabcausal.party.audit import JsonlAuditLog
from collabcausal.party.node import Party
from collabcausal.party.policy import PartyPolicy
from collabcausal.party.table import PartyTable

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

_REDUCTION_KEYS = (
    "max_components",
    "allow_full_rank",
    "min_anchors",
    "max_anchors",
    "max_representation_requests",
    "min_weight_ratio",
)
_SECTIONS = {"party", "analyst", "data", "policy", "privacy", "audit", "alignment", "anchor"}


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
    policy: PartyPolicy
    privacy: Mapping[str, Any] | None
    audit_path: Path
    anchor_key: bytes | None = None

    def build_party(self) -> Party:
        """Load the table (only the policy's columns), open ledger and audit log; return the Party."""
        d = self.data
        table = PartyTable.from_file(
            self._path(d["path"]),
            self.columns,
            treatment=d.get("treatment"),
            outcome=d.get("outcome"),
            subject_id=d.get("subject_id"),
            min_subjects=self.policy.min_subjects,
        )
        ledger = None
        if self.privacy is not None:
            from collabcausal.party.ledger import PrivacyLedger, default_ledger_location

            p = self.privacy
            path, dataset = default_ledger_location(self._path(d["path"]))
            if "ledger" in p:
                path, dataset = self._path(p["ledger"]), "default"
            ledger = PrivacyLedger(
                path, epsilon=p["epsilon"], delta=p.get("delta", 0.0), dataset=p.get("dataset", dataset)
            )
        return Party(
            self.name,
            table,
            policy=self.policy,
            ledger=ledger,
            audit=JsonlAuditLog(self.audit_path),
            anchor_key=self.anchor_key,
        )

    def _path(self, value: str) -> Path:
        return (self.path.parent / value).resolve()


def load_party_config(path: str | Path) -> PartyConfig:
    """Read and check ``party.toml``; every problem is one :class:`ConfigError` naming the key."""
    file = Path(path)
    doc = read_toml(file)
    unknown = sorted(set(doc) - _SECTIONS)
    if unknown:
        raise ConfigError(f"{file}: unknown section [{unknown[0]}]", f"use only {sorted(_SECTIONS)}")
    where = str(file)
    party = _section(doc, "party", where)
    analyst = _section(doc, "analyst", where)
    data = _section(doc, "data", where)
    policy_doc = _section(doc, "policy", where)
    name = _get(party, "name", str, where, "party")
    columns = _get(policy_doc, "columns", list, where, "policy")
    operations = _get(policy_doc, "operations", list, where, "policy")
    if not columns or not all(isinstance(c, str) for c in columns):
        raise ConfigError(f"{where}: [policy] columns must list covariate names", 'e.g. columns = ["age", "educ"]')
    _get(data, "path", str, where, "data")
    insecure = bool(analyst.get("insecure", False))
    base = file.parent
    tls_paths = {k: (base / analyst[k]).resolve() if k in analyst else None for k in ("ca", "cert", "key")}
    if not insecure and None in tls_paths.values():
        missing = next(k for k, v in tls_paths.items() if v is None)
        raise ConfigError(
            f"{where}: [analyst] {missing} is missing (mutual TLS is the default)",
            "give ca, cert and key (from the study coordinator), or insecure = true on loopback",
        )
    key_file = doc.get("alignment", {}).get("key_file")
    anchor_file = doc.get("anchor", {}).get("key_file")
    policy = PartyPolicy(
        operations,
        columns,
        min_subjects=policy_doc.get("min_subjects", 10),
        alignment_key=None if key_file is None else read_alignment_key(base / key_file),
        **{k: policy_doc[k] for k in _REDUCTION_KEYS if k in policy_doc},
    )
    privacy = doc.get("privacy")
    if privacy is not None and "epsilon" not in privacy:
        raise ConfigError(f"{where}: [privacy] needs epsilon", "e.g. epsilon = 1.0 (and delta, ledger)")
    connection = Connection(
        address=_get(analyst, "address", str, where, "analyst"),
        insecure=insecure,
        reconnect_timeout=float(analyst.get("reconnect_timeout", 300.0)),
        **tls_paths,
    )
    return PartyConfig(
        path=file.resolve(),
        name=name,
        study=str(party.get("study", "")),
        connection=connection,
        columns=tuple(columns),
        data=data,
        policy=policy,
        privacy=privacy,
        audit_path=(base / doc.get("audit", {}).get("path", "audit.jsonl")).resolve(),
        anchor_key=None if anchor_file is None else read_anchor_key(base / anchor_file),
    )


def read_toml(file: Path) -> dict[str, Any]:
    """Parse a TOML file with one-line errors."""
    try:
        with file.open("rb") as handle:
            return tomllib.load(handle)
    except FileNotFoundError:
        raise ConfigError(f"{file}: no such file", "check the path given to --config / --study") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{file} is not valid TOML ({exc})", "fix the syntax") from None


def _section(doc: Mapping[str, Any], name: str, where: str) -> Mapping[str, Any]:
    section = doc.get(name)
    if not isinstance(section, Mapping):
        raise ConfigError(f"{where}: the [{name}] section is missing", "see docs/protocol.md for a party.toml")
    return section


def _get(section: Mapping[str, Any], key: str, kind: type, where: str, name: str) -> Any:
    value = section.get(key)
    if not isinstance(value, kind):
        raise ConfigError(
            f"{where}: [{name}] {key} is {'missing' if value is None else f'not a {kind.__name__}'}",
            f"set {key} in the [{name}] section",
        )
    return value
