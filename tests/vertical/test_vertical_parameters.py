"""CKKS presets: within the 128-bit security table, a level for the mask, the headroom they state."""

from __future__ import annotations

import pytest

from collabcausal.errors import InputError
from collabcausal.vertical import PRESETS, CKKSParameters, preset
from collabcausal.vertical.parameters import HE_STANDARD_128_BITS


@pytest.mark.parametrize("depth", sorted(PRESETS))
def test_every_preset_is_128_bit_secure_and_has_its_depth_plus_the_mask(depth):
    p = PRESETS[depth]
    assert p.depth == depth
    assert p.total_bits <= HE_STANDARD_128_BITS[p.poly_modulus_degree]
    assert len(p.coeff_mod_bit_sizes) == depth + 3  # q_0, depth + 1 rescaling primes, special prime
    assert p.max_value == 2.0 ** (p.coeff_mod_bit_sizes[0] - p.scale_bits - 2)


def test_preset_picks_the_smallest_deep_enough():
    assert preset(1) is PRESETS[1]
    assert preset(2) is PRESETS[2] and preset(3) is PRESETS[7] and preset(7) is PRESETS[7]
    with pytest.raises(InputError, match="no preset has depth 8"):
        preset(8)
    with pytest.raises(InputError, match="positive integer"):
        preset(0)


@pytest.mark.parametrize(
    ("n", "bits", "scale", "match"),
    [
        (16384, (60, *(40,) * 8, 60), 40, "exceed the 438 of 128-bit security"),
        (8192, (60, 40, 38, 60), 40, "is not q_0"),
        (8192, (42, 40, 40, 60), 40, "is not q_0"),
        (8192, (60, 40, 40, 50), 40, "special prime"),
        (12000, (60, 40, 40, 60), 40, "ring degree 12000"),
    ],
)
def test_unsafe_or_malformed_parameters_are_refused_in_one_line(n, bits, scale, match):
    with pytest.raises(InputError, match=match) as info:
        CKKSParameters(n, bits, scale, error_bound=1e-6)
    assert "\n" not in str(info.value) and "fix:" in str(info.value)


@pytest.mark.parametrize("base", [1, 3, 6, 0, 2.0])
def test_a_rotation_base_other_than_a_power_of_two_is_refused(base):
    with pytest.raises(InputError, match="rotation_base must be a power of 2") as info:
        CKKSParameters(8192, (60, 38, 38, 60), 38, error_bound=1e-5, rotation_base=base)
    assert "\n" not in str(info.value)
