"""``study.toml``: the coordinator's description of a study, and the DC-QE plan it implies.

Sections (paths relative to the file's folder)::

    [study]
    id = "lalonde-2x2"
    kind = "dcqe"                     # or "adum", "cate", "discovery": with its own section, below
    seed = 0
    estimand = "ate"                  # or "att"
    estimators = ["psm", "ipw"]
    n_anchors = 2000                  # r (default: the study's number of subjects, as paper 003)
    party_components = 3              # m~ per party (int, or a variance fraction; default 3)
    join_deadline = 120               # seconds for every roster party to join
    task_timeout = 600                # seconds for each round of replies
    on_missing_party = "fail"         # or "continue": go on without absent or lost parties where sound
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

    [dp_representation]               # optional: every party releases one (eps, delta)-DP representation
    epsilon = 4.0                     # each party's budget for its one release
    delta = 1e-6
    outcome_range = [0, 30000]        # public; the label holder clips the outcome to it
    # clip_norm, lambdas, simex_replicates, max_se_floor: see DPRepresentationSpec

    [balance]                         # optional: DP balance moments instead of exact ones
    epsilon = 1.0                     # charged to each party PER balance request (dp_weighted_moments)
    delta = 1e-6                      # in (0, 1), below 1/n of every party

With ``[balance]`` every balance moment the study asks (one request per estimator defining a
balanced sample, PSM and IPW, plus the unweighted sample: :meth:`DCQEPlan.balance_requests`) is
``dp_weighted_moments``: (epsilon, delta)-DP for the party's subjects, charged to its ledger before it
is computed, each covariate clipped to its ``[anchor_ranges]`` range. The report gives each SMD's DP
noise sd and every party's spend (requests x epsilon, requests x delta). Kinds ``"dcqe"`` and
``"cate"`` (whose DC-QE step asks the same moments) take it; ``[dp_representation]`` does not (the
analyst then holds only a noisy treatment, not the arms the moments are split by), nor do
``"adum"`` and ``"discovery"`` (no balanced sample). The parties' policies must list
``dp_weighted_moments`` and their ``[privacy]`` budgets cover the requests.

With ``[dp_representation]`` the study runs SIMEX-corrected IPW on the parties' DP releases
(:func:`~collabcausal.analyst.dp_release.run_dp_dcqe`): ``estimators`` must be ``["ipw"]`` (the
default then), ``interval`` ``"percentile"`` and ``party_components`` integers.

Study kinds other than ``"dcqe"`` add their section, ``[adum]``, ``[cate]`` or ``[discovery]``
(:mod:`collabcausal.analyst.kind_config`, run by the kind's module, :mod:`collabcausal.analyst.kinds`); a section of
another kind is refused, and ``[dp_representation]`` belongs to ``"dcqe"``. eps-ADUM needs one party
per row group (parties hold different subjects); its partition columns and discovery's pairs need
a range in ``[anchor_ranges]``, the public range of every covariate whatever the kind.

The roster (parties admitted) is every party named in ``row_groups``. The file is validated
against :class:`StudyFile` (:mod:`collabcausal.config_schema`): unknown sections and keys are
refused with a "did you mean" hint and every value is range-checked. A study kind adds its own
section as one more optional field of :class:`StudyFile` (a :class:`~collabcausal.config_schema.Section`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from collabcausal.analyst.balance import DPBalanceSpec
from collabcausal.analyst.dcqe import DCQEPlan
from collabcausal.analyst.dp_release import DPRepresentationSpec
from collabcausal.analyst.effects import ESTIMATORS
from collabcausal.analyst.kind_config import (
    KINDS,
    AdumSection,
    CateSection,
    DiscoverySection,
    DPEffectsSection,
    KindSection,
    check_range,
)
from collabcausal.analyst.study_defaults import BOOTSTRAP, INTERVAL, PARTY_COMPONENTS
from collabcausal.config_schema import Endpoint, Section, load_toml_model
from collabcausal.errors import ConfigError
from collabcausal.estimators.dp.effects.vertical import MAX_COLUMN_GROUPS
from collabcausal.estimators.intervals import INTERVALS

_DCQE_KEYS = ("estimators", "n_anchors", "party_components", "n_components", "interval", "bootstrap")
UNUSED_STUDY_KEYS = {
    "adum": (*_DCQE_KEYS, "align"),
    "discovery": (*_DCQE_KEYS, "align", "estimand"),
    "cate": ("interval", "bootstrap"),
    "dp_effects": (*_DCQE_KEYS, "align", "estimand"),
}
"""``[study]`` keys a kind does not use: refused when set, rather than silently ignored."""


class StudySection(Section):
    """``[study]``."""

    id: str = Field(min_length=1, description='the study id, e.g. "lalonde-2x2"')
    kind: Literal[KINDS] = Field("dcqe", description=f"the analysis, one of {list(KINDS)}")  # type: ignore[valid-type]
    seed: int = Field(0, ge=0, description="an integer >= 0, e.g. 0")
    estimand: Literal["ate", "att"] = Field("ate", description='"ate" or "att"')
    estimators: list[str] = Field(list(ESTIMATORS), description=f"a list drawn from {list(ESTIMATORS)}")
    n_anchors: int | None = Field(
        None, ge=1, description="anchor rows r, a positive integer, e.g. 2000 (default: the study's subjects)"
    )
    party_components: int | float | dict[str, int | float] = Field(
        PARTY_COMPONENTS,
        description="m~ per party: a positive integer, a variance fraction in (0, 1], or {party: value}",
    )
    n_components: int | None = Field(None, ge=1, description="m^, a positive integer")
    join_deadline: float = Field(120.0, gt=0, description="seconds > 0, e.g. 120")
    task_timeout: float = Field(600.0, gt=0, description="seconds > 0, e.g. 600")
    on_missing_party: Literal["fail", "continue"] = Field("fail", description='"fail" or "continue"')
    align: bool = Field(False, description="true or false")
    out: str = Field("report", min_length=1, description='the report folder, e.g. "report"')
    interval: Literal[INTERVALS] = Field(  # type: ignore[valid-type]
        INTERVAL, description=f"one of {list(INTERVALS)} (docs/estimators.md)"
    )
    bootstrap: int = Field(
        BOOTSTRAP, ge=0, description='bootstrap replicates B >= 0, e.g. 200 (0 needs interval = "analytic")'
    )

    @model_validator(mode="after")
    def _bootstrap_for_interval(self) -> StudySection:
        if self.bootstrap == 0 and self.interval != "analytic":
            raise ValueError(
                f'interval = "{self.interval}" needs bootstrap replicates; '
                'fix: set bootstrap = 200 or interval = "analytic"'
            )
        return self

    @field_validator("estimators")
    @classmethod
    def _estimators(cls, value: list[str]) -> list[str]:
        unknown = [e for e in value if e not in ESTIMATORS]
        if not value or unknown:
            raise ValueError(f"estimators must be drawn from {list(ESTIMATORS)}, got {value}")
        return value

    @field_validator("party_components")
    @classmethod
    def _components(cls, value: int | float | dict[str, int | float]) -> int | float | dict[str, int | float]:
        for v in value.values() if isinstance(value, dict) else [value]:
            if (isinstance(v, int) and v < 1) or (isinstance(v, float) and not 0.0 < v <= 1.0):
                raise ValueError("a component count must be an integer >= 1 or a fraction in (0, 1]")
        return value


class RowGroupSection(Section):
    """One ``[[row_groups]]`` entry."""

    parties: list[str] = Field(min_length=1, description='the parties of the row group, e.g. ["hospital-a"]')
    label_holder: str | None = Field(None, description="one of parties (default: the first)")


class DPRepresentationSection(Section):
    """``[dp_representation]``: every party releases one (epsilon, delta)-DP representation.

    The fields are those of :class:`~collabcausal.analyst.dp_release.DPRepresentationSpec`
    (docs/dcqe.md, "DP representations").
    """

    epsilon: float = Field(gt=0, description="each party's epsilon for its one release, a number > 0, e.g. 4.0")
    delta: float = Field(gt=0, lt=1, description="each party's delta, in (0, 1), e.g. 1e-6")
    outcome_range: list[float] = Field(
        min_length=2, max_length=2, description="the public outcome range [low, high], e.g. [0, 30000]"
    )
    clip_norm: float | None = Field(None, gt=0, description="the public row-norm bound C > 0 (default sqrt(m))")
    lambdas: list[Annotated[float, Field(gt=0)]] = Field(
        [0.5, 1.0, 1.5, 2.0], min_length=1, description="SIMEX noise multiples > 0, e.g. [0.5, 1.0, 1.5, 2.0]"
    )
    simex_replicates: int = Field(20, ge=1, description="SIMEX replicates per multiple, an integer >= 1")
    max_se_floor: float | None = Field(
        None, gt=0, description="refuse the study when the outcome noise alone sets an SE above this"
    )

    @field_validator("outcome_range")
    @classmethod
    def _outcome_range(cls, value: list[float]) -> list[float]:
        return check_range(value, "outcome_range")

    def spec(self) -> DPRepresentationSpec:
        """The analyst's :class:`~collabcausal.analyst.dp_release.DPRepresentationSpec`."""
        fields = self.model_dump()
        return DPRepresentationSpec(
            **fields | {"outcome_range": tuple(self.outcome_range), "lambdas": tuple(self.lambdas)}
        )


