"""Several totals in one returned ciphertext: two values a slot, every other slot part flooded.

An evaluator returns a round's totals packed (:func:`pack_totals`) and the key owner opens them all at
once (:meth:`~collabcausal.vertical.keys.KeyOwner.open`). The layout is fixed by the number of values,
which both parties know from the round's public terms: value ``2j`` is the real part of slot ``j`` and
value ``2j + 1`` its imaginary part (:data:`VALUES_PER_SLOT`), a ciphertext holds ``2 slot_count``
values and the next ones fill the next ciphertext (:func:`packed_count`).

A summand is a SEAL ciphertext whose slots add up to its total. A **complex** summand carries two values
(its real and imaginary parts: the statistics round's arm-1 and arm-0 entries of one cross product); a
**real** one carries one value, placed in the real or the imaginary part of its slot by a mask of 1 or i.
Each summand is rotated and summed (:func:`~collabcausal.vertical.total.rotate_and_sum`), masked into its
slot (:func:`~collabcausal.vertical.total.mask_slot`), the masked summands of a ciphertext are added and
rescaled once, and one fresh encryption floods it (:func:`~collabcausal.vertical.total.flood`): each value
gets the evaluator's DP noise share, every slot part that carries no value independent flooding noise,
exactly as a ciphertext of one total did. Packing changes how many ciphertexts travel and are opened
(350 statistics totals: one ciphertext instead of 350), not what any of them reveals.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from tenseal import sealapi

from collabcausal.errors import InputError
from collabcausal.vertical.context import PublicContext
from collabcausal.vertical.parameters import CKKSParameters
from collabcausal.vertical.seal_io import save_seal, tag
from collabcausal.vertical.total import flood, flooding_noise, mask_slot, rotate_and_sum

FLOOD_TAIL = 10.0
"""Flooding noise is kept below ``max_value`` at 10 sd (exceeded with probability < 2e-23 per slot)."""
VALUES_PER_SLOT = 2
"""A slot carries two values: its real and its imaginary part."""

__all__ = ["FLOOD_TAIL", "VALUES_PER_SLOT", "Summands", "check_headroom", "check_shares", "pack_totals", "packed_count"]


def packed_count(values: int, slot_count: int) -> int:
    """Ciphertexts holding ``values`` values at ``slot_count`` slots each."""
    return max(1, math.ceil(int(values) / (VALUES_PER_SLOT * slot_count)))


@dataclass(frozen=True)
class Summands:
    """A round's totals before they are packed: per total a SEAL ciphertext whose slots add up to it so far.

    An evaluator that receives the key owner's columns in batches of subjects adds each batch's summands
    (:meth:`plus`) and packs once, after the last (:meth:`packed`): what it returns is the same as for one batch.

    Attributes
    ----------
    ciphertexts : list
        One per total (``None``: exactly 0 so far), all at one level and scale.
    bounds : list of float
        A public bound on each total's modulus.
    complex_values : bool
        Whether each carries two values (real and imaginary parts) or one.
    corrections : ndarray, optional
        A known amount to add to each value (a column's padding), one per value.
    """

    ciphertexts: list[Any]
    bounds: list[float]
    complex_values: bool
    corrections: NDArray[np.float64] | None = None

    def plus(self, other: Summands, context: PublicContext) -> Summands:
        """These totals plus ``other``'s, total by total (the same totals over more subjects)."""
        if len(other.ciphertexts) != len(self.ciphertexts) or other.complex_values != self.complex_values:
            raise InputError(f"summands of {len(other.ciphertexts)} totals added to {len(self.ciphertexts)}",
                             "add the batches of one round's totals")
        summed = []
        for a, b in zip(self.ciphertexts, other.ciphertexts, strict=True):
            if a is None or b is None:
                summed.append(b if a is None else a)
                continue
            out = sealapi.Ciphertext()
            context.evaluator.add(a, b, out)
            summed.append(out)
        corrections = None if self.corrections is None and other.corrections is None else (
            _values(self) + _values(other))
        return Summands(summed, [a + b for a, b in zip(self.bounds, other.bounds, strict=True)], self.complex_values,
                        corrections)

    def packed(self, context: PublicContext, noise: ArrayLike, flood_sd: float,
               rng: np.random.Generator | None = None) -> list[bytes]:
        """The totals with the evaluator's ``noise`` shares, packed (:func:`pack_totals`)."""
        return pack_totals(context, self.ciphertexts, self.bounds, noise, flood_sd,
                           complex_summands=self.complex_values, corrections=self.corrections, rng=rng)


def _values(summands: Summands) -> NDArray[np.float64]:
    """``summands``' corrections, zeros where it has none."""
    per = VALUES_PER_SLOT if summands.complex_values else 1
    if summands.corrections is None:
        return np.zeros(per * len(summands.ciphertexts))
    return np.asarray(summands.corrections, dtype=np.float64)


def check_headroom(parameters: CKKSParameters, n: int, batch_rows: int, value_bound: float, noise_sd: float,
                   what: str) -> None:
    """Refuse, from public quantities alone, totals of ``n`` subjects that could exceed the preset's headroom.

    A total of per-subject values of modulus at most ``value_bound`` (a public bound: the key owner's
    ``INPUT_BOUND`` times the evaluator's design bound, or a score term's proved bound) over ``n`` subjects in
    batches of ``batch_rows`` is bounded by ``value_bound`` times every slot of every chunk of every batch, as
    :class:`Summands` counts it; its noise share and the flooding of sd ``noise_sd`` stay within
    :data:`FLOOD_TAIL` sd. A party runs this before it charges: :func:`pack_totals`' own check, on the bounds of
    the values it computed and the shares it drew, then fails only if a share exceeds ``FLOOD_TAIL`` sd
    (probability < 2e-23), never because of what one subject holds.
    """
    slots, full, rest = parameters.slot_count, int(n) // int(batch_rows), int(n) % int(batch_rows)
    padded = (full * math.ceil(int(batch_rows) / slots) + math.ceil(rest / slots)) * slots
    total = padded * float(value_bound) + FLOOD_TAIL * float(noise_sd)
    if not total <= parameters.max_value:
        raise InputError(f"{what}: totals of {n} subjects bounded by {total:g} (noise at {FLOOD_TAIL:g} sd included) "
                         f"may exceed the CKKS preset's headroom {parameters.max_value:g}",
                         "split the row group into smaller ones, or raise rho (the noise is part of the total)")


def check_shares(noise: ArrayLike, what: str) -> NDArray[np.float64]:
    """``noise`` as a 1-D float array of nonzero finite shares, or a one-line refusal (``what`` names the step)."""
    shares = np.atleast_1d(np.asarray(noise, dtype=np.float64))
    if shares.ndim != 1 or shares.size == 0 or not np.all(np.isfinite(shares)) or np.any(shares == 0.0):
        raise InputError(f"{what} needs a nonzero noise share for every value, got {np.ravel(noise)[:4]!r}...",
                         "draw each share from the DP sampler")
    return shares


def pack_totals(context: PublicContext, summands: Sequence[Any], bounds: Sequence[float], noise: ArrayLike,
                flood_sd: float, *, complex_summands: bool, corrections: ArrayLike | None = None,
                rng: np.random.Generator | None = None) -> list[bytes]:
    """Total every summand and pack the totals, each value with its noise share, into returned ciphertexts.

    Parameters
    ----------
    context : PublicContext
        The key owner's public context (every summand is under it).
    summands : sequence of SEAL ciphertexts or None
        Each one's slots add up to its total; at least one level left for the mask. ``None`` is a total of
        exactly 0 (its values are the noise shares alone).
    bounds : sequence of float
        A public bound on each total's modulus (its fixed-point headroom is checked with it).
    noise : array of float
        The evaluator's DP share of each value (nonzero): two per summand if ``complex_summands``, else one.
    flood_sd : float
        sd of the independent Gaussian noise in every slot part that carries no value.
    complex_summands : bool
        Whether each summand carries two values (real and imaginary parts) or one.
    corrections : array of float, optional
        Added to each value with its noise share (a column's padding, :meth:`EncryptedColumn.total`).
    rng : numpy.random.Generator, optional
        Draw the flooding noise reproducibly (simulations, tests: NOT secure).

    Returns
    -------
    list of bytes
        :func:`packed_count` SEAL ciphertexts, tagged with the context, for the key owner's ``open``.
    """
    shares = check_shares(noise, "a packed total")
    per = VALUES_PER_SLOT if complex_summands else 1
    if len(summands) == 0 or len(bounds) != len(summands) or shares.size != per * len(summands):
        raise InputError(f"{shares.size} noise shares and {len(bounds)} bounds for {len(summands)} summands",
                         f"pass {per} share(s) and one bound per summand")
    extra = np.zeros(shares.size) if corrections is None else np.asarray(corrections, dtype=np.float64)
    if extra.shape != shares.shape or not np.all(np.isfinite(extra)):
        raise InputError("corrections must be finite, one per value", "pass one correction per noise share")
    flood_sd = float(flood_sd)
    if not (math.isfinite(flood_sd) and flood_sd > 0):
        raise InputError(f"flood_sd must be positive, got {flood_sd!r}", "pass the flooding sd of the release")
    parameters = context.parameters
    limit = parameters.max_value
    largest = max(float(b) for b in bounds) + float(np.max(np.abs(shares + extra)))
    if not all(math.isfinite(float(b)) and b >= 0 for b in bounds) or largest > limit or FLOOD_TAIL * flood_sd > limit:
        raise InputError(
            f"totals bounded by {max(float(b) for b in bounds):g} with noise up to {np.max(np.abs(shares)):g} and "
            f"flood sd {flood_sd:g} may exceed the preset's headroom {limit:g}",
            "scale the per-subject terms down (and the result up)",
        )
    capacity = parameters.slot_count * VALUES_PER_SLOT // per
    return [_packed(context, summands[start:start + capacity], shares[per * start:per * (start + capacity)],
                    extra[per * start:per * (start + capacity)], flood_sd, per, rng)
            for start in range(0, len(summands), capacity)]


def _packed(context: PublicContext, summands: Sequence[Any], shares: NDArray[np.float64],
            corrections: NDArray[np.float64], flood_sd: float, per: int, rng: np.random.Generator | None) -> bytes:
    """One returned ciphertext: the summands brought to one level, totalled, masked into place, flooded."""
    parameters, evaluator, seal_context = context.parameters, context.evaluator, context.seal_context
    flat = flooding_noise(VALUES_PER_SLOT * parameters.slot_count, flood_sd, rng)
    flat[:shares.size] = shares + corrections
    values = flat[0::2] + 1j * flat[1::2]
    computed = [(k, s) for k, s in enumerate(summands) if s is not None]
    if not computed:  # every total exactly 0: the noise shares and flooding alone, freshly encrypted
        zero = sealapi.Plaintext()
        context.encoder.encode(np.zeros(parameters.slot_count).tolist(), seal_context.last_parms_id(),
                               2.0**parameters.scale_bits, zero)
        empty = sealapi.Ciphertext()
        context.encryptor.encrypt(zero, empty)
        return tag(context.fingerprint, save_seal(flood(evaluator, context.encoder, context.encryptor, empty, values)))
    summands = [s for _, s in computed]
    level = min(seal_context.get_context_data(s.parms_id()).chain_index() for s in summands)
    if level < 1:
        raise InputError(
            f"the program used all {parameters.depth + 1} levels, none is left for the total's mask",
            f"use a preset deeper than {parameters.depth}",
        )
    scale = summands[0].scale
    if any(not math.isclose(s.scale, scale, rel_tol=1e-9) for s in summands):
        raise InputError("the summands of one packed total are at different CKKS scales",
                         "total terms of one program (TenSEAL keeps every scale nominal)")
    target = seal_context.get_context_data(summands[0].parms_id())
    while target.chain_index() > level:
        target = target.next_context_data()
    placed = None
    for k, summand in computed:
        at = sealapi.Ciphertext()
        evaluator.mod_switch_to(summand, target.parms_id(), at)  # fewer primes: cheaper rotations
        summed = rotate_and_sum(evaluator, context.galois_keys, at, parameters)
        slot, unit = (k, 1.0) if per == VALUES_PER_SLOT else (k // VALUES_PER_SLOT, (1.0, 1j)[k % VALUES_PER_SLOT])
        masked = mask_slot(evaluator, context.encoder, summed, slot, unit, parameters.slot_count,
                           2.0**parameters.scale_bits)
        if placed is None:
            placed = masked
        else:
            evaluator.add_inplace(placed, masked)
    evaluator.rescale_to_next_inplace(placed)
    return tag(context.fingerprint, save_seal(flood(evaluator, context.encoder, context.encryptor, placed, values)))
