"""Cost and accuracy of the CKKS layer of vertical splits (collabcausal/vertical/), per preset.

    .venv/bin/python benchmarks/bench_ckks.py                 # n = 100,000
    .venv/bin/python benchmarks/bench_ckks.py --n 1000000     # n = 10^6
    .venv/bin/python benchmarks/bench_ckks.py --quick         # n = 10,000 (the test suite runs this)

For each preset: key generation, the public context's parts (TenSEAL context with the public key,
relinearization keys, Galois keys for the total's rotations), encrypting one column of n seeded
values in [-1, 1] and its bytes, the preset's benchmark program and its total (depth 1: an encrypted
column times a plaintext column; depth 2: an encrypted column times two plaintext columns; depth 7: a
degree-8 polynomial of x, times an encrypted column y, times a plaintext column z, squared), one total's
ciphertext bytes, open(); then the largest absolute per-subject error against numpy float64 (decrypting the
program's column with the owner's secret key: a measurement only, the API never returns an un-noised value), the
same for
``0.999^(2^depth)`` by repeated squaring (where TenSEAL's rescaling bias compounds most), the
total's absolute error, and the largest un-flooded slot part of a total (what the flooding hides). One run on the
shared machine (times are wall clock, one thread); no time target. Checks (exit 1 when one fails,
quick runs included): the per-subject and squaring-chain errors within the preset's error bound,
the total's within 10,000 bounds, the un-flooded slots below 1e-3 (CKKS error only: slot 0's sum
is masked out of them) and ceil(n / slots) ciphertexts per column.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

import numpy as np
from _run_mode import BenchmarkParser
from tenseal import sealapi

from collabcausal.vertical import PRESETS, EncryptedColumn, KeyOwner, load_public_context
from collabcausal.vertical.parameters import HE_STANDARD_128_BITS
from collabcausal.vertical.seal_io import load_seal, unframe, untag

SEED = 36
NOISE = 1.0  # the evaluator's and the key owner's noise shares: fixed here, subtracted to measure the error


def _program(depth: int, coefficients: np.ndarray) -> Callable:
    """The preset's benchmark program, on numpy arrays and encrypted columns alike."""

    def depth_1(x, y, z):
        return x * z

    def depth_2(x, y, z):  # the three-party statistics entry: the arm factor times two parties' columns
        return x * y * z

    def depth_7(x, y, z):
        p = (
            x.polyval(coefficients)
            if isinstance(x, EncryptedColumn)
            else np.polynomial.polynomial.polyval(x, coefficients)
        )
        q = p * y * z
        return q * q

    return {1: depth_1, 2: depth_2}.get(depth, depth_7)


def _timed(f: Callable, *args, **kwargs):
    start = time.perf_counter()
    out = f(*args, **kwargs)
    return out, time.perf_counter() - start


def _slots_of_total(owner: KeyOwner, total: bytes) -> np.ndarray:
    seal_context = owner._context.seal_context().data  # measurement only
    payload = untag(total, owner.public.fingerprint, "total")
    ciphertext = load_seal(sealapi.Ciphertext(), seal_context, payload, "total")
    plain = sealapi.Plaintext()
    sealapi.Decryptor(seal_context, owner._context.secret_key().data).decrypt(ciphertext, plain)
    return np.asarray(sealapi.CKKSEncoder(seal_context).decode_complex(plain))


