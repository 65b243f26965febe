"""The m~ / m^ sensitivity table."""

from __future__ import annotations

from collabcausal.simulations.datasets import load_lalonde
from collabcausal.simulations.dcqe_sensitivity import sensitivity_table


def test_sensitivity_covers_valid_pairs_and_full_rank_matches_centralized_direction() -> None:
    rows = sensitivity_table(load_lalonde(), [1, 4], [2, 8], n_boot=3)
    pairs = {(r["party_components"], r["n_components"]) for r in rows}
    assert pairs == {(1, 2), (4, 2), (4, 8)}  # m^ = 8 needs m~ = 4 on a 2x2 grid
    full = [r for r in rows if (r["party_components"], r["n_components"]) == (4, 8)]
    assert all(r["estimate"] > 0 for r in full)  # full rank W-clb recovers CA's positive ATT