class BalanceSection(Section):
    """``[balance]``: the balance moments are (epsilon, delta)-DP, charged per request (``dp_weighted_moments``)."""

    epsilon: float = Field(gt=0, description="each party's epsilon per balance request, a number > 0, e.g. 1.0")
    delta: float = Field(gt=0, lt=1, description="each party's delta per balance request, in (0, 1), e.g. 1e-6")

    def spec(self) -> DPBalanceSpec:
        """The analyst's :class:`~collabcausal.analyst.balance.DPBalanceSpec`."""
        return DPBalanceSpec(self.epsilon, self.delta)


BALANCE_KINDS = ("dcqe", "cate")
"""The kinds whose DC-QE step asks balance moments, so ``[balance]`` applies."""


class StudyFile(Section):
    """The schema of ``study.toml`` (see the module docstring)."""

    study: StudySection
    server: Endpoint
    anchor_ranges: dict[str, list[float]] = Field(
        min_length=1, description="the public range [low, high] of every covariate, e.g. age = [17, 55]"
    )
    row_groups: list[RowGroupSection] = Field(min_length=1, description='[[row_groups]] with parties = ["..."]')
    dp_representation: DPRepresentationSection | None = None
    balance: BalanceSection | None = None
    adum: AdumSection | None = None
    cate: CateSection | None = None
    discovery: DiscoverySection | None = None
    dp_effects: DPEffectsSection | None = None

    @model_validator(mode="after")
    def _kind_section(self) -> StudyFile:
        """The study's kind has its section (``"dcqe"``: none needed) and no other kind's section."""
        kind = self.study.kind
        own = {"dcqe": "dp_representation"}.get(kind, kind)
        for other in ("dp_representation", "adum", "cate", "discovery", "dp_effects"):
            if other != own and getattr(self, other) is not None:
                owner = "dcqe" if other == "dp_representation" else other
                raise ValueError(
                    f'[{other}] belongs to kind = "{owner}" but [study] kind = "{kind}"; '
                    f'fix: remove [{other}] or set kind = "{owner}"'
                )
        unused = [k for k in UNUSED_STUDY_KEYS.get(kind, ()) if k in self.study.model_fields_set]
        if unused:
            raise ValueError(
                f'[study] {unused[0]} is not used by kind = "{kind}"; fix: remove it (docs/protocol.md, "Study kinds")'
            )
        if kind != "dcqe" and getattr(self, kind) is None:
            raise ValueError(f'kind = "{kind}" needs a [{kind}] section; fix: add [{kind}] (docs/protocol.md)')
        if kind == "adum" and any(len(g.parties) != 1 for g in self.row_groups):
            raise ValueError(
                "eps-ADUM sums parties holding different subjects (a horizontal split); "
                "fix: list one party per [[row_groups]]"
            )
        if kind == "dp_effects" and len({len(g.parties) for g in self.row_groups}) > 1:
            raise ValueError(
                "dp_effects takes row groups of one party each (parties hold different subjects) or of the same number "
                "of parties each (a label holder and parties holding other covariates of the same subjects), not a "
                "mix; fix: list "
                "the same number of parties in every [[row_groups]]"
            )
        if kind == "dp_effects" and any(len(g.parties) > MAX_COLUMN_GROUPS for g in self.row_groups):
            raise ValueError(
                f"dp_effects on column groups takes at most {MAX_COLUMN_GROUPS} parties per row group (the label "
                f"holder and up to {MAX_COLUMN_GROUPS - 1} others); fix: fewer parties per [[row_groups]]"
            )
        needed = {"adum": lambda s: s.columns, "discovery": lambda s: [c for p in s.pairs for c in p],
                  "dp_effects": lambda s: s.columns or []}.get(kind)
        unknown = [] if needed is None else [c for c in needed(getattr(self, kind)) if c not in self.anchor_ranges]
        if unknown:
            raise ValueError(
                f"[{kind}] names {unknown[0]!r}, which has no public range; "
                f"fix: add {unknown[0]} = [low, high] to [anchor_ranges]"
            )
        return self

    @model_validator(mode="after")
    def _balance_study(self) -> StudyFile:
        """``[balance]`` needs a DC-QE step on exact representations (module docstring)."""
        if self.balance is None:
            return self
        kind = self.study.kind
        if kind not in BALANCE_KINDS:
            raise ValueError(
                f'[balance] is used by kind = "dcqe" or "cate", not "{kind}" (no balanced sample); '
                "fix: remove [balance]"
            )
        if self.dp_representation is not None:
            raise ValueError(
                "[balance] cannot go with [dp_representation]: the analyst holds only the noisy treatment, "
                "not the arms the moments are split by; fix: remove [balance]"
            )
        return self

    @model_validator(mode="after")
    def _dp_study(self) -> StudyFile:
        """DP representations run SIMEX-corrected IPW with a bootstrap of the released rows only."""
        if self.dp_representation is None:
            return self
        study = self.study
        if "estimators" in study.model_fields_set and study.estimators != ["ipw"]:
            raise ValueError(
                'DP representations support estimators = ["ipw"] only; '
                "fix: drop estimators (matching needs exact labels)"
            )
        if study.interval != "percentile":
            raise ValueError(
                'DP representations support interval = "percentile" only; '
                "fix: drop interval (the bootstrap resamples released rows)"
            )
        components = study.party_components
        if any(isinstance(v, float) for v in (components.values() if isinstance(components, dict) else [components])):
            raise ValueError(
                "[dp_representation] needs an integer party_components (a variance fraction is data-dependent)"
            )
        return self

    @field_validator("anchor_ranges")
    @classmethod
    def _ranges(cls, value: dict[str, list[float]]) -> dict[str, list[float]]:
        for name, bounds in value.items():
            if len(bounds) != 2 or not bounds[0] < bounds[1]:
                raise ValueError(f"the range of {name!r} must be [low, high] with low < high, got {bounds}")
        return value


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
    interval: str = INTERVAL
    n_boot: int = BOOTSTRAP
    dp: DPRepresentationSpec | None = None
    kind: str = "dcqe"
    analysis: KindSection | None = None
    balance: DPBalanceSpec | None = None

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
        chosen = {k: s[k] for k in keys if k in s} | ({"estimators": ("ipw",)} if self.dp is not None else {})
        return DCQEPlan(
            row_groups=groups,
            label_holders=holders,
            anchor_ranges=self.anchor_ranges,
            n_anchors=s.get("n_anchors"),
            study=self.study,
            dp_balance=self.balance,
            **chosen,
        )


