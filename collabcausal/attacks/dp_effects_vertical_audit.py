"""Empirical DP audit of vertical ``dp_effects``' two releases through :meth:`Party.handle` (issue 36, item 3).

Each party's noise share alone must give the release's guarantee, even against a coordinator colluding
with the other party of its row group (docs/dp-effects-vertical.md). The auditor is that coalition: it
plays the other party itself, with that party's data and certificate, and asks the honest party for the
same release many times on two neighbouring row groups (one subject's whole record substituted: the
target at the all-ones corner of every column with the top outcome, in arm 0 versus arm 1, as
:func:`~collabcausal.attacks.dp_effects_audit.statistics_neighbours`):

* **the evaluator's guarantee** (:func:`audit_evaluator`): the colluding label holder encrypts its factors
  under one key of its own, signs them, has the honest evaluator total the cross entries (charged each
  time) and decrypts each total **without** adding a share of its own: what it sees is the cross sums plus
  the evaluator's share alone;
* **the label holder's guarantee** (:func:`audit_label_holder`): the colluding evaluator returns honest
  cross totals with a negligible share of its own (1e-9), signed, and the honest label holder encrypts
  and opens (charged each time): the released vector carries the label holder's share alone;
* **the label holder's guarantee in the scores round** (:func:`audit_scores_label_holder`): there the other
  party owns the key and the label holder evaluates, so the auditor plays the key owner, encrypts its parts
  of a score program under a key of its own, has the honest label holder total the released sums (charged
  each time) and decrypts them without a share (:func:`label_holder_score_releases`). The neighbours are the
  two records of a lattice of the box (either arm, either outcome end) whose scaled scores are furthest
  apart (:meth:`AuditSetup.with_scores_neighbours`), under a hostile program (:func:`hostile_scores_setup`).

* **a third party's guarantee** (:func:`audit_three_party_evaluator`; three column groups): the colluding label
  holder encrypts its factors under a key of its own; the honest second party multiplies its arm by its column
  and seals the products to the honest third, which totals its entries (the three-party Gram entries among them)
  with its share: the label holder decrypts them without a share of its own.

The key owner's share in the scores round (P opening with its share) is the same code path as the label
holder's opening in the statistics round (:func:`~collabcausal.party.vertical.opening.open_release`, its
share from :func:`~collabcausal.estimators.dp.effects.vertical_program.noise_share` at the round's sigma),
audited above through the statistics round.

The likelihood-ratio test and Clopper-Pearson bounds are :func:`~collabcausal.attacks.dp_audit.release_audit`'s;
the claim audited is the party's own ledger charge (``rho``, ``delta``) and the sensitivity it calibrates to.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from collabcausal.attacks.dp_audit import ReleaseAudit, projection_errors, release_audit
from collabcausal.attacks.dp_effects_audit import with_target
from collabcausal.estimators.dp.effects.design import FeatureMap
from collabcausal.estimators.dp.effects.nuisances import NuisanceModel
from collabcausal.estimators.dp.effects.statistics import fold_statistics
from collabcausal.estimators.dp.effects.vertical import (
    ColumnGroups,
    cross_entries,
    group_design,
    label_vectors,
    part_limits,
    scaled_score_terms,
)
from collabcausal.estimators.dp.effects.vertical_program import (
    ScoreProgram,
    score_inputs,
    scores_bound,
    statistics_bound,
)
from collabcausal.estimators.dp.zcdp import zcdp_epsilon
from collabcausal.ledger import PrivacyLedger
from collabcausal.messages import Message
from collabcausal.party import Party, PartyTable
from collabcausal.party.secagg import attach_identities
from collabcausal.party.vertical.exchange import columns_reply
from collabcausal.party.vertical.request import parse_vertical
from collabcausal.secagg import KEYS_OPERATION, simulation_identities
from collabcausal.vertical import KeyOwner, load_public_context, preset
from collabcausal.vertical.column import RelayedColumn
from collabcausal.vertical.dp_effects_rounds import (
    cross_totals,
    encrypt_label_vectors,
    encrypt_score_inputs,
    open_totals,
    packed_entries,
    statistics_depth,
)
from collabcausal.vertical.relay import SEALED_FROM, TOTALS, relay_sealed
from collabcausal.vertical.sealed import seal_round
from collabcausal.vertical.transcript import TOTALS_KIND, blob_arrays, blobs, sign_transcript

STUDY = "vertical-audit"
NEGLIGIBLE = 1e-9
"""The colluding party's own share (nonzero, as the library requires; 1e-9 of nothing the test can see)."""

