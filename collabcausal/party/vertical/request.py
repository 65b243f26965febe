"""The public terms of a vertical ``dp_effects`` request, checked against the party's table before any charge.

Request params (every vertical operation): ``study``, ``round`` (one id per release and attempt),
``rho`` and ``delta`` (the release's zCDP budget and share of delta), ``design``
(:meth:`~collabcausal.estimators.dp.effects.design.FeatureMap.to_spec` of the whole study's covariates),
``site`` (the row group's index), ``column_groups`` (each party's covariate names, label holder first),
``parties`` (the row group's parties, in the same order), ``n_subjects`` (the aligned row group's size),
optional ``norm_bounds`` (each column group's declared bound on its covariates' squared norm, which each
party enforces by scaling its own rows: :class:`~collabcausal.estimators.dp.effects.vertical.ColumnGroups`).
The covariates' design order is the column groups' concatenation.

**Batches.** A round's columns travel in batches of ``batch_rows`` subjects (optional, default all; at most
:data:`MAX_BATCH_ROWS`, so no message outgrows a party's memory or protobuf's 2 GiB): ``batch`` (default 0)
names the one a request is for. The key owner is charged and makes its key at batch 0 and encrypts each batch's
rows once, in order; the evaluator is charged at batch 0, adds each batch's sums under encryption and returns
the round's totals after the last (:mod:`~collabcausal.party.vertical.evaluations`). ``batch_rows`` is one of
the signed terms; ``batch`` is signed with each batch's columns.

:meth:`VerticalRequest.terms` is what both parties sign and check (:mod:`collabcausal.vertical.transcript`):
a coordinator that tells them different things gets a refusal, not two inconsistent computations.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from collabcausal.errors import InputError, PolicyError
from collabcausal.estimators.dp.effects.design import FeatureMap
from collabcausal.estimators.dp.effects.vertical import MAX_COLUMN_GROUPS, ColumnGroups, group_design
from collabcausal.estimators.dp.zcdp import check_rho
from collabcausal.estimators.validation import check_delta
from collabcausal.messages import Message
from collabcausal.party.dp_effects import MAX_SITES, check_float_range, check_labels
from collabcausal.party.dp_queries import request_number, require_ledger
from collabcausal.party.node import Party
from collabcausal.party.table import column_index

LABEL_HOLDER = 0
"""Column group 0 holds T and Y."""
KEY_OWNER = 1
"""Column group 1 owns the scores round's key."""
ANY_OTHER = -1
"""A role: any column group but the label holder's (the statistics round's evaluators)."""
FURTHER = -2
"""A role: any column group after the scores key owner's (three or more column groups)."""

MAX_BATCH_ROWS = 262_144
"""Most subjects one batch of columns carries: 27 score inputs of 32 ciphertexts at N = 16384, about 0.8 GB."""
VERTICAL_PARAMETERS = frozenset({"round", "rho", "delta", "design", "site", "column_groups", "parties", "n_subjects",
                                 "norm_bounds", "batch_rows", "batch"})
"""The parameters :func:`parse_vertical` applies (with ``study``, which every operation accepts): every vertical
operation but the opening declares them."""
__all__ = ["ANY_OTHER", "FURTHER", "KEY_OWNER", "LABEL_HOLDER", "MAX_BATCH_ROWS", "MAX_COLUMN_GROUPS",
           "VERTICAL_PARAMETERS", "VerticalRequest", "charge", "parse_vertical"]


