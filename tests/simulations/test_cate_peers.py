"""The private CATE peers of the effect-modification benchmark (collabcausal/simulations/cate_peers.py)."""

from __future__ import annotations

import numpy as np

from collabcausal.simulations.cate_benchmark import simulate_cate_sites
from collabcausal.simulations.cate_peers import PEERS, kernel_sites, run_peers


def test_the_kernel_rows_are_each_sites_first_subjects_at_their_stacked_positions():
    sites = simulate_cate_sites(300, "binary", np.random.default_rng(1))
    cut, rows = kernel_sites(sites, 40)
    stacked = np.vstack([s.X for s in sites])
    np.testing.assert_array_equal(np.vstack([s.X for s in cut]), stacked[rows])
    assert [len(s.T) for s in cut] == [40] * 4 and len(rows) == 160


def test_every_peer_answers_a_finite_effect_at_its_evaluation_rows():
    sites = simulate_cate_sites(300, "continuous", np.random.default_rng(2))
    peers = run_peers(sites, "continuous", 8.0, seed=0, per_site=60)
    assert [p.name for p in peers] == list(PEERS)
    assert [len(p.rows) for p in peers] == [1200, 240, 240]
    for p in peers:
        assert p.tau_hat.shape == p.rows.shape and np.isfinite(p.tau_hat).all()
