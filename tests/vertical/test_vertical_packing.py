"""Packed totals: value 2j in slot j's real part, 2j + 1 in its imaginary part, each its sum plus its share; every
other slot part flooding only, whatever the per-subject values."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats
from vertical_helpers import decrypt_slots, relay

from collabcausal.errors import InputError
from collabcausal.vertical.column import totals
from collabcausal.vertical.packing import VALUES_PER_SLOT, pack_totals, packed_count

N = 5000
FLOOD = 1.0


@pytest.fixture(scope="module")
def worlds(owner1, evaluator1):
    """Three products x_k * z_k, and another world with the same sums on permuted subjects."""
    rng = np.random.default_rng(3639)
    xs, zs = rng.uniform(-1, 1, (3, N)), rng.uniform(-1, 1, (3, N))
    order = rng.permutation(N)
    first = [relay(owner1, evaluator1, x) * z for x, z in zip(xs, zs, strict=True)]
    second = [relay(owner1, evaluator1, x[order]) * z[order] for x, z in zip(xs, zs, strict=True)]
    return first, second, (xs * zs).sum(axis=1)


def test_each_value_is_its_sum_plus_its_share_in_the_packed_order(owner1, worlds):
    first, _, exact = worlds
    shares = np.array([2.5, -1.5, 4.0])
    packed = totals(first, shares, flood_sd=FLOOD, rng=np.random.default_rng(1))
    assert len(packed) == 1
    slots = decrypt_slots(owner1, packed[0])
    values = np.array([slots[0].real, slots[0].imag, slots[1].real])
    assert np.max(np.abs(values - (exact + shares))) <= N * owner1.parameters.error_bound
    opened = owner1.open(packed[0], noise=[0.5, 0.5, 0.5], grid=1e-3)
    assert np.max(np.abs(opened - (exact + shares + 0.5))) <= N * owner1.parameters.error_bound + 1e-3


def test_every_other_slot_part_is_flooding_only_whatever_the_per_subject_values(owner1, worlds):
    """Same flooding draws in both worlds: every part but the three values agrees to the CKKS error, and is the
    N(0, FLOOD^2) draws (KS), none near a sum."""
    first, second, _ = worlds
    shares = np.array([1.0, 1.0, 1.0])
    a = decrypt_slots(owner1, totals(first, shares, flood_sd=FLOOD, rng=np.random.default_rng(7))[0])
    b = decrypt_slots(owner1, totals(second, shares, flood_sd=FLOOD, rng=np.random.default_rng(7))[0])
    flat_a = np.column_stack([a.real, a.imag]).ravel()
    flat_b = np.column_stack([b.real, b.imag]).ravel()
    assert np.max(np.abs(flat_a[3:] - flat_b[3:])) <= 1e-3 * FLOOD
    assert np.max(np.abs(flat_a[:3] - flat_b[:3])) <= 2 * N * owner1.parameters.error_bound
    assert stats.kstest(flat_a[3:] / FLOOD, "norm").pvalue > 1e-4
    assert np.max(np.abs(flat_a[3:])) < 10 * FLOOD  # no sum (magnitude ~ 30) leaks into another part


def test_packed_counts():
    assert VALUES_PER_SLOT == 2
    assert [packed_count(k, 4096) for k in (1, 350, 8192, 8193)] == [1, 1, 1, 2]


def test_refusals_are_one_line_before_anything_is_computed(worlds, evaluator1):
    first, _, _ = worlds
    summands = [c._chunks[0].ciphertext()[0] for c in first[:2]]
    cases = [
        ({"noise": np.ones(3)}, "3 noise shares and 2 bounds for 2 summands"),
        ({"noise": np.array([1.0, 0.0])}, "nonzero noise share"),
        ({"noise": np.array([1.0, np.nan])}, "nonzero noise share"),
        ({"flood_sd": 0.0}, "flood_sd must be positive"),
        ({"bounds": [2.0**21, 1.0]}, "headroom"),
        ({"corrections": np.ones(3)}, "one correction per noise share"),
    ]
    for change, match in cases:
        kwargs = {"bounds": [1.0, 1.0], "noise": np.ones(2), "flood_sd": 1.0} | change
        with pytest.raises(InputError, match=match) as info:
            pack_totals(evaluator1, summands, complex_summands=False, **kwargs)
        assert "\n" not in str(info.value)
    with pytest.raises(InputError, match="for 0 summands"):
        pack_totals(evaluator1, [], [], np.ones(1), 1.0, complex_summands=False)