@dataclass(frozen=True)
class VerticalRequest:
    """The checked public parameters of one vertical request (nothing read from the rows but their count)."""

    study: str
    round_id: str
    rho: float
    delta: float
    feature_map: FeatureMap
    site: int
    group_names: tuple[tuple[str, ...], ...]
    parties: tuple[str, ...]
    n_subjects: int
    me: int
    norm_bounds: tuple[float, ...] | None = None
    batch_rows: int = 0
    batch: int = 0

    @property
    def groups(self) -> ColumnGroups:
        """The covariates' positions per column group (design order: the groups concatenated) and their declared
        norm bounds."""
        return ColumnGroups.of_sizes([len(g) for g in self.group_names], self.norm_bounds)

    @property
    def batches(self) -> int:
        """Batches the round's columns travel in."""
        return math.ceil(self.n_subjects / self.batch_rows)

    def batch_slices(self) -> list[slice]:
        """The subjects of each batch of the round, in order."""
        return [slice(start, min(self.n_subjects, start + self.batch_rows))
                for start in range(0, self.n_subjects, self.batch_rows)]

    @property
    def rows(self) -> slice:
        """The subjects of this request's batch."""
        return self.batch_slices()[self.batch]

    @property
    def batch_size(self) -> int:
        """Subjects in this request's batch."""
        return self.rows.stop - self.rows.start

    @property
    def last_batch(self) -> bool:
        """Whether this request's batch is the round's last."""
        return self.batch == self.batches - 1

    @property
    def own_columns(self) -> list[int]:
        """This party's covariates' positions in the design row (after the site one-hot)."""
        return self.columns_of(self.me)

    def columns_of(self, group: int) -> list[int]:
        """Column group ``group``'s covariates' positions in the design row."""
        return self.groups.design_columns(group, self.feature_map.n_sites)

    def terms(self) -> dict[str, Any]:
        """What both parties sign and check: every public term of the round."""
        return {"study": self.study, "round": self.round_id, "rho": self.rho, "delta": self.delta,
                "design": self.feature_map.to_spec(), "site": self.site,
                "column_groups": [list(g) for g in self.group_names], "parties": list(self.parties),
                "n_subjects": self.n_subjects, "batch_rows": self.batch_rows,
                "norm_bounds": None if self.norm_bounds is None else list(self.norm_bounds)}

    def design(self, party: Party, rows: slice = slice(None)) -> NDArray[np.float64]:
        """This party's design rows (:func:`~collabcausal.estimators.dp.effects.vertical.group_design`: each row on
        its own), of every subject or of ``rows`` only (one batch: no array of every subject is built)."""
        X = np.column_stack([party.table.column(c)[rows] for c in self.group_names[self.me]])
        return group_design(self.feature_map, X, self.site, self.groups, self.me)


def parse_vertical(party: Party, request: Message, role: int, *, labels: bool = True) -> VerticalRequest:
    """Check a vertical request's public terms for this party in ``role`` (:data:`LABEL_HOLDER`, :data:`KEY_OWNER`,
    :data:`ANY_OTHER` or :data:`FURTHER`).

    Refused (one line, nothing charged): a missing or malformed term, a party not named in its role,
    fewer than two or more than :data:`MAX_COLUMN_GROUPS` column groups, a covariate the party does not hold or one
    named twice, a declared range whose arithmetic overflows, a row count other than the aligned one, a delta not
    below ``1/n``, batches over :data:`MAX_BATCH_ROWS` subjects or a batch past the last, and for the label holder no
    T and Y or an arm below ``min_subjects`` (:func:`~collabcausal.party.dp_effects.check_labels`, which reads the
    treatment column: a label holder's operation with a nested specification of its own passes ``labels=False`` and
    calls it once that is parsed, so that a malformed one is refused before any row is read).
    """
    p, op = request.params, request.operation
    for key in ("study", "round", "rho", "delta", "design", "site", "column_groups", "parties", "n_subjects"):
        if key not in p:
            raise InputError(f"{op} request has no {key}", "send a complete vertical dp_effects request "
                             "(docs/dp-effects-vertical.md)")
    round_id, groups, parties = p["round"], p["column_groups"], p["parties"]
    if not isinstance(round_id, str) or not round_id:
        raise InputError(f"{op} round must be a non-empty id", "send round='<study>/<release>/<row group>/<attempt>'")
    if (not isinstance(groups, list) or not all(isinstance(g, list) and g and all(isinstance(c, str) for c in g)
                                                for g in groups)):
        raise InputError(f"{op} column_groups must be lists of covariate names", 'send [["age", ...], ["bmi", ...]]')
    if not isinstance(parties, list) or len(parties) != len(groups) or not all(isinstance(x, str) for x in parties):
        raise InputError(f"{op} parties must name one party per column group", "send the row group's parties in order")
    if not 2 <= len(groups) <= MAX_COLUMN_GROUPS:
        raise InputError(f"{op} takes 2 to {MAX_COLUMN_GROUPS} column groups (a label holder and other parties), "
                         f"not {len(groups)}", "split the row group's covariates among 2 to "
                         f"{MAX_COLUMN_GROUPS} parties")
    names = [c for g in groups for c in g]
    if len(set(names)) != len(names) or len(set(parties)) != len(parties):
        raise InputError(f"{op} names a covariate or a party twice", "give each covariate to one party, once")
    me = _role_index(party, parties, role)
    for name in groups[me]:
        column_index(party.table, name)
    feature_map = FeatureMap.from_spec(p["design"])
    if feature_map.n_covariates != len(names) or feature_map.n_sites > MAX_SITES:
        raise InputError(f"{op} declares {feature_map.n_covariates} ranges for {len(names)} covariates (or more than "
                         f"{MAX_SITES} sites)", "send one range per covariate, in the column groups' order")
    check_float_range(feature_map, op)
    site = p["site"]
    if isinstance(site, bool) or not isinstance(site, int) or not 0 <= site < feature_map.n_sites:
        raise InputError(f"{op} site {site!r} is not in 0..{feature_map.n_sites - 1}", "send the row group's index")
    n = party.table.n_subjects
    if p["n_subjects"] != n or isinstance(p["n_subjects"], bool):
        raise PolicyError(f"party {party.name!r} holds {n} rows, not the row group's {p['n_subjects']!r}",
                          "align the row group first (both parties keep the subjects they share, in one order)")
    rho = check_rho(request_number(p["rho"], "rho", op), f"rho of {op}")
    delta = check_delta(request_number(p["delta"], "delta", op), f"delta of {op}")
    if not 0.0 < delta < 1.0 / n:
        raise InputError(f"delta {delta:g} of {op} is not in (0, 1/n = 1/{n})", "e.g. delta = 1e-6")
    if me == LABEL_HOLDER and labels:
        check_labels(party, op, 1)
    bounds = p.get("norm_bounds")
    if bounds is not None and not (isinstance(bounds, list) and all(
            isinstance(b, int | float) and not isinstance(b, bool) for b in bounds)):
        raise InputError(f"{op} norm_bounds must be one number per column group, or absent",
                         "send the study's [dp_effects] norm_bounds")
    batch_rows, batch = _batch(p, op, n)
    request = VerticalRequest(str(p["study"]), round_id, rho, delta, feature_map, site,
                              tuple(tuple(g) for g in groups), tuple(parties), n, me,
                              None if bounds is None else tuple(float(b) for b in bounds), batch_rows, batch)
    request.groups  # noqa: B018 - ColumnGroups checks the norm bounds (one positive finite number per group)
    return request