SCORES_DEPTH = 7
"""The scores round's depth (:mod:`collabcausal.party.vertical.scores`)."""

__all__ = ["AuditSetup", "ThreePartySetup", "audit_evaluator", "audit_label_holder", "audit_scores_label_holder",
           "audit_three_party_evaluator", "hostile_scores_setup", "label_holder_score_releases"]


@dataclass(frozen=True)
class AuditSetup:
    """Two neighbouring row groups split between a label holder (``label`` columns, T, Y) and another party."""

    frames: tuple[pd.DataFrame, pd.DataFrame]
    label: tuple[str, ...]
    other: tuple[str, ...]
    feature_map: FeatureMap
    rho: float
    delta: float

    @property
    def groups(self) -> ColumnGroups:
        """Positions of the two column groups in the design order."""
        return ColumnGroups.of_sizes([len(self.label), len(self.other)])

    def request(self, operation: str, n: int, round_id: str, **extra: Any) -> Message:
        """The request both parties get (its public terms; ``extra``: the scores round's ``program``)."""
        return Message(operation, {"study": STUDY, "round": round_id, "rho": self.rho, "delta": self.delta,
                                   "design": self.feature_map.to_spec(), "site": 0,
                                   "column_groups": [list(self.label), list(self.other)],
                                   "parties": ["holder", "evaluator"], "n_subjects": n} | extra)

    def parties(self, frame: pd.DataFrame, folder: Path, tag: str) -> tuple[Party, Party]:
        """The label holder and the other party of ``frame``, pinned to each other, with ledgers of 1e12."""
        holder = Party("holder", PartyTable.from_frame(frame, list(self.label), treatment="t", outcome="y"))
        evaluator = Party("evaluator", PartyTable.from_frame(frame, list(self.other)))
        for party in (holder, evaluator):
            party.ledger = PrivacyLedger(folder / f"{tag}-{party.name}.sqlite", epsilon=1e12, delta=0.5,
                                         dataset=party.name)
        attach_identities([holder, evaluator], simulation_identities(STUDY, ["holder", "evaluator"]))
        return holder, evaluator

    def exact(self, frame: pd.DataFrame) -> NDArray[np.float64]:
        """The statistics vector of the joined row group, before noise."""
        return _joined_statistics(self.feature_map, frame, [*self.label, *self.other])

    def score_inputs(self, program: ScoreProgram, frame: pd.DataFrame, group: int) -> list[NDArray[np.float64]]:
        """Column group ``group``'s clipped, scaled parts of ``program`` on ``frame`` (what it encrypts or adds)."""
        columns = list((self.label, self.other)[group])
        design = group_design(self.feature_map, frame[columns].to_numpy(dtype=float), 0, self.groups, group)
        return score_inputs(program, design, group, self.groups, self.feature_map)

    def exact_scores(self, program: ScoreProgram, frame: pd.DataFrame) -> NDArray[np.float64]:
        """The scores release (scaled sums) of the joined row group, before noise: the plaintext twin."""
        summed = [a + b for a, b in zip(self.score_inputs(program, frame, 0), self.score_inputs(program, frame, 1),
                                        strict=True)]
        pieces = [summed[i:i + 3] for i in range(0, len(summed), 3)]
        at_copies = [[a + d for a, d in zip(pieces[0], change, strict=True)] for change in pieces[1:]]
        terms = scaled_score_terms(frame["t"].to_numpy(dtype=float), self.feature_map.centred_outcome(frame["y"]),
                                   pieces[0], at_copies, program.poly, program.parts, program.unit)
        return np.array([t.sum() for t in terms])

    def with_scores_neighbours(self, program: ScoreProgram, background: pd.DataFrame, grid: int = 3) -> AuditSetup:
        """This setup with the worst-case neighbours for ``program``'s scores: ``background`` plus each of the two
        candidate records whose scaled scores are furthest apart (candidates: every point of a ``grid``-per-axis
        lattice of the covariate box, either arm, the outcome at either end), as
        :func:`~collabcausal.attacks.dp_effects_audit.scores_neighbours` does for the horizontal release."""
        columns = [*self.label, *self.other]
        axes = [np.linspace(lo, hi, grid) for lo, hi in self.feature_map.bounds]
        records = pd.DataFrame([dict(zip(columns, point, strict=True)) | {"t": t, "y": y}
                                for point in itertools.product(*axes) for t in (0, 1)
                                for y in self.feature_map.outcome_range])
        scores = np.array([self.exact_scores(program, records.iloc[[i]]) for i in range(len(records))])
        gaps = np.linalg.norm(scores[:, None, :] - scores[None, :, :], axis=2)
        i, j = np.unravel_index(int(np.argmax(gaps)), gaps.shape)
        frames = tuple(with_target(background, records.iloc[k].to_dict() | {"t": int(records["t"].iloc[k])})
                       for k in (i, j))
        return replace(self, frames=frames)


