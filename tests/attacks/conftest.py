"""LaLonde 2x2 parties and their plain DC-QE releases, through Party.handle (what the analyst receives)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pytest

from collabcausal.anchor_key import simulation_anchor_key
from collabcausal.attacks.calibration import PublicInfo
from collabcausal.messages import Message
from collabcausal.party.anchor import anchor_columns
from collabcausal.simulations.datasets import load_lalonde
from collabcausal.simulations.partition import build_parties, partition_grid

SEED = 0
STUDY = "lalonde-2x2"


class LaLonde2x2:
    """The example's grid (seed 0), public ranges, and a helper to request a party's representation."""

    def __init__(self) -> None:
        self.data = load_lalonde()
        part = partition_grid(self.data, 2, seed=SEED)
        self.parties = {p.name: p for p in build_parties(self.data, part, anchor_key=simulation_anchor_key(SEED))}
        self.ranges = {k: [float(a), float(b)] for k, (a, b) in self.data.covariate_ranges().items()}

    def columns(self, name: str) -> list[str]:
        return list(self.parties[name].table.covariate_names)

    def truth(self, name: str) -> np.ndarray:
        return self.parties[name].table.covariates

    def public(self, name: str, marginals: bool = True) -> PublicInfo:
        """Public ranges and (worst case for the party) its columns' exact marginals."""
        bounds = [self.ranges[c] for c in self.columns(name)]
        return PublicInfo.from_sample(self.truth(name), bounds) if marginals else PublicInfo.from_ranges(bounds)

    def release(self, name: str, n_components: int, rows: np.ndarray | None = None, n_anchors: int = 2675):
        """(x_tilde, a_tilde) of a dc_representation reply."""
        params = {"study": STUDY, "n_anchors": n_anchors, "anchor_ranges": self.ranges, "n_components": n_components}
        arrays = {} if rows is None else {"rows": np.asarray(rows, dtype=np.int64)}
        reply = self.parties[name].handle(Message("dc_representation", params, arrays))
        return reply.arrays["x_tilde"], reply.arrays["a_tilde"]

    def anchor(self, name: str, n_anchors: int = 2675) -> np.ndarray:
        """The party's anchor columns: what a key holder (a colluding party) computes."""
        return anchor_columns(simulation_anchor_key(SEED), STUDY, self.columns(name), self.ranges, n_anchors)


@pytest.fixture(scope="session")
def lalonde() -> LaLonde2x2:
    return LaLonde2x2()


@pytest.fixture
def ledger_dir(tmp_path):
    """A folder for the audits' many ledgers: in /dev/shm where it is writable (SQLite there is much faster)."""
    shm = Path("/dev/shm")
    if not (shm.is_dir() and shm.stat().st_mode & 0o002):
        yield tmp_path
        return
    with tempfile.TemporaryDirectory(dir=shm) as fast:
        yield Path(fast)