def _role_index(party: Party, parties: list[str], role: int) -> int:
    """This party's column group, refused unless it plays ``role`` there."""
    me = parties.index(party.name) if party.name in parties else None
    allowed = {LABEL_HOLDER: me == 0, KEY_OWNER: me == 1, ANY_OTHER: me is not None and me >= 1,
               FURTHER: me is not None and me >= 2}[role]
    if not allowed:
        holder = {LABEL_HOLDER: "the label holder", KEY_OWNER: "the second party", ANY_OTHER: "a party other than "
                  "the label holder", FURTHER: "a third or later party"}[role]
        named = f" ({parties[role]!r} is)" if role in (LABEL_HOLDER, KEY_OWNER) else ""
        raise PolicyError(f"party {party.name!r} is not {holder} of this row group{named}",
                          "send each party the operation of its role")
    assert me is not None
    return me


def _batch(p: dict[str, Any], op: str, n: int) -> tuple[int, int]:
    """The request's checked ``batch_rows`` (default: every subject) and ``batch`` (default 0)."""
    batch_rows, batch = p.get("batch_rows", n), p.get("batch", 0)
    if isinstance(batch_rows, bool) or not isinstance(batch_rows, int) or batch_rows < 1:
        raise InputError(f"{op} batch_rows {batch_rows!r} is not a positive number of subjects",
                         f"send batch_rows between 1 and {MAX_BATCH_ROWS}")
    if min(batch_rows, n) > MAX_BATCH_ROWS:
        raise InputError(f"{op} asks for batches of {min(batch_rows, n)} subjects, over {MAX_BATCH_ROWS} a message",
                         f"send batch_rows of at most {MAX_BATCH_ROWS} (the coordinator's default is 65536)")
    batches = math.ceil(n / batch_rows)
    if isinstance(batch, bool) or not isinstance(batch, int) or not 0 <= batch < batches:
        raise InputError(f"{op} batch {batch!r} is not one of the round's {batches}", f"send batch 0..{batches - 1}")
    return batch_rows, batch


def charge(party: Party, request: Message, req: VerticalRequest, sigma: float, release: str) -> None:
    """Charge this party's ledger for its part in ``release`` (``rho``-zCDP, ``delta``), before it computes."""
    ledger = require_ledger(party, request.operation)
    ledger.charge_zcdp(request.operation, req.rho, req.delta, study=req.study, details={
        "release": f"vertical {release}", "round": req.round_id, "sigma": sigma, "parties": list(req.parties),
        "columns": list(req.group_names[req.me])})
