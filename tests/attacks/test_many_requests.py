"""Attack (d): resampled requests each below full rank add up to a full-rank view of every subject."""

from __future__ import annotations

import numpy as np
import pytest

from collabcausal.attacks.many_requests import ica_on_requests, stack_requests
from collabcausal.attacks.metrics import null_correlation
from collabcausal.errors import InputError
from collabcausal.randomness import child_rng


def _resampled_rows(n: int, k: int) -> np.ndarray:
    """All subjects plus a resampled half: a 'bootstrap resample' every party accepts, covering everyone."""
    return np.concatenate([np.arange(n), child_rng(0, "test", "rows", k).choice(n, n // 2)])


def test_two_resampled_requests_at_m2_reach_what_one_request_at_m2_hides(lalonde):
    truth = lalonde.truth("p11")
    n = truth.shape[0]
    public = lalonde.public("p11")
    null = null_correlation(n, 16)
    one = ica_on_requests([(None, lalonde.release("p11", 2)[0])], public, seed=0, truth=truth).error
    releases = [(rows, lalonde.release("p11", 2, rows)[0]) for rows in (_resampled_rows(n, 0), _resampled_rows(n, 1))]
    two = ica_on_requests(releases, public, seed=0, truth=truth).error
    assert np.sum(one.correlation > null) == 2  # m~ = 2: two sources, two columns
    assert np.all(two.correlation > null) and np.sum(two.correlation > 0.9) >= 3  # measured 0.81-0.99


def test_requests_differing_only_in_m_tilde_add_nothing(lalonde):
    # Nested principal axes: the m~ = 1 and m~ = 2 releases span the m~ = 2 one.
    truth = lalonde.truth("p11")
    public = lalonde.public("p11")
    both = [(None, lalonde.release("p11", 1)[0]), (None, lalonde.release("p11", 2)[0])]
    combined = ica_on_requests(both, public, seed=0, truth=truth)
    single = ica_on_requests(both[1:], public, seed=0, truth=truth)
    np.testing.assert_allclose(combined.error.correlation, single.error.correlation, atol=1e-6)


def test_stack_uses_each_subjects_first_row_and_marks_the_missing():
    x = np.arange(8.0).reshape(4, 2)
    stacked, covered = stack_requests([(np.array([2, 0, 2, 1]), x), (None, x[:3])], 3)
    np.testing.assert_array_equal(stacked[:, :2], [[2, 3], [6, 7], [0, 1]])
    assert covered.all()
    _, covered = stack_requests([(np.array([0, 0]), x[:2]), (None, x[:3])], 3)
    np.testing.assert_array_equal(covered, [True, False, False])
    with pytest.raises(InputError, match="rows for"):
        stack_requests([(np.array([0, 1]), x)], 3)


def test_same_seed_same_reconstruction(lalonde):
    n = lalonde.truth("p12").shape[0]
    releases = [(rows, lalonde.release("p12", 1, rows)[0]) for rows in (_resampled_rows(n, 0), _resampled_rows(n, 1))]
    public = lalonde.public("p12")
    first = ica_on_requests(releases, public, seed=2).reconstruction
    assert np.array_equal(first, ica_on_requests(releases, public, seed=2).reconstruction)
