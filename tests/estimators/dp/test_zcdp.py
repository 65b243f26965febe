"""zCDP: OpenDP's conversion and its inverse, the Gaussian's sigma, and the gain of composing in rho.

Deterministic (no noise is drawn).
"""

from __future__ import annotations

import math

import pytest

from collabcausal.errors import InputError
from collabcausal.estimators.dp.mechanisms import analytic_gaussian_sigma
from collabcausal.estimators.dp.zcdp import check_rho, gaussian_zcdp_sigma, zcdp_epsilon, zcdp_rho

TARGETS = [(0.1, 1e-6), (0.5, 1e-6), (1.0, 1e-6), (1.0, 1e-9), (2.0, 1e-5), (8.0, 1e-7), (30.0, 1e-6), (1e4, 1e-6)]


@pytest.mark.parametrize(("epsilon", "delta"), TARGETS)
def test_the_largest_rho_converts_back_to_at_most_its_epsilon_and_no_less_than_a_millionth_below(epsilon, delta):
    converted = zcdp_epsilon(zcdp_rho(epsilon, delta), delta)
    assert converted <= epsilon
    assert converted == pytest.approx(epsilon, rel=1e-6)


@pytest.mark.parametrize(("epsilon", "delta"), [(0.5, 1e-6), (1.0, 1e-9), (30.0, 1e-6)])
def test_the_conversion_lies_between_the_exact_gaussian_and_the_classic_bound(epsilon, delta):
    """rho-zCDP holds for the Gaussian of sd 1/sqrt(2 rho) at sensitivity 1, so its exact (Balle & Wang)
    epsilon is a floor; Bun & Steinke (2016, Proposition 1.3), rho + 2 sqrt(rho ln(1/delta)), a ceiling."""
    rho = zcdp_rho(epsilon, delta)
    converted = zcdp_epsilon(rho, delta)
    assert analytic_gaussian_sigma(1.0, converted, delta) <= gaussian_zcdp_sigma(1.0, rho)
    assert converted < rho + 2.0 * math.sqrt(rho * math.log(1.0 / delta))


def test_rho_grows_with_epsilon_and_with_delta():
    by_epsilon = [zcdp_rho(e, 1e-6) for e in (0.25, 0.5, 1.0, 2.0, 4.0)]
    by_delta = [zcdp_rho(1.0, d) for d in (1e-10, 1e-8, 1e-6, 1e-4)]
    assert by_epsilon == sorted(set(by_epsilon)) and by_delta == sorted(set(by_delta))  # strictly increasing


def test_the_conversion_grows_with_rho_and_falls_with_delta():
    assert zcdp_epsilon(0.01, 1e-6) < zcdp_epsilon(0.02, 1e-6) < zcdp_epsilon(0.04, 1e-6)
    assert zcdp_epsilon(0.02, 1e-4) < zcdp_epsilon(0.02, 1e-6) < zcdp_epsilon(0.02, 1e-8)


@pytest.mark.parametrize(("sensitivity", "rho"), [(1.0, 0.5), (2.5, 0.01), (1e3, 1e-4), (1e-3, 8.0)])
def test_the_gaussian_sigma_is_sensitivity_over_sqrt_two_rho(sensitivity, rho):
    sigma = gaussian_zcdp_sigma(sensitivity, rho)
    assert sigma == pytest.approx(sensitivity / math.sqrt(2.0 * rho), rel=1e-15)
    assert sensitivity**2 / (2.0 * sigma**2) == pytest.approx(rho, rel=1e-12)  # Bun & Steinke, Proposition 1.6


def test_two_releases_sharing_a_budget_in_rho_get_less_noise_than_two_epsilon_halves():
    """At (1, 1e-6) in all: each release at rho/2 has sd 1.30x smaller than an analytic Gaussian at (0.5, 5e-7)."""
    rho = zcdp_rho(1.0, 1e-6)
    assert zcdp_epsilon(rho / 2 + rho / 2, 1e-6) <= 1.0  # the two releases together keep the budget
    ratio = analytic_gaussian_sigma(3.0, 0.5, 5e-7) / gaussian_zcdp_sigma(3.0, rho / 2)
    assert 1.25 < ratio < 1.35


@pytest.mark.parametrize("bad", [0.0, -0.1, float("nan"), float("inf"), True, "a lot", None])
def test_a_bad_rho_is_a_one_line_input_error(bad):
    for call in (lambda: check_rho(bad), lambda: zcdp_epsilon(bad, 1e-6), lambda: gaussian_zcdp_sigma(1.0, bad)):
        with pytest.raises(InputError, match="rho") as refused:
            call()
        assert "\n" not in str(refused.value)


@pytest.mark.parametrize(
    "call",
    [lambda: zcdp_epsilon(0.1, 0.0), lambda: zcdp_rho(1.0, 0.0), lambda: zcdp_epsilon(0.1, 1.0),
     lambda: zcdp_rho(1.0, -1e-6)],
    ids=["conversion-at-delta-0", "budget-with-delta-0", "delta-1", "negative-delta"],
)
def test_a_delta_outside_zero_one_is_a_one_line_input_error(call):
    with pytest.raises(InputError, match="delta") as refused:
        call()
    assert "\n" not in str(refused.value)


@pytest.mark.parametrize(
    "call",
    [lambda: zcdp_rho(0.0, 1e-6), lambda: zcdp_rho(float("nan"), 1e-6), lambda: gaussian_zcdp_sigma(0.0, 0.1),
     lambda: gaussian_zcdp_sigma(float("inf"), 0.1)],
    ids=["epsilon-0", "epsilon-nan", "sensitivity-0", "sensitivity-inf"],
)
def test_a_bad_epsilon_or_sensitivity_is_a_one_line_input_error(call):
    with pytest.raises(InputError) as refused:
        call()
    assert "\n" not in str(refused.value)

