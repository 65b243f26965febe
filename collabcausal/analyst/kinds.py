"""The registry of study kinds: ``[study] kind`` of study.toml, ``collabcausal simulate KIND``.

One module per kind under analyst/, each with one entry point ``run(grid, config, plan, *,
progress=False) -> dict``: it takes the grid, the validated :class:`~collabcausal.analyst.config.StudyConfig`
and its :class:`~collabcausal.analyst.dcqe.DCQEPlan` (the joined parties), and returns the kind's
part of the report (``estimates``, ``privacy``: the (epsilon, delta) each party was charged for the
study, as requested, ``warnings``, plus what the kind adds). ``collabcausal analyst serve`` (the
gRPC grid of the joined parties) and ``collabcausal simulate`` (an in-process or local gRPC grid)
both go through :func:`collabcausal.commands.analyst.run_study`, which only looks the kind up here
(:func:`kind_runner`): a new kind is one new module and one line of :data:`KIND_MODULES`, as a new
party operation is one registered function (:mod:`collabcausal.party.operations`). Every release
from a party's rows is a request the party's :meth:`~collabcausal.party.node.Party.handle`
authorizes and charges to its ledger before computing.

What is differentially private, exactly (neighbouring relation: substitute one record, n public),
is stated in each kind's module: :mod:`~collabcausal.analyst.kind_dcqe` (DC-QE: not DP; DP
representations; DP balance moments), :mod:`~collabcausal.analyst.kind_adum`,
:mod:`~collabcausal.analyst.kind_cate`, :mod:`~collabcausal.analyst.kind_discovery`,
:mod:`~collabcausal.analyst.kind_dp_effects`.

This module imports nothing of the project at load time (``simulate --help`` stays fast).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

KIND_MODULES = {
    "dcqe": "collabcausal.analyst.kind_dcqe",
    "adum": "collabcausal.analyst.kind_adum",
    "cate": "collabcausal.analyst.kind_cate",
    "discovery": "collabcausal.analyst.kind_discovery",
    "dp_effects": "collabcausal.analyst.kind_dp_effects",
}
"""Kind name -> the module whose ``run`` runs it."""

KINDS = tuple(KIND_MODULES)
"""The study kinds, in the order ``--help`` and the docs list them."""


def kind_runner(kind: str) -> Callable[..., dict[str, Any]]:
    """The entry point ``run(grid, config, plan, *, progress=False)`` of study kind ``kind``.

    ``kind`` comes from a validated study.toml (:class:`~collabcausal.analyst.config.StudyFile`
    refuses an unknown one with a one-line error), so an unknown name here is a programming error.
    """
    return importlib.import_module(KIND_MODULES[kind]).run