def audit_evaluator(setup: AuditSetup, n_releases: int, folder: Path, *, confidence: float = 1.0 - 1e-6
                    ) -> ReleaseAudit:
    """The evaluator's cross totals as the colluding label holder decrypts them (module docstring)."""
    entries = packed_entries(cross_entries(setup.groups, 1))
    at = [e.index for e in entries]

    def releases(frame: pd.DataFrame, tag: str) -> NDArray[np.float64]:
        holder, evaluator = setup.parties(frame, folder, tag)
        n = holder.table.n_subjects
        owner = KeyOwner(preset(1))
        fm = setup.feature_map
        design = group_design(fm, frame[list(setup.label)].to_numpy(dtype=float), 0, setup.groups, 0)
        y = fm.centred_outcome(frame["y"])
        vectors = label_vectors(design, frame["t"].to_numpy(dtype=float), np.clip(y / fm.outcome_width, -0.5, 0.5),
                                setup.groups, 1, 0)
        encrypted = encrypt_label_vectors(owner, vectors)
        columns = list(encrypted.values())
        out = []
        for r in range(n_releases):
            request = setup.request("vertical_statistics_columns", n, f"{tag}/{r}")
            req = parse_vertical(holder, request, 0)
            terms = req.terms() | {"release": "statistics", "keys": list(encrypted)}
            reply = columns_reply(holder, request, req, owner, columns, terms)
            totals = evaluator.handle(_relayed("vertical_statistics_totals", request, reply))
            out.append(open_totals(owner, blobs(totals, "ckks_totals"), np.full(len(entries), NEGLIGIBLE),
                                   grid=owner.parameters.error_bound))
        _check_charged(evaluator, n_releases)
        return np.array(out)

    bound = statistics_bound(setup.feature_map, setup.groups)
    return _audit(releases, lambda f: setup.exact(f)[at], setup, bound, n_releases, confidence, "evaluator")


def audit_label_holder(setup: AuditSetup, n_releases: int, folder: Path, *, confidence: float = 1.0 - 1e-6
                       ) -> ReleaseAudit:
    """The label holder's released vector when the colluding evaluator adds no share (module docstring)."""
    entries = packed_entries(cross_entries(setup.groups, 1))

    def releases(frame: pd.DataFrame, tag: str) -> NDArray[np.float64]:
        holder, evaluator = setup.parties(frame, folder, tag)
        n = holder.table.n_subjects
        signer = evaluator.secagg_identity.signer
        design = group_design(setup.feature_map, frame[list(setup.other)].to_numpy(dtype=float), 0, setup.groups, 1)
        out = []
        for r in range(n_releases):
            request = setup.request("vertical_statistics_columns", n, f"{tag}/{r}")
            reply = holder.handle(request)
            context = load_public_context(bytes(blobs(reply, "ckks_context")[0]))
            flat, counts = blobs(reply, "ckks_columns"), reply.params["chunks"]
            ends = np.cumsum(counts)
            relayed = [RelayedColumn(context, flat[int(e - c):int(e)], n) for e, c in zip(ends, counts, strict=True)]
            req = parse_vertical(evaluator, setup.request("vertical_statistics_totals", n, f"{tag}/{r}"), 1)
            keys = holder.vertical_rounds[req.round_id].terms["keys"]
            totals = cross_totals(dict(zip(keys, relayed, strict=True)), design, entries,
                                  np.full(len(entries), NEGLIGIBLE), flood_sd=NEGLIGIBLE)
            terms = holder.vertical_rounds[req.round_id].terms
            signature = sign_transcript(signer, STUDY, req.round_id, TOTALS_KIND, terms, totals)
            opened = holder.handle(Message("vertical_statistics_open", {
                "study": STUDY, "round": req.round_id, "totals_advertisement": signature},
                blob_arrays("ckks_totals", totals)))
            out.append(opened.arrays["values"])
        _check_charged(holder, n_releases)
        return np.array(out)

    bound = statistics_bound(setup.feature_map, setup.groups)
    return _audit(releases, setup.exact, setup, bound, n_releases, confidence, "holder")


