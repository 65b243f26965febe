"""DP counts and sums per (cell, arm): Algorithm 1's queries."""

from __future__ import annotations

import numpy as np
import pytest

from collabcausal.errors import InputError
from collabcausal.estimators.dp.aggregates import noisy_aggregates, sum_sensitivity


def test_large_epsilon_recovers_exact_counts_and_sums_per_cell_and_arm():
    cells = np.array([0, 0, 1, 1, 1, 2])
    arms = np.array([0, 1, 0, 1, 1, 0])
    y = np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    out = noisy_aggregates(cells, 3, 1e6, arms=arms, values=y[:, None], bounds=[(0, 10)])
    assert out.counts.tolist() == [[1, 1], [1, 2], [1, 0]]
    assert np.allclose(out.sums[:, :, 0], [[1, 2], [3, 9], [6, 0]], atol=1e-3)


def test_values_are_clipped_and_clip_counts_reported():
    out = noisy_aggregates(np.zeros(4, int), 1, 1e6, values=np.array([[-5.0], [0.5], [3.0], [0.2]]), bounds=[(0, 1)])
    assert out.sums[0, 0, 0] == pytest.approx(0.0 + 0.5 + 1.0 + 0.2, abs=1e-3)
    assert out.n_clipped == (2,)


def test_noise_scales_are_algorithm_1_calibrated_for_substitution():
    # eps/2 each; a substituted record moves between cells: counts L1 2 -> discrete Lap(4/eps),
    # sums L1 2 D_y -> Lap(4 D_y / eps) with D_y = 4 (the paper's add/remove scales, doubled).
    rng = np.random.default_rng(0)
    out = noisy_aggregates(np.zeros(0, int), 20000, 1.0, values=np.zeros((0, 1)), bounds=[(-4, 4)], rng=rng)
    assert np.std(out.counts) == pytest.approx(np.sqrt(2) * 4.0, rel=0.1)
    assert np.std(out.sums) == pytest.approx(np.sqrt(2) * 16.0, rel=0.1)


def test_sum_sensitivity_under_substitution_stays_in_one_cell_or_moves_between_two():
    assert sum_sensitivity([(-4, 4), (0, 2)]) == 10.0  # one cell: sum of widths
    assert sum_sensitivity([(-4, 4), (0, 2)], n_cells=2) == 12.0  # out of one cell, into another
    assert sum_sensitivity([(3, 5)]) == 2.0 and sum_sensitivity([(3, 5)], n_cells=6) == 10.0


def test_one_cell_sums_are_calibrated_to_the_width_of_the_bounds():
    rng = np.random.default_rng(1)
    draws = np.array([
        noisy_aggregates(np.zeros(1, int), 1, 1.0, values=[[4.0]], bounds=[(3, 5)], rng=rng).sums[0, 0, 0]
        for _ in range(4000)
    ])
    assert np.std(draws) == pytest.approx(np.sqrt(2) * 4.0, rel=0.1)  # Lap(2 * 2 / eps), eps/2 on the sums


def test_empty_cells_get_noise_not_an_error():
    out = noisy_aggregates(np.zeros(10, int), 5, 1.0)
    assert out.counts.shape == (5, 1)


def test_summing_two_parties_answers_adds_them_and_checks_shapes():
    a = noisy_aggregates(np.zeros(3, int), 2, 1e6)
    b = noisy_aggregates(np.ones(4, int), 2, 1e6)
    assert (a + b).counts[:, 0].tolist() == [3, 4]
    with pytest.raises(InputError, match="same query"):
        a + noisy_aggregates(np.zeros(3, int), 3, 1e6)


def test_cells_outside_the_partition_are_refused():
    with pytest.raises(InputError, match="cell indices"):
        noisy_aggregates(np.array([0, 5]), 3, 1.0)
