"""A label holder and a second party holding other covariates of the same subjects, as the party tests use them.

Six covariates (three each), logistic propensity and a binary outcome; every party has a ledger holding
``epsilon`` and a pinned simulation identity (:func:`~collabcausal.secagg.simulation_identities`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from collabcausal.analyst.dp_effects_spec import DPEffectsSpec
from collabcausal.errors import IdentityError, InputError, PolicyError, ProtocolError
from collabcausal.ledger import PrivacyLedger
from collabcausal.messages import Message
from collabcausal.party import Party, PartyTable
from collabcausal.party.secagg import attach_identities
from collabcausal.secagg import simulation_identities

NAMES = ("a0", "a1", "a2", "b0", "b1", "b2")
BOUNDS = ((-3.0, 3.0),) * 5 + ((0.0, 1.0),)
STUDY = "vertical-test"


@dataclass
class World:
    """The two parties, the data they split and the study spec."""

    label: Party
    other: Party
    X: np.ndarray
    T: np.ndarray
    Y: np.ndarray
    spec: DPEffectsSpec


def subjects(n: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Covariates (five standard normal clipped to [-3, 3], one binary), T and a binary Y (true ATE about 0.1)."""
    rng = np.random.default_rng(seed)
    X = np.column_stack([np.clip(rng.standard_normal((n, 5)), -3, 3), rng.integers(0, 2, n)])
    T = (rng.random(n) < 1 / (1 + np.exp(-(X @ np.array([0.5, -0.4, 0.3, 0.4, -0.3, 0.5]))))).astype(np.int8)
    Y = (rng.random(n) < 1 / (1 + np.exp(-(X @ np.array([0.3, 0.2, -0.2, 0.3, 0.1, 0.2]) + 0.5 * T)))).astype(float)
    return X, T, Y


def world(folder: Path, *, n: int = 1500, seed: int = 0, epsilon: float = 1.0, replicates: int = 2) -> World:
    """Two parties in ``folder`` (their ledgers), pinned to each other."""
    return grid_world(folder, row_groups=1, n=n, seed=seed, epsilon=epsilon, replicates=replicates)[0]


def grid_world(folder: Path, *, row_groups: int, n: int = 1500, seed: int = 0, epsilon: float = 1.0,
               replicates: int = 2) -> list[World]:
    """``row_groups`` row groups of a label holder and a second party (``hospital``/``registry``, suffixed ``-i``
    beyond one row group), every party pinned to every other."""
    worlds = []
    for i in range(row_groups):
        X, T, Y = subjects(n, seed + i)
        suffix = f"-{i}" if row_groups > 1 else ""
        label = Party(f"hospital{suffix}", PartyTable.from_arrays(X[:, :3], NAMES[:3],
                                                                  treatment=("t", T.astype(float)), outcome=("y", Y)))
        other = Party(f"registry{suffix}", PartyTable.from_arrays(X[:, 3:], NAMES[3:]))
        for party in (label, other):
            party.ledger = PrivacyLedger(folder / f"{party.name}.sqlite", epsilon=epsilon, delta=1e-6,
                                         dataset=party.name)
        spec = DPEffectsSpec(epsilon, 1e-6, (0.0, 1.0), 0.1, NAMES, BOUNDS, secure_aggregation=row_groups > 1,
                             nuisance_replicates=replicates, nuisance_share=0.65, ridge_scale=0.25)
        worlds.append(World(label, other, X, T, Y, spec))
    parties = [p for w in worlds for p in (w.label, w.other)]
    attach_identities(parties, simulation_identities(STUDY, [p.name for p in parties]))
    return worlds


def three_parties(folder: Path, *, n: int = 1500, seed: int = 0, epsilon: float = 1.0, replicates: int = 2
                  ) -> tuple[list[Party], np.ndarray, np.ndarray, np.ndarray, DPEffectsSpec]:
    """One row group split three ways: ``hospital`` (a0, a1, T, Y), ``registry`` (a2, b0) and ``insurer`` (b1, b2),
    each with a ledger holding ``epsilon``, pinned to each other; the subjects and the study spec."""
    X, T, Y = subjects(n, seed)
    split = ((0, 1), (2, 3), (4, 5))
    tables = [PartyTable.from_arrays(X[:, list(split[0])], [NAMES[i] for i in split[0]],
                                     treatment=("t", T.astype(float)), outcome=("y", Y)),
              *(PartyTable.from_arrays(X[:, list(g)], [NAMES[i] for i in g]) for g in split[1:])]
    parties = [Party(name, table) for name, table in zip(("hospital", "registry", "insurer"), tables, strict=True)]
    for party in parties:
        party.ledger = PrivacyLedger(folder / f"{party.name}.sqlite", epsilon=epsilon, delta=1e-6, dataset=party.name)
    attach_identities(parties, simulation_identities(STUDY, [p.name for p in parties]))
    spec = DPEffectsSpec(epsilon, 1e-6, (0.0, 1.0), 0.1, NAMES, BOUNDS, secure_aggregation=False,
                         nuisance_replicates=replicates, nuisance_share=0.65, ridge_scale=0.25)
    return parties, X, T, Y, spec


ONE_LINE = (InputError, PolicyError, ProtocolError, IdentityError)
"""The project's one-line refusals."""


def refused_uncharged(party: Party, message: Message, error: Any = ONE_LINE, match: str | None = None) -> None:
    """``party`` refuses ``message`` with a one-line error of the project's hierarchy, its ledger untouched."""
    before = spent(party)
    with pytest.raises(error, match=match) as caught:
        party.handle(message)
    assert type(caught.value) in ONE_LINE and "\n" not in str(caught.value)
    assert spent(party) == before


def spent(party: Party) -> float:
    """The epsilon the party's ledger has charged."""
    return float(party.ledger.spent()[0])