@dataclass(frozen=True)
class ThreePartySetup:
    """Two neighbouring row groups split among a label holder (``columns[0]``, T, Y) and two other parties."""

    frames: tuple[pd.DataFrame, pd.DataFrame]
    columns: tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]
    feature_map: FeatureMap
    rho: float
    delta: float

    NAMES = ("holder", "middle", "evaluator")

    @property
    def groups(self) -> ColumnGroups:
        """Positions of the three column groups in the design order."""
        return ColumnGroups.of_sizes([len(c) for c in self.columns])

    def request(self, operation: str, n: int, round_id: str, **extra: Any) -> Message:
        """The request every party gets (its public terms)."""
        return Message(operation, {"study": STUDY, "round": round_id, "rho": self.rho, "delta": self.delta,
                                   "design": self.feature_map.to_spec(), "site": 0,
                                   "column_groups": [list(c) for c in self.columns], "parties": list(self.NAMES),
                                   "n_subjects": n} | extra)

    def parties(self, frame: pd.DataFrame, folder: Path, tag: str) -> list[Party]:
        """The three parties of ``frame``, pinned to each other, with ledgers of 1e12."""
        parties = [Party(name, PartyTable.from_frame(frame, list(cols), **(
            {"treatment": "t", "outcome": "y"} if g == 0 else {})))
            for g, (name, cols) in enumerate(zip(self.NAMES, self.columns, strict=True))]
        for party in parties:
            party.ledger = PrivacyLedger(folder / f"{tag}-{party.name}.sqlite", epsilon=1e12, delta=0.5,
                                         dataset=party.name)
        attach_identities(parties, simulation_identities(STUDY, list(self.NAMES)))
        return parties

    def exact(self, frame: pd.DataFrame) -> NDArray[np.float64]:
        """The statistics vector of the joined row group, before noise."""
        return _joined_statistics(self.feature_map, frame, [c for cols in self.columns for c in cols])


def audit_three_party_evaluator(setup: ThreePartySetup, n_releases: int, folder: Path, *,
                                confidence: float = 1.0 - 1e-6) -> ReleaseAudit:
    """The third party's totals (its cross entries, the three-party Gram entries among them) as the colluding
    label holder decrypts them, the second party's sealed products relayed honestly (module docstring)."""
    entries = packed_entries([e for e in cross_entries(setup.groups, 1) if e.evaluator == 2])
    at = [e.index for e in entries]

    def releases(frame: pd.DataFrame, tag: str) -> NDArray[np.float64]:
        holder, middle, evaluator = setup.parties(frame, folder, tag)
        n = holder.table.n_subjects
        owner = KeyOwner(preset(statistics_depth(3)))
        fm = setup.feature_map
        design = group_design(fm, frame[list(setup.columns[0])].to_numpy(dtype=float), 0, setup.groups, 0)
        y = fm.centred_outcome(frame["y"])
        encrypted = encrypt_label_vectors(owner, label_vectors(
            design, frame["t"].to_numpy(dtype=float), np.clip(y / fm.outcome_width, -0.5, 0.5), setup.groups, 1, 0))
        out = []
        for r in range(n_releases):
            round_id = f"{tag}/{r}"
            request = setup.request("vertical_statistics_columns", n, round_id)
            req = parse_vertical(holder, request, 0)
            terms = req.terms() | {"release": "statistics", "keys": list(encrypted)}
            reply = columns_reply(holder, request, req, owner, list(encrypted.values()), terms)
            key = evaluator.handle(Message(KEYS_OPERATION, {"study": STUDY, "round": seal_round(round_id)}))
            relayed = _relayed("vertical_statistics_totals", request, reply)
            products = middle.handle(Message(relayed.operation, relayed.params | {"seal_keys": {"2": key.params[
                "advertisement"]}}, dict(relayed.arrays)))
            sealed, arrays = relay_sealed(products, 1, 2)
            totals = evaluator.handle(Message(relayed.operation, relayed.params | {SEALED_FROM: sealed},
                                              dict(relayed.arrays) | arrays))
            out.append(open_totals(owner, blobs(totals, TOTALS), np.full(len(entries), NEGLIGIBLE),
                                   grid=owner.parameters.error_bound))
        _check_charged(evaluator, n_releases)
        return np.array(out)

    bound = statistics_bound(setup.feature_map, setup.groups)
    return _audit(releases, lambda f: setup.exact(f)[at], setup, bound, n_releases, confidence, "three")


HOSTILE_MODEL_SLOPES = (3.0, -3.0)
"""The hostile program's propensity slopes on the two design columns (unit box): the propensity crosses both
trims across the box, so some corners score at the largest weight the polynomial allows."""


