"""``study.toml``: the coordinator's description of a study, and the DC-QE plan it implies.

Sections (paths relative to the file's folder)::

    [study]
    id = "lalonde-2x2"
    seed = 0
    estimand = "ate"                  # or "att"
    estimators = ["psm", "ipw"]
    n_anchors = 2000
    party_components = 3              # m~ per party (int, or a variance fraction)
    join_deadline = 120               # seconds for every roster party to join
    task_timeout = 600                # seconds for each round of replies
    on_missing_party = "fail"         # or "continue": run without parties that did not join
    align = false                     # align subjects by keyed hashes first (vertical splits)
    out = "report"                    # folder for report.json
    interval = "percentile"           # "analytic", "percentile" or "bca" (docs/estimators.md)
    bootstrap = 200                   # B bootstrap replicates (0: none; needs interval = "analytic")

    [server]
    address = "0.0.0.0:50051"
    ca = "certs/ca.pem"
    cert = "certs/analyst.pem"
    key = "certs/analyst.key"
    insecure = false                  # plaintext, loopback only

    [anchor_ranges]                   # public range of every covariate (DC-QE anchor)
    age = [17, 55]

    [[row_groups]]                    # parties sharing subjects, in column-group order
    parties = ["hospital-a", "lab-a"]
    label_holder = "hospital-a"       # optional; default the first party

The roster (parties admitted) is every party named in ``row_groups``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from collabcausal.analyst.dcqe import DCQEPlan
from collabcausal.errors import ConfigError
from collabcausal.estimators.intervals import INTERVALS
from collabcausal.party.config import read_toml

_ON_MISSING = ("fail", "continue")


@dataclass(frozen=True)
class Server:
    """The ``[server]`` section."""

    address: str
    ca: Path | None
    cert: Path | None
    key: Path | None
    insecure: bool = False


@dataclass(frozen=True)
class StudyConfig:
    """A loaded ``study.toml`` (see the module docstring)."""

    path: Path
    study: str
    server: Server
    row_groups: tuple[tuple[str, ...], ...]
    label_holders: tuple[str, ...]
    settings: Mapping[str, Any]
    anchor_ranges: Mapping[str, Sequence[float]]
    join_deadline: float
    task_timeout: float
    on_missing_party: str
    align: bool
    out: Path
    interval: str = "percentile"
    n_boot: int = 200

    @property
    def roster(self) -> tuple[str, ...]:
        """Every party of the study."""
        return tuple(p for group in self.row_groups for p in group)

    def plan(self, joined: Sequence[str] | None = None) -> DCQEPlan:
        """The DC-QE plan over the parties that ``joined`` (default: the whole roster).

        A row group keeps its joined parties; a group whose label holder is missing is dropped.
        """
        present = set(self.roster if joined is None else joined)
        groups, holders = [], []
        for group, holder in zip(self.row_groups, self.label_holders, strict=True):
            if holder in present:
                groups.append([p for p in group if p in present])
                holders.append(holder)
        if not groups:
            raise ConfigError(
                f"{self.path}: no row group has its label holder among the joined parties", "start the label holders"
            )
        s = self.settings
        keys = ("seed", "estimand", "estimators", "n_components", "party_components")
        return DCQEPlan(
            row_groups=groups,
            label_holders=holders,
            anchor_ranges=self.anchor_ranges,
            n_anchors=int(s.get("n_anchors", 1000)),
            study=self.study,
            **{k: s[k] for k in keys if k in s},
        )


def load_study_config(path: str | Path) -> StudyConfig:
    """Read and check ``study.toml``; every problem is one :class:`ConfigError` naming the key."""
    file = Path(path)
    doc = read_toml(file)
    where = str(file)
    study = doc.get("study")
    server = doc.get("server")
    groups = doc.get("row_groups")
    for name, value in (("study", study), ("server", server)):
        if not isinstance(value, Mapping):
            raise ConfigError(f"{where}: the [{name}] section is missing", "see docs/protocol.md for a study.toml")
    if not isinstance(groups, list) or not groups:
        raise ConfigError(f"{where}: no [[row_groups]]", 'add [[row_groups]] with parties = ["..."]')
    row_groups, holders = [], []
    for i, group in enumerate(groups):
        parties = group.get("parties") if isinstance(group, Mapping) else None
        if not isinstance(parties, list) or not parties or not all(isinstance(p, str) for p in parties):
            raise ConfigError(f"{where}: row_groups[{i}] needs parties = [names]", 'e.g. parties = ["hospital-a"]')
        holder = group.get("label_holder", parties[0])
        if holder not in parties:
            raise ConfigError(f"{where}: row_groups[{i}] label_holder {holder!r} is not one of its parties", "fix it")
        row_groups.append(tuple(parties))
        holders.append(holder)
    names = [p for g in row_groups for p in g]
    if len(set(names)) != len(names):
        raise ConfigError(f"{where}: a party appears in two row groups", "list each party once")
    on_missing = study.get("on_missing_party", "fail")
    if on_missing not in _ON_MISSING:
        raise ConfigError(f"{where}: [study] on_missing_party = {on_missing!r}", f"use one of {_ON_MISSING}")
    if not isinstance(study.get("id"), str) or not study["id"]:
        raise ConfigError(f"{where}: [study] id is missing", 'e.g. id = "lalonde-2x2"')
    if not isinstance(server.get("address"), str):
        raise ConfigError(f"{where}: [server] address is missing", 'e.g. address = "0.0.0.0:50051"')
    insecure = bool(server.get("insecure", False))
    base = file.parent
    tls = {k: (base / server[k]).resolve() if k in server else None for k in ("ca", "cert", "key")}
    if not insecure and None in tls.values():
        missing = next(k for k, v in tls.items() if v is None)
        raise ConfigError(
            f"{where}: [server] {missing} is missing (mutual TLS is the default)",
            "run `collabcausal certs init` and `certs issue --analyst`, then set ca, cert and key",
        )
    ranges = doc.get("anchor_ranges", {})
    if not isinstance(ranges, Mapping) or not ranges:
        raise ConfigError(f"{where}: [anchor_ranges] is missing", "give the public range of every covariate")
    interval, n_boot = _interval_settings(study, where)
    return StudyConfig(
        path=file.resolve(),
        study=study["id"],
        server=Server(server["address"], insecure=insecure, **tls),
        row_groups=tuple(row_groups),
        label_holders=tuple(holders),
        settings=study,
        anchor_ranges=ranges,
        join_deadline=float(study.get("join_deadline", 120.0)),
        task_timeout=float(study.get("task_timeout", 600.0)),
        on_missing_party=on_missing,
        align=bool(study.get("align", False)),
        out=(base / study.get("out", "report")).resolve(),
        interval=interval,
        n_boot=n_boot,
    )


def _interval_settings(study: Mapping[str, Any], where: str) -> tuple[str, int]:
    """``[study] interval`` and ``bootstrap``, checked (the same choices as ``collabcausal simulate``)."""
    interval = study.get("interval", "percentile")
    if not isinstance(interval, str) or interval.lower() not in INTERVALS:
        raise ConfigError(f"{where}: [study] interval = {interval!r}", f"use one of {list(INTERVALS)}")
    n_boot = study.get("bootstrap", 200)
    if isinstance(n_boot, bool) or not isinstance(n_boot, int) or n_boot < 0:
        raise ConfigError(f"{where}: [study] bootstrap = {n_boot!r}", "give a number of replicates >= 0, e.g. 200")
    if n_boot == 0 and interval.lower() != "analytic":
        raise ConfigError(
            f"{where}: [study] interval = {interval!r} needs bootstrap replicates (bootstrap = 0)",
            'set bootstrap = 200, or interval = "analytic"',
        )
    return interval.lower(), n_boot