def bench(depth: int, n: int) -> dict[str, float]:
    parameters = PRESETS[depth]
    rng = np.random.default_rng(SEED)
    x, y, z = (rng.uniform(-1, 1, n) for _ in range(3))
    coefficients = rng.dirichlet(np.ones(9))  # positive, summing to 1: values reach magnitude 1 near x = 1
    program = _program(depth, coefficients)
    row: dict[str, float] = {}
    owner, row["keygen_s"] = _timed(KeyOwner, parameters)
    blob = owner.public_context()
    _, tenseal_part, galois = unframe(blob, 3, "context")
    public_only = owner._context.copy()
    public_only.make_context_public()
    row["context_mb"] = len(blob) / 1e6
    row["public_key_mb"] = len(public_only.serialize(save_galois_keys=False, save_relin_keys=False)) / 1e6
    row["relin_mb"] = (len(tenseal_part) - row["public_key_mb"] * 1e6) / 1e6
    row["galois_mb"] = len(galois) / 1e6
    evaluator, row["load_context_s"] = _timed(load_public_context, blob)
    column, row["encrypt_s"] = _timed(owner.encrypt, x)
    chunks = column.to_bytes()
    row["ciphertexts"] = len(chunks)
    row["column_mb"] = sum(len(c) for c in chunks) / 1e6
    xs = EncryptedColumn.from_bytes(evaluator, chunks, n)
    ys = EncryptedColumn.from_bytes(evaluator, owner.encrypt(y).to_bytes(), n) if depth > 1 else None
    result, row["program_s"] = _timed(program, xs, ys, z)
    total, row["total_s"] = _timed(result.total, noise=NOISE, flood_sd=1.0)
    row["total_kb"] = len(total) / 1e3
    opened, row["open_s"] = _timed(owner.open, total, noise=[NOISE], grid=parameters.error_bound)
    exact = program(x, y, z)
    secret = owner._context.secret_key()  # measurement only
    decrypted = np.concatenate([np.asarray(c.decrypt(secret)) for c in result._chunks])[:n]
    row["max_subject_error"] = float(np.max(np.abs(decrypted - exact)))
    row["total_error"] = abs(float(opened[0]) - 2 * NOISE - float(np.sum(exact)))
    row["total_magnitude"] = abs(float(np.sum(exact)))
    chain = owner.encrypt(np.full(parameters.slot_count, 0.999)).load()
    for _ in range(depth):
        chain = chain * chain
    chain_values = np.asarray(chain._chunks[0].decrypt(secret))
    row["squaring_chain_error"] = float(np.max(np.abs(chain_values - 0.999 ** (2**depth))))
    unflooded = _slots_of_total(owner, result.total(noise=NOISE, flood_sd=1e-30, rng=rng))
    rest = np.concatenate([[unflooded[0].imag], unflooded[1:].real, unflooded[1:].imag])
    row["unflooded_max"] = float(np.max(np.abs(rest)))
    row["unflooded_l2"] = float(np.linalg.norm(rest))
    return row


def failed_checks(rows: dict[int, dict[str, float]], n: int) -> list[str]:
    """The checks of the module docstring that failed, one line per preset and measure."""
    failed = []
    for depth, row in rows.items():
        preset = PRESETS[depth]
        limits = {"max_subject_error": (0.0, preset.error_bound), "squaring_chain_error": (0.0, preset.error_bound),
                  "total_error": (-1.0, 10_000 * preset.error_bound), "unflooded_max": (-1.0, 1e-3)}
        failed += [f"depth {depth}: {key} {row[key]:.3g} outside ({low:g}, {high:g}]"
                   for key, (low, high) in limits.items() if not low < row[key] <= high]
        if row["ciphertexts"] != -(-n // preset.slot_count):
            failed.append(f"depth {depth}: {row['ciphertexts']:g} ciphertexts, not ceil({n} / {preset.slot_count})")
    return failed


def main(argv: list[str] | None = None) -> int:
    parser = BenchmarkParser(__doc__)
    parser.add_size("--n", type=int, full=100_000, quick=10_000, help="subjects per column")
    n = parser.parse_args(argv).n
    print(f"n = {n:,}, seed {SEED}")
    print("| preset | N | modulus bits (128-bit max) | scale | max value | error bound |")
    print("|---|---|---|---|---|---|")
    for depth, p in sorted(PRESETS.items()):
        limit = HE_STANDARD_128_BITS[p.poly_modulus_degree]
        print(
            f"| depth {depth} | {p.poly_modulus_degree} | {p.total_bits} ({limit}) | 2^{p.scale_bits}"
            f" | {p.max_value:g} | {p.error_bound:g} |"
        )
    rows = {depth: bench(depth, n) for depth in sorted(PRESETS)}
    print()
    print("| measure | " + " | ".join(f"depth {d}" for d in rows) + " |")
    print("|---|" + "---|" * len(rows))
    for key in next(iter(rows.values())):
        print(f"| {key} | " + " | ".join(f"{rows[d][key]:.3g}" for d in rows) + " |")
    failed = failed_checks(rows, n)
    print(f"checks: {'; '.join(failed) if failed else 'every error within its bound'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
