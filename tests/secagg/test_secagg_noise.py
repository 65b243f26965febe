"""Distributed discrete Gaussian: the calibration meets its target, includes tau, and is monotone."""

from __future__ import annotations

import math

import numpy as np
import pytest

from collabcausal.errors import InputError
from collabcausal.estimators.dp.mechanisms import discrete_gaussian_sigma
from collabcausal.estimators.dp.zcdp import gaussian_zcdp_sigma, zcdp_rho
from collabcausal.secagg import noise_share, share_sigma, sum_epsilon
from collabcausal.secagg.noise import MIN_SIGMA, sum_rho, tau

DELTA = 1e-6
RHO = zcdp_rho(1.0, DELTA)


@pytest.mark.parametrize(
    ("sens", "eps", "n", "d"), [(100, 1.0, 4, 5), (2**16, 0.5, 3, 20), (7, 4.0, 16, 1000), (1, 30.0, 16, 1000)]
)
def test_the_calibrated_share_meets_the_target_and_is_the_smallest(sens, eps, n, d):
    rho = zcdp_rho(eps, DELTA)
    sigma = share_sigma(sens, rho, n, d)
    assert sum_rho(sens, sigma, n, d) <= rho < sum_rho(sens, sigma * 0.999, n, d)
    assert sum_epsilon(sens, sigma, n, d, DELTA) <= eps * (1 + 1e-9)
    assert sum_epsilon(sens, sigma * 0.999, n, d, DELTA) > eps


def test_one_share_is_the_central_discrete_gaussian():
    """zCDP scales with sensitivity / sigma, so the central sigma for 300 is 300 times that for 1.

    At ``zcdp_rho(1, DELTA)`` it is the discrete Gaussian OpenDP calibrates to (1, DELTA).
    """
    assert share_sigma(1, RHO, 1, 10) == pytest.approx(discrete_gaussian_sigma(1, 1.0, DELTA), rel=1e-6)
    assert share_sigma(300, RHO, 1, 10) == pytest.approx(300 * discrete_gaussian_sigma(1, 1.0, DELTA), rel=1e-6)
    assert share_sigma(300, RHO, 1, 10) == pytest.approx(gaussian_zcdp_sigma(300, RHO), rel=1e-6)


def test_n_shares_each_need_one_over_sqrt_n_of_the_central_sigma():
    central = gaussian_zcdp_sigma(1000, RHO)
    for n in (4, 9, 16):
        assert share_sigma(1000, RHO, n, 10) == pytest.approx(central / math.sqrt(n), rel=1e-6)


def test_calibration_is_monotone():
    base = share_sigma(50, RHO, 4, 10)
    assert share_sigma(50, 2 * RHO, 4, 10) < base < share_sigma(50, RHO / 2, 4, 10)
    assert share_sigma(50, zcdp_rho(2.0, DELTA), 4, 10) < base < share_sigma(50, zcdp_rho(0.5, DELTA), 4, 10)
    assert share_sigma(100, RHO, 4, 10) > base
    assert share_sigma(50, RHO, 8, 10) < base
    assert share_sigma(50, zcdp_rho(1.0, 1e-9), 4, 10) > base


def test_two_releases_sharing_a_budget_in_rho_get_smaller_shares_than_two_epsilon_halves():
    """At (1, 1e-6) in all: a share at half the rho is about 1.4x smaller than one calibrated to (0.5, 5e-7)."""
    halves = share_sigma(1000, zcdp_rho(0.5, 5e-7), 3, 10)
    shared = share_sigma(1000, RHO / 2, 3, 10)
    assert sum_epsilon(1000, shared, 3, 10, DELTA) > 0.5  # each alone costs more than half the epsilon
    assert 1.35 < halves / shared < 1.45


def test_tau_follows_the_paper_and_vanishes_for_one_share():
    assert tau(2.0, 1) == 0.0
    assert tau(0.6, 2) == pytest.approx(10 * math.exp(-(math.pi**2) * 0.36))
    assert tau(0.6, 3) == pytest.approx(10 * (math.exp(-(math.pi**2) * 0.36) + math.exp(-4 * math.pi**2 * 0.36 / 3)))


def test_tau_is_included_where_the_shares_are_small():
    """At a large epsilon the shares are near sigma = 1/2, where tau d is not negligible."""
    sens, eps, n, d = 1, 30.0, 16, 1000
    rho = zcdp_rho(eps, DELTA)
    sigma = share_sigma(sens, rho, n, d)
    rho_without_tau = sens**2 / (2 * n * sigma**2)
    assert sum_rho(sens, sigma, n, d) > 1.5 * rho_without_tau
    sigma_without_tau = sens / math.sqrt(n * 2 * rho)
    assert sigma > 1.1 * max(sigma_without_tau, MIN_SIGMA)
    assert sum_epsilon(sens, sigma, n, d, DELTA) <= eps * (1 + 1e-9)


def test_fewer_honest_shares_give_a_larger_epsilon():
    sigma = share_sigma(100, RHO, 4, 5)
    assert sum_epsilon(100, sigma, 3, 5, DELTA) > 1.0
    assert sum_epsilon(100, sigma, 5, 5, DELTA) < 1.0


def test_seeded_shares_are_reproducible_with_the_calibrated_variance():
    a = noise_share((20_000,), 3.0, rng=np.random.default_rng(8))
    np.testing.assert_array_equal(a, noise_share((20_000,), 3.0, rng=np.random.default_rng(8)))
    assert a.dtype == np.int64
    # sd of a sample variance of 20,000 draws is about 9 * sqrt(2 / 20000) = 0.09: 5 sd margin
    assert abs(a.var() - 9.0) < 0.45
    assert abs(a.mean()) < 5 * 3.0 / math.sqrt(a.size)


def test_opendp_shares_have_the_shape_and_spread():
    share = noise_share((4, 500), 20.0)
    assert share.shape == (4, 500) and share.dtype == np.int64
    # sd of the sample sd of 2000 draws is about 20 / sqrt(4000) = 0.32: 10 sd margin
    assert abs(share.std() - 20.0) < 3.2


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: sum_epsilon(100, 5.0, 4, 5, 0.0), "delta"),
        (lambda: share_sigma(100, 0.0, 4, 5), "rho"),
        (lambda: share_sigma(100, -RHO, 4, 5), "rho"),
        (lambda: share_sigma(100, float("nan"), 4, 5), "rho"),
        (lambda: share_sigma(100, RHO, 0, 5), "positive integer"),
        (lambda: share_sigma(1.5, RHO, 4, 5), "integer L2 sensitivity"),
        (lambda: noise_share(3, 0.1), "share sigma"),
        (lambda: share_sigma(2**55, zcdp_rho(1e-3, DELTA), 4, 5), "cannot be met"),
    ],
    ids=["delta-zero", "rho-zero", "rho-negative", "rho-nan", "no-shares", "float-sensitivity", "sigma-too-small",
         "rho-too-small"],
)
def test_bad_input_gets_a_one_line_error(call, match):
    with pytest.raises(InputError, match=match):
        call()
