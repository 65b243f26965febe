"""The messages a coordinator sends in the vertical rounds, for the hostile-coordinator and evil-party tests.

A small world (:func:`~vertical_parties.world` at 300 subjects), an honest score program fitted from the
world's exact statistics (what the coordinator would fit from the released ones), and builders for each
step's request: the key owner's, the evaluator's (the key owner's reply relayed) and the opening.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from vertical_parties import STUDY, World, world

from collabcausal.estimators.dp.effects.design import FeatureMap
from collabcausal.estimators.dp.effects.statistics import fold_statistics
from collabcausal.estimators.dp.effects.vertical import ColumnGroups
from collabcausal.estimators.dp.effects.vertical_program import ScoreProgram, program_from_statistics
from collabcausal.messages import Message

N = 300
GROUPS = ColumnGroups(((0, 1, 2), (3, 4, 5)))
RELAY = ("chunks", "context_advertisement", "columns_advertisement")
STEPS = {"statistics": ("vertical_statistics_columns", "vertical_statistics_totals", "vertical_statistics_open"),
         "scores": ("vertical_scores_columns", "vertical_scores_totals", "vertical_scores_open")}
KEY_OWNER = {"statistics": "label", "scores": "other"}


def small_world(folder: Path, **kwargs: Any) -> World:
    """Two parties of :data:`N` subjects, pinned to each other."""
    return world(folder, n=N, **kwargs)


def feature_map(w: World) -> FeatureMap:
    return FeatureMap(w.spec.bounds, w.spec.outcome_range, 1)


def honest_program(w: World, replicates: int = 2) -> ScoreProgram:
    """The program the coordinator fits from the statistics (here exact, noise sd 5 assumed)."""
    fm = feature_map(w)
    stats = fold_statistics(fm.design(w.X, 0), w.T, fm.centred_outcome(w.Y), fm.outcome_width)
    return program_from_statistics(stats, np.full(stats.size, 5.0), fm, GROUPS, trim=0.1, ridge_scale=0.25,
                                   n_replicates=replicates, rng=np.random.default_rng(0))


NO_PROGRAM = "no program"
"""Pass as ``program`` for a scores request without one."""


def request(w: World, release: str, *, program: ScoreProgram | object = None, **changes: Any) -> Message:
    """The key owner's request of ``release`` (its budget share of the study), ``changes`` applied to the params;
    a scores request carries ``program`` (by default :func:`honest_program`)."""
    (rho_n, delta_n), (rho_s, delta_s) = w.spec.budgets
    rho, delta = (rho_n, delta_n) if release == "statistics" else (rho_s, delta_s)
    params = {"study": STUDY, "round": f"{STUDY}/{release}/0", "rho": rho, "delta": delta,
              "design": feature_map(w).to_spec(), "site": 0, "column_groups": [["a0", "a1", "a2"], ["b0", "b1", "b2"]],
              "parties": ["hospital", "registry"], "n_subjects": w.label.table.n_subjects}
    if release == "scores" and program is not NO_PROGRAM:
        chosen = honest_program(w) if program is None else program
        params["program"] = chosen.to_spec() if isinstance(chosen, ScoreProgram) else chosen
    return Message(STEPS[release][0], params | changes)


def relayed(release: str, sent: Message, reply: Message, arrays: dict | None = None, **changes: Any) -> Message:
    """The evaluator's request: the key owner's request's terms and its reply, relayed (``changes`` applied)."""
    params = dict(sent.params) | {k: reply.params[k] for k in RELAY} | changes
    return Message(STEPS[release][1], params, dict(reply.arrays) if arrays is None else arrays)


def opening(release: str, round_id: str, totals: Message, arrays: dict | None = None, **changes: Any) -> Message:
    """The key owner's opening of ``round_id`` with the evaluator's ``totals`` relayed."""
    params = {"study": STUDY, "round": round_id, "totals_advertisement": totals.params["totals_advertisement"]}
    return Message(STEPS[release][2], params | changes, dict(totals.arrays) if arrays is None else arrays)


def parties(w: World, release: str) -> tuple[Any, Any]:
    """``(key owner, evaluator)`` of ``release``."""
    return (w.label, w.other) if KEY_OWNER[release] == "label" else (w.other, w.label)
