"""The encrypted column: numpy's elementwise semantics within the preset's error bound, and its refusals."""

from __future__ import annotations

import numpy as np
import pytest
import tenseal as ts
from vertical_helpers import decrypt_column, relay

from collabcausal.errors import InputError, ProtocolError
from collabcausal.vertical import EncryptedColumn
from collabcausal.vertical.column import encrypt_column
from collabcausal.vertical.seal_io import tag

N = 4096 + 321  # two chunks at N = 8192, the second mostly padding


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(3601)
    return rng.uniform(-1, 1, N), rng.uniform(-1, 1, N), rng.uniform(-1, 1, N)


@pytest.fixture(scope="module")
def columns(owner1, evaluator1, data):
    x, y, _ = data
    return relay(owner1, evaluator1, x), relay(owner1, evaluator1, y)


OPERATIONS = {
    "col+col": lambda a, b, z: a + b,
    "col-col": lambda a, b, z: a - b,
    "col*col": lambda a, b, z: a * b,
    "col+arr": lambda a, b, z: a + z,
    "arr+col": lambda a, b, z: z + a,
    "col-arr": lambda a, b, z: a - z,
    "arr-col": lambda a, b, z: z - a,
    "col*arr": lambda a, b, z: a * z,
    "arr*col": lambda a, b, z: z * a,
    "col+s": lambda a, b, z: a + 0.5,
    "s-col": lambda a, b, z: 2 - a,
    "s*col": lambda a, b, z: -1.5 * a,
    "npscalar*col": lambda a, b, z: np.float64(0.25) * a,
    "col-npint": lambda a, b, z: a - np.int64(1),
    "col*bool": lambda a, b, z: a * True,
    "col*boolarr": lambda a, b, z: a * (z > 0),
    "neg": lambda a, b, z: -a,
    "polyval": lambda a, b, z: (
        a.polyval([0.25, -0.5, 0.125])
        if isinstance(a, EncryptedColumn)
        else np.polynomial.polynomial.polyval(a, [0.25, -0.5, 0.125])
    ),
}


@pytest.mark.parametrize("name", sorted(OPERATIONS))
def test_each_operation_equals_numpys_within_the_error_bound(owner1, columns, data, name):
    x, y, z = data
    op = OPERATIONS[name]
    encrypted = op(*columns, z)
    expected = op(x, y, z)
    assert isinstance(encrypted, EncryptedColumn) and encrypted.n == N
    assert np.max(np.abs(decrypt_column(owner1, encrypted) - expected)) <= owner1.parameters.error_bound
    assert np.max(np.abs(expected)) <= encrypted.bound  # the public bound holds


def test_the_depth_7_program_equals_numpy_within_the_error_bound(owner7, evaluator7):
    """Degree-8 polynomial, times an encrypted column, times a plaintext one, squared: 7 levels."""
    rng = np.random.default_rng(3602)
    n = 8192 + 50
    x, y, z = rng.uniform(-1, 1, n), rng.uniform(-1, 1, n), rng.uniform(-1, 1, n)
    c = rng.uniform(-1, 1, 9) / 9

    def program(a, b):
        p = a.polyval(c) if isinstance(a, EncryptedColumn) else np.polynomial.polynomial.polyval(a, c)
        q = p * b * z
        return q * q

    encrypted = program(relay(owner7, evaluator7, x), relay(owner7, evaluator7, y))
    error = np.max(np.abs(decrypt_column(owner7, encrypted) - program(x, y)))
    assert error <= owner7.parameters.error_bound
    total = encrypted.total(noise=1.0, flood_sd=1.0, rng=rng)
    grid = owner7.parameters.error_bound
    assert abs(owner7.open(total, noise=1e-9, grid=grid) - 1.0 - program(x, y).sum()) <= n * error + grid


def test_mismatched_n_or_contexts_are_refused_in_one_line(owner1, evaluator1, evaluator7, owner7, columns):
    a, _ = columns
    for other, match in [
        (relay(owner1, evaluator1, np.zeros(N - 1)), f"columns of {N} and {N - 1} values"),
        (relay(owner7, evaluator7, np.zeros(N)), "different CKKS contexts"),
    ]:
        with pytest.raises(InputError, match=match) as info:
            a * other
        assert "\n" not in str(info.value) and "fix:" in str(info.value)
    with pytest.raises(InputError, match=r"shape \(3,\)"):
        a + np.zeros(3)
    with pytest.raises(InputError, match="non-finite"):
        a * np.full(N, np.nan)
    with pytest.raises(InputError, match="finite"):
        a + float("inf")
    with pytest.raises(TypeError):
        a + "text"


