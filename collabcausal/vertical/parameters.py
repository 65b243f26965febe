"""CKKS parameter sets: ring degree, modulus chain, scale, and what each preset guarantees.

A preset of depth ``d`` has ``d`` rescaling primes for the caller's program and one more for the
slot-0 mask of :meth:`~collabcausal.vertical.column.EncryptedColumn.total`. Every inner prime has
``scale_bits`` bits (the scale), the first prime ``q_0`` is what is left for the returned total,
the last prime is the key-switching ("special") prime. A value ``v`` at the last level is stored as
``v * 2^scale_bits`` modulo ``q_0``, so ``|v| < 2^(q_0 bits - scale_bits - 1)``; :attr:`max_value`
keeps one bit spare. Security: 128-bit classical for ternary secrets when the total modulus bits
stay within the HomomorphicEncryption.org standard's bound for the ring degree (Albrecht et al.
2018, "Homomorphic Encryption Security Standard", Table 1; SEAL enforces the same table).

The presets and their ``error_bound`` were chosen by measurement (``python benchmarks/bench_ckks.py``,
docs/vertical-encryption.md): a bound on the absolute error per subject of a full-depth program
whose values stay within [-1, 1], at least twice the largest measured (the benchmark program, and
``x^(2^depth)`` by repeated squaring, where TenSEAL's rescaling by primes that are not exactly
``2^scale_bits`` compounds into a relative bias). A total of n subjects is off by at most n times that.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from collabcausal.errors import InputError

HE_STANDARD_128_BITS = {1024: 27, 2048: 54, 4096: 109, 8192: 218, 16384: 438, 32768: 881}
"""Largest total modulus bits for 128-bit security (ternary secret, classical), per ring degree."""
INPUT_BOUND = 1.0
"""Every encrypted value lies in [-1, 1]: callers scale their columns by public bounds first."""

__all__ = ["HE_STANDARD_128_BITS", "INPUT_BOUND", "PRESETS", "CKKSParameters", "preset"]


@dataclass(frozen=True)
class CKKSParameters:
    """One CKKS parameter set (public: both parties and the coordinator may know it).

    Parameters
    ----------
    poly_modulus_degree : int
        Ring degree N; a ciphertext holds N/2 real values (slots).
    coeff_mod_bit_sizes : tuple of int
        Bits of the modulus chain: ``q_0``, ``depth + 1`` scale-sized primes, the special prime.
    scale_bits : int
        log2 of the CKKS scale; equal to the inner primes' bits so that rescaling keeps it.
    error_bound : float
        Measured bound on the absolute error per subject of a full-depth program (module docstring);
        :meth:`~collabcausal.vertical.keys.KeyOwner.open` refuses a rounding grid finer than it.
    rotation_base : int
        A total's rotate-and-sum rotates by powers of it (:func:`~collabcausal.vertical.total.rotation_steps`):
        ``log_base(slots)`` Galois keys, ``(base - 1) log_base(slots)`` rotations a total. 2 takes the fewest
        rotations, a larger base the fewest (and smallest in all) keys.
    """

    poly_modulus_degree: int
    coeff_mod_bit_sizes: tuple[int, ...]
    scale_bits: int
    error_bound: float
    rotation_base: int = 8

    def __post_init__(self) -> None:
        n, bits, s = self.poly_modulus_degree, tuple(self.coeff_mod_bit_sizes), self.scale_bits
        fix = "use a preset (collabcausal.vertical.preset(depth))"
        if n not in HE_STANDARD_128_BITS:
            raise InputError(f"ring degree {n} is not one of {sorted(HE_STANDARD_128_BITS)}", fix)
        if len(bits) < 3 or any(b != s for b in bits[1:-1]) or bits[0] < s + 3 or bits[-1] < bits[0]:
            raise InputError(
                f"modulus chain {list(bits)} is not q_0 (> scale + 2 bits), primes of {s} bits, special prime >= q_0",
                fix,
            )
        if sum(bits) > HE_STANDARD_128_BITS[n]:
            raise InputError(
                f"{sum(bits)} modulus bits exceed the {HE_STANDARD_128_BITS[n]} of 128-bit security at N = {n}", fix
            )
        if not (math.isfinite(self.error_bound) and self.error_bound > 0):
            raise InputError(f"error_bound must be a positive number, got {self.error_bound!r}", fix)
        base = self.rotation_base
        if not (isinstance(base, int) and base >= 2 and base & (base - 1) == 0):
            raise InputError(f"rotation_base must be a power of 2 from 2, got {base!r}", fix)
        object.__setattr__(self, "coeff_mod_bit_sizes", bits)

    @property
    def depth(self) -> int:
        """Multiplicative levels left to the caller's program (one more is the total's mask)."""
        return len(self.coeff_mod_bit_sizes) - 3

    @property
    def slot_count(self) -> int:
        """Values per ciphertext: N/2."""
        return self.poly_modulus_degree // 2

    @property
    def total_bits(self) -> int:
        """Bits of the whole modulus chain (what the security level depends on)."""
        return sum(self.coeff_mod_bit_sizes)

    @property
    def max_value(self) -> float:
        """Largest |value| any slot, intermediate or total, may reach: ``2^(q_0 bits - scale_bits - 2)``."""
        return 2.0 ** (self.coeff_mod_bit_sizes[0] - self.scale_bits - 2)


PRESETS: dict[int, CKKSParameters] = {
    1: CKKSParameters(8192, (60, 38, 38, 60), 38, error_bound=1e-5, rotation_base=2),
    2: CKKSParameters(16384, (60, 38, 38, 38, 60), 38, error_bound=2e-5, rotation_base=4),
    7: CKKSParameters(16384, (60, *(38,) * 8, 60), 38, error_bound=1e-3),
}
"""By depth: 1 for the cross Gram blocks (an encrypted column times a plaintext one), 2 for those of three column
groups (the label holder's arm times two other parties' columns), 7 for the scores (a degree-15 polynomial, two
products, a square). Figures in docs/vertical-encryption.md.
Rotation bases: the statistics round totals 175 sums at N = 8192, where a Galois key is 0.7 MB: base 2 (12
keys, 12 rotations a sum, against 4 keys and 28 rotations at base 8); with three column groups at N = 16384,
where a key is 2.2 MB, base 4 (7 keys, 21 rotations a sum); the scores round totals 10 sums at
N = 16384, where a key is 9 MB: base 8 (5 keys, 29 rotations a sum)."""


def preset(depth: int) -> CKKSParameters:
    """The smallest preset with at least ``depth`` levels for the caller's program."""
    if int(depth) != depth or depth < 1:
        raise InputError(f"depth must be a positive integer, got {depth!r}", "count the program's multiplications")
    fitting = [p for d, p in sorted(PRESETS.items()) if d >= depth]
    if not fitting:
        raise InputError(f"no preset has depth {depth} (deepest: {max(PRESETS)})", "split the program into rounds")
    return fitting[0]
