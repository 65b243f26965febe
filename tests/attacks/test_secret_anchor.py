"""Attack (b): a secret anchor with a public law still gives the columns away through A~."""

from __future__ import annotations

import numpy as np
import pytest

from collabcausal.attacks.metrics import null_correlation
from collabcausal.attacks.secret_anchor import fourth_cumulant, secret_anchor_attack
from collabcausal.errors import InputError
from collabcausal.randomness import child_rng

METHODS = ["ica", "moments"]


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("name", ["p11", "p12"])
def test_full_rank_release_is_unmixed_through_the_anchor(lalonde, method, name):
    # Seeded data and attack: fixed numbers (measured 0.96-1.00); the null (rate 1e-4) is ~0.12.
    x_tilde, a_tilde = lalonde.release(name, 4)
    truth = lalonde.truth(name)
    score = secret_anchor_attack(a_tilde, x_tilde, lalonde.public(name), method=method, seed=0, truth=truth).error
    assert np.all(score.correlation > 0.95)
    assert score.correlation.min() > 5 * null_correlation(truth.shape[0], 16)


def test_moment_matching_finds_all_four_columns_from_three_components(lalonde):
    # Overcomplete: 4 uniform anchor columns in 3 dimensions are identified from A~'s fourth cumulants.
    x_tilde, a_tilde = lalonde.release("p11", 3)
    score = secret_anchor_attack(a_tilde, x_tilde, lalonde.public("p11"), seed=0, truth=lalonde.truth("p11")).error
    assert np.all(score.correlation > 0.85)
    assert np.sum(score.relative_rmse < 0.5 * score.mean_baseline_rmse) >= 3


def test_fourth_cumulant_of_independent_uniforms_is_diagonal():
    u = child_rng(0, "test", "uniform").uniform(-np.sqrt(3), np.sqrt(3), (200_000, 2))  # variance 1
    k4 = fourth_cumulant(u - u.mean(axis=0))
    # sd of a sample fourth moment of these values is below 2 / sqrt(n) = 0.0045; 0.05 is > 10 sd.
    assert abs(k4[0, 0, 0, 0] + 1.2) < 0.05 and abs(k4[1, 1, 1, 1] + 1.2) < 0.05
    assert abs(k4[0, 0, 1, 1]) < 0.05 and abs(k4[0, 1, 0, 1]) < 0.05


@pytest.mark.parametrize("method", METHODS)
def test_same_seed_same_reconstruction(lalonde, method):
    x_tilde, a_tilde = lalonde.release("p12", 3)
    public = lalonde.public("p12", marginals=False)
    first = secret_anchor_attack(a_tilde, x_tilde, public, method=method, seed=5).reconstruction
    assert np.array_equal(first, secret_anchor_attack(a_tilde, x_tilde, public, method=method, seed=5).reconstruction)
    lo, hi = public.ranges[:, 0], public.ranges[:, 1]
    assert np.all((first >= lo) & (first <= hi))  # ranges only: placed on the anchor law, clipped


def test_unknown_method_is_refused(lalonde):
    x_tilde, a_tilde = lalonde.release("p12", 3)
    with pytest.raises(InputError, match="unknown secret-anchor method"):
        secret_anchor_attack(a_tilde, x_tilde, lalonde.public("p12"), method="jade")