def load_study_config(path: str | Path) -> StudyConfig:
    """Read and check ``study.toml``; every problem is one :class:`ConfigError` naming the key."""
    file = Path(path)
    return study_config(load_toml_model(file, StudyFile), file)


def study_config(doc: StudyFile, file: Path) -> StudyConfig:
    """The :class:`StudyConfig` of a validated ``doc``, paths resolved against ``file``'s folder.

    ``collabcausal simulate <kind>`` validates the study it builds from its options with
    :class:`StudyFile` too and comes here with a nominal ``file``.
    """
    where = str(file)
    row_groups, holders = [], []
    for i, group in enumerate(doc.row_groups):
        holder = group.label_holder or group.parties[0]
        if holder not in group.parties:
            raise ConfigError(f"{where}: row_groups[{i}] label_holder {holder!r} is not one of its parties", "fix it")
        row_groups.append(tuple(group.parties))
        holders.append(holder)
    names = [p for g in row_groups for p in g]
    if len(set(names)) != len(names):
        raise ConfigError(f"{where}: a party appears in two row groups", "list each party once")
    server, study = doc.server, doc.study
    base = file.parent
    fix = "run `collabcausal certs init` and `certs issue --analyst`, then set ca, cert and key"
    tls = server.tls_paths(base, where, "server", fix)
    return StudyConfig(
        path=file.resolve(),
        study=study.id,
        server=Server(server.address, insecure=server.insecure, **tls),
        row_groups=tuple(row_groups),
        label_holders=tuple(holders),
        settings=study.model_dump(exclude_unset=True),
        anchor_ranges=doc.anchor_ranges,
        join_deadline=study.join_deadline,
        task_timeout=study.task_timeout,
        on_missing_party=study.on_missing_party,
        align=study.align,
        out=(base / study.out).resolve(),
        interval=study.interval,
        n_boot=study.bootstrap,
        dp=None if doc.dp_representation is None else doc.dp_representation.spec(),
        kind=study.kind,
        analysis=None if study.kind == "dcqe" else getattr(doc, study.kind),
        balance=None if doc.balance is None else doc.balance.spec(),
    )