def hostile_scores_setup(setup: AuditSetup, background: pd.DataFrame, trim: float = 0.1
                         ) -> tuple[AuditSetup, ScoreProgram]:
    """A hostile score program for a two-covariate ``setup`` (steep propensity, outcome models across the range, no
    replicates; limits from ``background``'s Gram) and the setup with its worst neighbours on ``background``."""
    fm = setup.feature_map
    model = NuisanceModel(np.array([0.0, *HOSTILE_MODEL_SLOPES]),
                          (np.array([0.0, 0.2, 0.1]), np.array([0.1, 0.2, 0.1])))
    D = fm.design(background[[*setup.label, *setup.other]].to_numpy(dtype=float), 0)
    program = ScoreProgram.build(model, part_limits(model, D.T @ D, setup.groups, fm.n_sites, fm.outcome_width), [],
                                 trim, fm)
    return setup.with_scores_neighbours(program, background), program


def label_holder_score_releases(setup: AuditSetup, program: ScoreProgram, frame: pd.DataFrame, n_releases: int,
                                folder: Path, tag: str) -> NDArray[np.float64]:
    """``n_releases`` score totals of the honest label holder on ``frame`` as the colluding key owner decrypts them.

    In the scores round the other party P owns the key and the label holder L evaluates; the auditor plays
    P (its data and certificate, one depth-7 CKKS key of its own), signs its encrypted parts of ``program``,
    has the honest L evaluate and total the released sums (charged every time) and decrypts the totals
    itself **without** a share: each row is the score sums plus L's share alone.
    """
    holder, evaluator = setup.parties(frame, folder, tag)
    n = holder.table.n_subjects
    owner = KeyOwner(preset(SCORES_DEPTH))
    columns = list(encrypt_score_inputs(owner, setup.score_inputs(program, frame, 1)))
    out = []
    for r in range(n_releases):
        request = setup.request("vertical_scores_columns", n, f"{tag}/{r}", program=program.to_spec())
        req = parse_vertical(evaluator, request, 1)
        terms = req.terms() | {"release": "scores", "program": program.to_spec()}
        reply = columns_reply(evaluator, request, req, owner, columns, terms)
        totals = holder.handle(_relayed("vertical_scores_totals", request, reply))
        out.append(open_totals(owner, blobs(totals, "ckks_totals"), np.full(len(program.parts), NEGLIGIBLE),
                               grid=owner.parameters.error_bound))
    _check_charged(holder, n_releases)
    return np.array(out)


def audit_scores_label_holder(setup: AuditSetup, program: ScoreProgram, n_releases: int, folder: Path, *,
                              confidence: float = 1.0 - 1e-6) -> ReleaseAudit:
    """The likelihood-ratio audit of :func:`label_holder_score_releases` on the setup's two row groups."""
    return _audit(lambda frame, tag: label_holder_score_releases(setup, program, frame, n_releases, folder, tag),
                  lambda f: setup.exact_scores(program, f), setup, scores_bound(program), n_releases, confidence,
                  "scores")


def _joined_statistics(feature_map: FeatureMap, frame: pd.DataFrame, columns: list[str]) -> NDArray[np.float64]:
    """The statistics vector of ``frame``'s joined ``columns`` (the design order), T and Y, before noise."""
    design = feature_map.design(frame[columns].to_numpy(dtype=float), 0)
    return fold_statistics(design, frame["t"].to_numpy(np.int8), feature_map.centred_outcome(frame["y"]),
                           feature_map.outcome_width)


def _relayed(operation: str, request: Message, reply: Message) -> Message:
    keys = ("chunks", "context_advertisement", "columns_advertisement")
    return Message(operation, dict(request.params) | {k: reply.params[k] for k in keys}, dict(reply.arrays))


def _check_charged(party: Party, n_releases: int) -> None:
    if len(party.ledger.history()) != n_releases:
        raise AssertionError(f"{party.name} was charged {len(party.ledger.history())} times for {n_releases} releases")


def _audit(releases: Callable[[pd.DataFrame, str], NDArray[np.float64]],
           exact: Callable[[pd.DataFrame], NDArray[np.float64]], setup: AuditSetup | ThreePartySetup,
           sensitivity: float, n_releases: int, confidence: float, view: str) -> ReleaseAudit:
    first, second = (exact(f) for f in setup.frames)
    errors: list[Any] = []
    for tag, frame, says_second in (("first", setup.frames[0], True), ("second", setup.frames[1], False)):
        errors.append(projection_errors(releases(frame, f"{tag}-{view}"), first, second, says_second))
    return release_audit(errors[0], errors[1], n_releases, float(np.linalg.norm(second - first)), sensitivity,
                         zcdp_epsilon(setup.rho, setup.delta), setup.delta, confidence)
