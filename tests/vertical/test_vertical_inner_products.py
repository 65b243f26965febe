"""Sums of an encrypted column times plaintext columns on SEAL: numpy's sums, both parts of a complex column."""

from __future__ import annotations

import numpy as np
import pytest
from vertical_helpers import relay

from collabcausal.errors import InputError
from collabcausal.vertical.column import RelayedColumn
from collabcausal.vertical.inner_products import inner_products
from collabcausal.vertical.packing import pack_totals

N = 4096 + 700  # two chunks at N = 8192


@pytest.fixture(scope="module")
def world(owner1, evaluator1):
    """A complex column (treated factor + i control factor, modulus <= 1) and P's plaintext columns."""
    rng = np.random.default_rng(3638)
    T, v = rng.integers(0, 2, N), rng.uniform(-1, 1, N)
    z = T * v + 1j * (1 - T) * v
    column = RelayedColumn(evaluator1, owner1.encrypt(z).to_bytes(), N)
    plain = {"a": rng.uniform(-1, 1, N), "b": rng.uniform(-1, 1, N), "zero": np.zeros(N)}
    plain["late"] = np.where(np.arange(N) >= 4096, plain["a"], 0.0)  # the first chunk all zeros
    return z, {"z": column}, plain


def _opened(owner1, evaluator1, sums, bounds, k):
    """Each sum's real and imaginary parts, packed and opened with negligible shares."""
    tiny = np.full(2 * k, 1e-9)
    total = pack_totals(evaluator1, sums, bounds, tiny, 1e-9, complex_summands=True)
    assert len(total) == 1
    return owner1.open(total[0], noise=tiny, grid=owner1.parameters.error_bound)


def test_each_pair_is_numpys_sum_in_both_parts(owner1, evaluator1, world):
    z, columns, plain = world
    pairs = [("z", "a"), ("z", "b"), ("z", "late")]
    sums, bounds = inner_products(columns, plain, pairs)
    opened = _opened(owner1, evaluator1, sums, bounds, len(pairs))
    exact = np.array([[(z * plain[p]).sum().real, (z * plain[p]).sum().imag] for _, p in pairs]).ravel()
    assert np.max(np.abs(opened - exact)) <= N * owner1.parameters.error_bound
    assert bounds == [2 * 4096 * 1.0 * float(np.max(np.abs(plain[p]))) for _, p in pairs]


def test_a_plaintext_of_zeros_is_an_exact_zero_and_packs_as_its_shares(owner1, evaluator1, world):
    """SEAL refuses a product that is exactly 0: such a sum is None, and its values are the noise shares alone."""
    _z, columns, plain = world
    sums, bounds = inner_products(columns, plain, [("z", "zero"), ("z", "a")])
    assert sums[0] is None and sums[1] is not None
    shares = np.array([2.0, -3.0, 1e-9, 1e-9])
    total = pack_totals(evaluator1, sums, bounds, shares, 1e-9, complex_summands=True)
    opened = owner1.open(total[0], noise=np.full(4, 1e-9), grid=owner1.parameters.error_bound)
    np.testing.assert_allclose(opened[:2], shares[:2], atol=1e-4)
    only_zeros = pack_totals(evaluator1, [None], [0.0], shares[:2], 1e-9, complex_summands=True)
    np.testing.assert_allclose(owner1.open(only_zeros[0], noise=np.full(2, 1e-9), grid=1e-5), shares[:2], atol=1e-4)


@pytest.mark.parametrize(
    ("pairs", "plain", "match"),
    [
        ([], None, "at least one pair"),
        ([("y", "a")], None, "no column or plaintext 'y'"),
        ([("z", "c")], None, "no column or plaintext 'c'"),
        ([("z", "short")], {"short": np.ones(N - 1)}, r"shape \(4796,\)"),
        ([("z", "nan")], {"nan": np.full(N, np.nan)}, "finite plaintext"),
    ],
)
def test_bad_pairs_and_plaintexts_are_refused_in_one_line(world, pairs, plain, match):
    _z, columns, plaintexts = world
    with pytest.raises(InputError, match=match) as info:
        inner_products(columns, plaintexts if plain is None else plain, pairs)
    assert "\n" not in str(info.value)


def test_columns_of_other_lengths_are_refused(owner1, evaluator1, world):
    _z, columns, plain = world
    other = relay(owner1, evaluator1, np.zeros(N - 1))
    with pytest.raises(InputError, match="one length"):
        inner_products(columns | {"w": other}, plain, [("z", "a"), ("w", "a")])
