"""A returned total: slot 0 holds the sum plus the evaluator's noise; every other slot part is flooding.

The key owner may decrypt all slots of what comes back (``decrypt_slots``, a curious key owner's
view); these tests pin down that it sees nothing but the noisy sum and the flooding noise.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from scipy import stats
from vertical_helpers import decrypt_slots, relay

from collabcausal.errors import InputError
from collabcausal.vertical.column import FLOOD_TAIL
from collabcausal.vertical.parameters import preset
from collabcausal.vertical.total import flooding_noise, rotation_steps

N = 6000
FLOOD = 1.0


@pytest.fixture(scope="module")
def twins(owner1, evaluator1):
    """Two worlds with the same sum of x * z and different per-subject values (z is the evaluator's)."""
    rng = np.random.default_rng(3603)
    x, z = rng.uniform(-1, 1, N), rng.uniform(-1, 1, N)
    order = rng.permutation(N)  # the other world: the same products, on other subjects
    return relay(owner1, evaluator1, x), z, relay(owner1, evaluator1, x[order]), z[order], x * z


def test_slot_zero_holds_the_sum_plus_the_noise(owner1, twins):
    column, z, _, _, products = twins
    exact = float(np.sum(products))
    slots = decrypt_slots(owner1, (column * z).total(noise=2.5, flood_sd=FLOOD, rng=np.random.default_rng(1)))
    assert abs(slots[0].real - (exact + 2.5)) <= N * owner1.parameters.error_bound


def test_other_slots_carry_only_flooding_noise_whatever_the_per_subject_values(owner1, twins):
    """Same flooding draws in both worlds: all slots but slot 0's real part agree to the CKKS error."""
    column, z, other, z_other, products = twins
    a = decrypt_slots(owner1, (column * z).total(noise=1.0, flood_sd=FLOOD, rng=np.random.default_rng(7)))
    b = decrypt_slots(owner1, (other * z_other).total(noise=1.0, flood_sd=FLOOD, rng=np.random.default_rng(7)))
    rest_a = np.concatenate([[a[0].imag], a[1:].real, a[1:].imag])
    rest_b = np.concatenate([[b[0].imag], b[1:].real, b[1:].imag])
    assert np.max(np.abs(rest_a - rest_b)) <= 1e-3 * FLOOD
    assert abs(a[0].real - b[0].real) <= 2 * N * owner1.parameters.error_bound  # the same sum
    # and they are the N(0, FLOOD^2) flooding draws: uncorrelated with the inputs, not the sum
    assert stats.kstest(rest_a / FLOOD, "norm").pvalue > 1e-4
    slots = a.size
    assert abs(np.corrcoef(a[1:].real, products[1:slots])[0, 1]) < 0.08  # 5 sd of a null correlation


def test_without_flooding_the_other_slots_would_show_computation_error_only(owner1, twins):
    """Masking alone: the unflooded slots are CKKS error, far below the flood (its ratio is in the docs)."""
    column, z, _, _, _ = twins
    tiny = decrypt_slots(owner1, (column * z).total(noise=1.0, flood_sd=1e-30, rng=np.random.default_rng(2)))
    assert np.max(np.abs(tiny[1:])) < 1e-4 * FLOOD


def test_two_totals_of_the_same_values_and_draws_are_different_ciphertexts(twins):
    """The fresh public-key encryption re-randomizes the ciphertext (its second component)."""
    column, z, _, _, _ = twins
    first = (column * z).total(noise=1.0, flood_sd=FLOOD, rng=np.random.default_rng(3))
    second = (column * z).total(noise=1.0, flood_sd=FLOOD, rng=np.random.default_rng(3))
    assert first != second


def test_the_padding_is_subtracted_from_the_sum(owner1, evaluator1):
    """A polynomial with c_0 != 0 turns the padding slots into c_0: the total must not count them."""
    rng = np.random.default_rng(3604)
    x = rng.uniform(-1, 1, 100)
    c = [0.5, -0.25]  # degree 1: the depth-1 preset's one level
    column = relay(owner1, evaluator1, x).polyval(c) + 0.75
    expected = float(np.sum(np.polynomial.polynomial.polyval(x, c) + 0.75))
    opened = owner1.open(column.total(noise=1.0, flood_sd=FLOOD, rng=rng), noise=1e-9, grid=1e-5)
    assert abs(opened - 1.0 - expected) <= 100 * owner1.parameters.error_bound + 1e-5


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"noise": 0.0, "flood_sd": 1.0}, "nonzero noise share"),
        ({"noise": float("nan"), "flood_sd": 1.0}, "nonzero noise share"),
        ({"noise": 1.0, "flood_sd": 0.0}, "flood_sd must be positive"),
        ({"noise": 1.0, "flood_sd": 2.0**20 / FLOOD_TAIL * 2}, "headroom"),
        ({"noise": 2.0**20, "flood_sd": 1.0}, "headroom"),
    ],
)
def test_total_refusals_are_one_line(twins, kwargs, match):
    column, z, _, _, _ = twins
    with pytest.raises(InputError, match=match) as info:
        (column * z).total(**kwargs)
    assert "\n" not in str(info.value)


def test_a_total_that_may_overflow_or_lacks_its_mask_level_is_refused(owner1, twins):
    column, z, _, _, _ = twins
    with pytest.raises(InputError, match="may exceed the preset's headroom"):
        (column * 200.0).total(noise=1.0, flood_sd=1.0)  # 2 chunks x 4096 slots x 200 > 2^20
    with pytest.raises(InputError, match="none is left for the total's mask"):
        (column * z * 0.5).total(noise=1.0, flood_sd=1.0)


def test_flooding_noise_is_gaussian_fresh_and_of_the_asked_count():
    """OS-entropy draws: the KS test fails by chance with probability 1e-6 per run."""
    first, second = flooding_noise(16383, 3.0), flooding_noise(16383, 3.0)
    assert first.shape == (16383,) and not np.array_equal(first, second)
    assert stats.kstest(first / 3.0, "norm").pvalue > 1e-6
    assert abs(np.corrcoef(first, second)[0, 1]) < 5 / np.sqrt(16383)  # 5 sd of a null correlation
    assert flooding_noise(1, 1.0).shape == (1,)


def test_rotation_keys_cover_a_sum_over_all_slots():
    assert rotation_steps(preset(7)) == [1, 8, 64, 512, 4096]  # 8192 slots, base 8
    assert rotation_steps(preset(1)) == [2**k for k in range(12)]  # 4096 slots, base 2
    assert rotation_steps(replace(preset(1), rotation_base=8)) == [1, 8, 64, 512]
