"""The messages a coordinator sends in the vertical rounds of three column groups, for the attack tests.

Three parties of :data:`N` subjects (:func:`~vertical_parties.three_parties`: ``hospital`` the label holder L,
``registry`` the scores key owner P1, ``insurer`` a further party P2), an honest score program fitted from the exact
statistics, and builders for each step's request as the coordinator relays it
(:mod:`collabcausal.analyst.dp_effects_vertical`): the receivers' round keys for sealed ciphertexts, the key owner's
columns, each party's totals or sealed parts in turn, the opening.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from vertical_parties import STUDY, three_parties

from collabcausal.estimators.dp.effects.design import FeatureMap
from collabcausal.estimators.dp.effects.statistics import fold_statistics
from collabcausal.estimators.dp.effects.vertical import ColumnGroups
from collabcausal.estimators.dp.effects.vertical_program import ScoreProgram, program_from_statistics
from collabcausal.messages import Message
from collabcausal.party import Party
from collabcausal.secagg import KEYS_OPERATION
from collabcausal.vertical.relay import SEALED_FROM, relay_sealed, relayed_totals
from collabcausal.vertical.sealed import seal_round

N = 300
GROUPS = ColumnGroups(((0, 1), (2, 3), (4, 5)))
COLUMN_GROUPS = [["a0", "a1"], ["a2", "b0"], ["b1", "b2"]]
NAMES = ["hospital", "registry", "insurer"]
RELAY = ("chunks", "context_advertisement", "columns_advertisement")
STEPS = {"statistics": ("vertical_statistics_columns", "vertical_statistics_totals", "vertical_statistics_open"),
         "scores": ("vertical_scores_columns", "vertical_scores_totals", "vertical_scores_open")}
PARTS = "vertical_scores_parts"


class Three:
    """Three parties of one row group and their subjects."""

    def __init__(self, folder: Path, n: int = N, epsilon: float = 1.0) -> None:
        self.parties, self.X, self.T, self.Y, self.spec = three_parties(folder, n=n, epsilon=epsilon)
        self.by_name = {p.name: p for p in self.parties}

    @property
    def label(self) -> Party:
        return self.parties[0]

    @property
    def registry(self) -> Party:
        return self.parties[1]

    @property
    def insurer(self) -> Party:
        return self.parties[2]

    def feature_map(self) -> FeatureMap:
        return FeatureMap(self.spec.bounds, self.spec.outcome_range, 1)

    def program(self) -> ScoreProgram:
        """The program the coordinator fits from the statistics (here exact, noise sd 5 assumed)."""
        fm = self.feature_map()
        stats = fold_statistics(fm.design(self.X, 0), self.T, fm.centred_outcome(self.Y), fm.outcome_width)
        return program_from_statistics(stats, np.full(stats.size, 5.0), fm, GROUPS, trim=0.1, ridge_scale=0.25,
                                       n_replicates=2, rng=np.random.default_rng(0))

    def terms(self, release: str, **changes: Any) -> dict[str, Any]:
        """Every party's terms of ``release`` (``changes`` applied; a scores round carries the honest program)."""
        (rho_n, delta_n), (rho_s, delta_s) = self.spec.budgets
        rho, delta = (rho_n, delta_n) if release == "statistics" else (rho_s, delta_s)
        params = {"study": STUDY, "round": f"{STUDY}/{release}/0", "rho": rho, "delta": delta,
                  "design": self.feature_map().to_spec(), "site": 0, "column_groups": COLUMN_GROUPS,
                  "parties": NAMES, "n_subjects": self.label.table.n_subjects, "norm_bounds": None}
        if release == "scores":
            params["program"] = self.program().to_spec()
        return params | changes

    def seal_key(self, party: Party, round_id: str) -> dict[str, Any]:
        """``party``'s signed round key for the sealed ciphertexts of ``round_id`` (``secagg_keys``)."""
        return party.handle(Message(KEYS_OPERATION, {"study": STUDY, "round": seal_round(round_id)})
                            ).params["advertisement"]


def relayed(operation: str, terms: dict[str, Any], columns: Message, *, sealed: dict[int, Message] | None = None,
            receiver: int = 0, seal_keys: dict[str, Any] | None = None, keys: tuple[str, ...] = RELAY) -> Message:
    """A request of ``operation``: ``terms``, the key owner's ``columns`` reply relayed (``keys`` of its params, every
    array), the sealed ciphertexts of each sender in ``sealed`` meant for ``receiver``, and the ``seal_keys``."""
    params = dict(terms) | {k: columns.params[k] for k in keys if k in columns.params}
    arrays = dict(columns.arrays) if "chunks" in keys else {k: v for k, v in columns.arrays.items()
                                                              if k.startswith("ckks_context")}
    if sealed:
        moved = [relay_sealed(reply, sender, receiver) for sender, reply in sealed.items()]
        params[SEALED_FROM] = {k: v for p, _ in moved for k, v in p.items()}
        arrays |= {k: v for _, a in moved for k, v in a.items()}
    if seal_keys is not None:
        params["seal_keys"] = seal_keys
    return Message(operation, params, arrays)


def opening(release: str, terms: dict[str, Any], totals: list[Message]) -> Message:
    """The key owner's opening with each evaluator's totals relayed in order."""
    moved = [relayed_totals(reply, k) for k, reply in enumerate(totals)]
    return Message(STEPS[release][2], {"study": terms["study"], "round": terms["round"]}
                   | {k: v for p, _ in moved for k, v in p.items()}, {k: v for _, a in moved for k, v in a.items()})


def statistics_round(w: Three, **changes: Any) -> dict[str, Any]:
    """An honest statistics round up to L's opening: the terms, the insurer's seal key, L's columns, the registry's
    reply (its sealed products for the insurer) and the insurer's (L, registry and insurer charged)."""
    terms = w.terms("statistics", **changes)
    key = w.seal_key(w.insurer, terms["round"])
    columns = w.label.handle(Message(STEPS["statistics"][0], terms))
    registry = w.registry.handle(relayed(STEPS["statistics"][1], terms, columns, seal_keys={"2": key}))
    return {"terms": terms, "key": key, "columns": columns, "registry": registry}


def statistics_insurer(w: Three, r: dict[str, Any]) -> Message:
    """The insurer's honest request of the statistics round ``r``: L's columns and the registry's sealed products."""
    return relayed(STEPS["statistics"][1], r["terms"], r["columns"], sealed={1: r["registry"]}, receiver=2)


def scores_round(w: Three, **changes: Any) -> dict[str, Any]:
    """An honest scores round up to L's totals: the terms, L's seal key, the registry's columns and the insurer's
    sealed parts for L (registry and insurer charged)."""
    terms = w.terms("scores", **changes)
    key = w.seal_key(w.label, terms["round"])
    columns = w.registry.handle(Message(STEPS["scores"][0], terms))
    parts = w.insurer.handle(relayed(PARTS, terms, columns, seal_keys={"0": key}, keys=("context_advertisement",)))
    return {"terms": terms, "key": key, "columns": columns, "parts": parts}


def scores_label(w: Three, r: dict[str, Any]) -> Message:
    """L's honest request of the scores round ``r``: the registry's columns and the insurer's sealed parts."""
    return relayed(STEPS["scores"][1], r["terms"], r["columns"], sealed={2: r["parts"]}, receiver=0)
