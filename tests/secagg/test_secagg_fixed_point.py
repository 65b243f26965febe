"""Fixed point: exact round trip within 2^-(f+1), sums modulo 2^64, overflow refused, sensitivity bound."""

from __future__ import annotations

import math

import numpy as np
import pytest

from collabcausal.errors import InputError
from collabcausal.secagg import check_headroom, decode, encode, integer_sensitivity


@pytest.mark.parametrize("scale_bits", [0, 8, 16, 30])
def test_round_trip_is_within_half_a_unit_of_the_last_place(scale_bits):
    values = np.random.default_rng(5).normal(0.0, 1000.0, size=(50, 3))
    encoded = encode(values, scale_bits)
    assert encoded.dtype == np.uint64 and encoded.shape == values.shape
    assert np.max(np.abs(decode(encoded, scale_bits) - values)) <= 2.0 ** -(scale_bits + 1)


def test_encoding_is_deterministic_round_half_to_even():
    np.testing.assert_array_equal(decode(encode([0.5, 1.5, -0.5, -2.5], 0), 0), [0.0, 2.0, -0.0, -2.0])


def test_sums_of_signed_encodings_wrap_and_decode_exactly():
    rng = np.random.default_rng(6)
    parts = [rng.uniform(-1e6, 1e6, size=20) for _ in range(8)]
    total = np.zeros(20, dtype=np.uint64)
    for part in parts:
        total += encode(part, 20)
    exact = sum(np.rint(np.ldexp(p, 20)) for p in parts)
    np.testing.assert_array_equal(np.ldexp(decode(total, 20), 20), exact)
    assert np.max(np.abs(decode(total, 20) - sum(parts))) <= 8 * 2.0**-21


def test_an_entry_beyond_the_headroom_is_refused():
    with pytest.raises(InputError, match="lower scale_bits"):
        encode([2.0**50], 12)
    encode([2.0**49], 12)


def test_check_headroom_refuses_a_sum_that_could_reach_2_to_62():
    check_headroom(1e6, 16, 1e6, 30)
    with pytest.raises(InputError, match="lower scale_bits or tighter bounds"):
        check_headroom(1e6, 16, 1e6, 40)
    check_headroom(2.0**60 - 1024, 4, 0.0, 0)
    with pytest.raises(InputError, match="could reach"):
        check_headroom(2.0**60, 4, 0.0, 0)
    with pytest.raises(InputError, match="non-negative"):
        check_headroom(-1.0, 4, 0.0, 10)


def test_integer_sensitivity_bounds_encoded_neighbours_at_the_rounding_worst_case():
    """Neighbours x, x' with ||x - x'||_2 = Delta, each entry on opposite sides of a rounding edge."""
    d, f, delta = 9, 4, 0.3
    sens = integer_sensitivity(delta, d, f)
    assert sens == math.ceil(delta * 2**f + 3)
    step = delta / math.sqrt(d)
    x = np.full(d, (0.5 - 1e-9) / 2**f)
    worst = np.linalg.norm(decode(encode(x + step, f), 0).astype(float) - decode(encode(x, f), 0))
    assert worst > delta * 2**f
    rng = np.random.default_rng(7)
    for _ in range(200):
        a = rng.uniform(-4, 4, size=d)
        u = rng.normal(size=d)
        b = a + delta * u / np.linalg.norm(u)
        gap = np.linalg.norm(np.rint(np.ldexp(b, f)) - np.rint(np.ldexp(a, f)))
        assert gap <= sens
    assert worst <= sens


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: encode([np.nan], 8), "NaN"),
        (lambda: encode([1.0], 60), "scale_bits"),
        (lambda: encode([1.0], 2.5), "scale_bits"),
        (lambda: decode(np.array([1], dtype=np.int64), 8), "uint64"),
        (lambda: integer_sensitivity(0.0, 3, 8), "sensitivity"),
    ],
    ids=["nan", "scale-too-large", "scale-not-integer", "decode-dtype", "zero-sensitivity"],
)
def test_bad_input_gets_a_one_line_error(call, match):
    with pytest.raises(InputError, match=match):
        call()