def test_an_intermediate_beyond_the_headroom_is_refused_before_it_is_computed(owner1, columns):
    a, _ = columns
    limit = owner1.parameters.max_value
    big = a * (limit / 2)  # within the headroom
    assert big.bound == limit / 2
    with pytest.raises(InputError, match="exceeds the preset's headroom"):
        big * 4.0
    with pytest.raises(InputError, match="exceeds the preset's headroom"):
        big + big + big


def test_polyval_refuses_a_column_that_may_leave_minus_one_to_one(columns):
    a, b = columns
    with pytest.raises(InputError, match=r"within \[-1, 1\].*bounded by 2") as info:
        (a + b).polyval([0.0, 1.0])
    assert "multiply the column by 1/2" in str(info.value)
    assert ((a + b) * 0.5).polyval([0.0, 1.0]).bound == 1.0
    with pytest.raises(InputError, match="degree >= 1"):
        a.polyval([1.0])


def test_a_program_deeper_than_the_preset_is_refused_in_one_line(columns):
    a, b = columns
    with pytest.raises(InputError, match="deeper than the preset's 1 levels") as info:
        a * b * b * b
    assert "\n" not in str(info.value)


def test_from_bytes_refuses_a_wrong_chunk_count_or_foreign_bytes(owner1, evaluator1, evaluator7, data):
    chunks = owner1.encrypt(data[0]).to_bytes()
    with pytest.raises(ProtocolError, match="cannot hold n = 9000"):
        EncryptedColumn.from_bytes(evaluator1, chunks, 9000)
    with pytest.raises(ProtocolError, match="not a collabcausal CKKS blob"):
        EncryptedColumn.from_bytes(evaluator1, [b"junk", b"junk"], N)
    with pytest.raises(ProtocolError, match="under another CKKS context"):
        EncryptedColumn.from_bytes(evaluator7, chunks[:1], 10)
    with pytest.raises(ProtocolError, match="not a ciphertext of this context"):
        EncryptedColumn.from_bytes(evaluator1, [tag(evaluator1.fingerprint, b"junk")] * 2, N)
    short = tag(evaluator1.fingerprint, ts.ckks_vector(evaluator1.context, [0.0] * 10).serialize())
    with pytest.raises(ProtocolError, match="does not hold 4096 slots"):
        EncryptedColumn.from_bytes(evaluator1, [short], 10)


def test_a_program_run_chunk_by_chunk_and_summed_is_the_whole_columns(owner1, evaluator1):
    """5,000 values in two chunks of 4,096 slots: x*y + 0.5 evaluated per chunk of relayed columns (read one chunk
    at a time, as the evaluator does) decrypts chunk by chunk, and the chunks' summands added (the last one's
    padding corrected) total as the whole columns' program does."""
    from collabcausal.vertical.column import RelayedColumn, summands

    rng = np.random.default_rng(11)
    x, y = rng.uniform(-1, 1, 5000), rng.uniform(-1, 1, 5000)
    relayed = [RelayedColumn(evaluator1, owner1.encrypt(v).to_bytes(), 5000) for v in (x, y)]
    assert relayed[0].n_chunks == 2
    parts = [relayed[0].chunk(i) * relayed[1].chunk(i) + 0.5 for i in range(2)]
    whole = relayed[0].load() * relayed[1].load() + 0.5
    bound = 5000 * owner1.parameters.error_bound
    decrypted = np.concatenate([decrypt_column(owner1, p) for p in parts])
    np.testing.assert_allclose(decrypted, x * y + 0.5, atol=owner1.parameters.error_bound)
    summed = summands([parts[0]]).plus(summands([parts[1]]), evaluator1)
    totals = [owner1.open(t.packed(evaluator1, [1e-9], 1e-9)[0], noise=1e-9, grid=owner1.parameters.error_bound)[0]
              for t in (summed, summands([whole]))]
    assert totals[0] == pytest.approx(float(np.sum(x * y + 0.5)), abs=bound)
    assert totals[0] == pytest.approx(totals[1], abs=bound)


def test_the_key_owners_chunks_are_seeded_half_the_bytes_of_public_key_ones(owner1, evaluator1, data):
    """KeyOwner.encrypt saves SEAL's seeded symmetric form; anyone's public-key encryption is twice the size; both
    read back as the same values."""
    x, _, _ = data
    seeded = owner1.encrypt(x).to_bytes()
    public = encrypt_column(evaluator1, x).to_bytes()
    assert len(seeded) == len(public) == 2
    assert sum(map(len, seeded)) < 0.55 * sum(map(len, public))
    for chunks in (seeded, public):
        values = decrypt_column(owner1, EncryptedColumn.from_bytes(evaluator1, chunks, N))
        assert np.max(np.abs(values - x)) <= owner1.parameters.error_bound

