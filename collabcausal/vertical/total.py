"""The stages of a returned total, on the SEAL ciphertext: rotate-and-sum, slot mask, flooding.

After the caller's program, the chunks of each column are added slot-wise
(:func:`~collabcausal.vertical.packing.pack_totals` places several totals in one ciphertext), then:

1. :func:`rotate_and_sum`: every slot holds the sum over all slots (rotations by powers of the
   preset's ``rotation_base``, so the key owner publishes Galois keys for :func:`rotation_steps` only:
   5 keys at N = 16384 (base 8) instead of the 27 of TenSEAL's default set);
2. :func:`mask_slot`: multiply by the plaintext that is ``unit`` (1 or i) in the total's slot and 0 in
   every other, so the other slots hold only CKKS error, not the sum; the masked totals of one
   ciphertext are added and rescaled once;
3. :func:`flood`: add a **fresh public-key encryption** of the evaluator's DP noise shares in the
   slot parts that carry a total and independent Gaussian flooding noise in every other real and
   imaginary part. The fresh encryption re-randomizes the ciphertext: without it, its second
   component would be a known function of the key owner's own ciphertexts and the evaluator's
   plaintexts (a key owner could divide it out and read the evaluator's columns). The flooding hides
   the error terms of the computation, which depend on the evaluator's values.

The flooding noise (:func:`flooding_noise`) is not a DP release: what it needs is to be unpredictable
by the key owner and Gaussian. It is the Box-Muller transform (Box & Muller 1958, "A Note on the
Generation of Random Normal Deviates", Ann. Math. Statist. 29(2), eq. 1) of uniforms from a ChaCha20
keystream under a fresh 32-byte OS-entropy key (secure aggregation's :func:`expand_mask`): about a
millisecond for 16,383 values, where OpenDP's exact Gaussian took 1.5 s, most of a total's time.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
from numpy.typing import NDArray
from tenseal import sealapi

from collabcausal.secagg.crypto import SEED_BYTES, expand_mask
from collabcausal.vertical.parameters import CKKSParameters

__all__ = ["flood", "flooding_noise", "mask_slot", "rotate_and_sum", "rotation_steps"]


def rotation_steps(parameters: CKKSParameters) -> list[int]:
    """The rotation steps :func:`rotate_and_sum` uses (the Galois keys a key owner publishes): 1, b, b^2, ...
    below the slot count, ``b`` the preset's ``rotation_base``."""
    steps, block = [], 1
    while block < parameters.slot_count:
        steps.append(block)
        block *= parameters.rotation_base
    return steps


def rotate_and_sum(evaluator: Any, galois_keys: Any, ciphertext: Any, parameters: CKKSParameters) -> Any:
    """A ciphertext whose every slot holds the sum of ``ciphertext``'s slots: each stage rotates up to
    ``rotation_base - 1`` times by one key."""
    block, slot_count, base = 1, parameters.slot_count, parameters.rotation_base
    while block < slot_count:
        stage = min(base, slot_count // block)
        total, rotated = ciphertext, ciphertext
        for _ in range(stage - 1):
            step = sealapi.Ciphertext()
            evaluator.rotate_vector(rotated, block, galois_keys, step)
            summed = sealapi.Ciphertext()
            evaluator.add(total, step, summed)
            total, rotated = summed, step
        ciphertext, block = total, block * stage
    return ciphertext


def mask_slot(evaluator: Any, encoder: Any, ciphertext: Any, slot: int, unit: complex, slot_count: int,
              scale: float) -> Any:
    """``ciphertext`` times the plaintext that is ``unit`` in ``slot`` and 0 elsewhere, not yet rescaled (the
    caller adds the masked totals of one ciphertext and rescales once: one level)."""
    mask = np.zeros(slot_count, dtype=np.complex128)
    mask[slot] = unit
    plain = sealapi.Plaintext()
    encoder.encode(mask.tolist(), ciphertext.parms_id(), scale, plain)
    masked = sealapi.Ciphertext()
    evaluator.multiply_plain(ciphertext, plain, masked)
    return masked


def flood(evaluator: Any, encoder: Any, encryptor: Any, ciphertext: Any, values: NDArray[np.complex128]) -> Any:
    """``ciphertext`` plus a fresh public-key encryption of the complex slot ``values`` at its level and scale."""
    plain = sealapi.Plaintext()
    encoder.encode(values.tolist(), ciphertext.parms_id(), ciphertext.scale, plain)
    fresh = sealapi.Ciphertext()
    encryptor.encrypt(plain, fresh)
    out = sealapi.Ciphertext()
    evaluator.add(ciphertext, fresh, out)
    return out


def flooding_noise(count: int, sd: float, rng: np.random.Generator | None = None) -> NDArray[np.float64]:
    """``count`` i.i.d. N(0, sd^2) values, unpredictable without the fresh key (module docstring).

    A numpy ``rng`` draws them reproducibly instead: for seeded tests and simulations only, NOT secure.
    """
    if rng is not None:
        return rng.normal(0.0, sd, size=count)
    pairs = (count + 1) // 2
    bits = expand_mask(os.urandom(SEED_BYTES), "ckks-flooding", 2 * pairs)
    uniform = ((bits >> np.uint64(11)).astype(np.float64) + 1.0) * 2.0**-53  # in (0, 1]: log is finite
    radius = np.sqrt(-2.0 * np.log(uniform[:pairs]))
    angle = 2.0 * np.pi * uniform[pairs:]
    return sd * np.concatenate([radius * np.cos(angle), radius * np.sin(angle)])[:count]
