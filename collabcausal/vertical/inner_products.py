"""Many sums over subjects of an encrypted column times a plaintext column, chunk by chunk on SEAL ciphertexts.

The statistics round's evaluator computes ``sum_k z_k p_k`` for hundreds of pairs of a key owner's column
``z`` (complex: two factors a slot) and a plaintext column ``p`` of its own (:func:`inner_products`). Each
product is one multiplication by a plaintext: SEAL's ``multiply_plain`` on the chunks, added over chunks
before the one rescale a sum needs, with each plaintext chunk encoded once and used by every pair that
shares it (TenSEAL would encode it and rescale for every pair and chunk: 2 ms against 0.2 ms). Only one
chunk of each column is read into a ciphertext at a time.

The result is the per-slot partial sums of each pair, one level down, for
:func:`~collabcausal.vertical.packing.pack_totals` with a public bound on each total: ``n_padded`` times the
column's bound times the largest ``|p|``.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray
from tenseal import sealapi

from collabcausal.errors import InputError
from collabcausal.vertical.column import ChunkedColumn

__all__ = ["inner_products"]


def inner_products(columns: Mapping[Hashable, ChunkedColumn], plaintexts: Mapping[Hashable, NDArray[np.float64]],
                   pairs: Sequence[tuple[Hashable, Hashable]]) -> tuple[list[Any], list[float]]:
    """``sum_k columns[c]_k plaintexts[p]_k`` for each pair ``(c, p)``, as a SEAL ciphertext of per-slot sums.

    Parameters
    ----------
    columns : mapping
        Encrypted columns of one context and one length n, by key.
    plaintexts : mapping
        The evaluator's (n,) columns, by key.
    pairs : sequence of (column key, plaintext key)

    Returns
    -------
    (list, list of float)
        One rescaled ciphertext per pair (``None`` for a plaintext of zeros: its total is exactly 0), and a public
        bound on the modulus of each pair's total.
    """
    if not pairs:
        raise InputError("inner_products() needs at least one pair", "pass (column, plaintext) keys")
    missing = [k for pair in pairs for k, known in zip(pair, (columns, plaintexts), strict=True) if k not in known]
    if missing:
        raise InputError(f"inner_products(): no column or plaintext {missing[0]!r}", "pass every key a pair names")
    context = columns[pairs[0][0]].chunk(0).context
    parameters, evaluator, encoder = context.parameters, context.evaluator, context.encoder
    slots, n_chunks, n = parameters.slot_count, columns[pairs[0][0]].n_chunks, columns[pairs[0][0]].n
    used = {c for c, _ in pairs}
    if any(columns[c].n != n for c in used):
        raise InputError("inner_products() takes columns of one length", "encrypt every column of the n subjects")
    arrays = {p: np.asarray(plaintexts[p], dtype=np.float64) for _, p in pairs}
    if any(a.shape != (n,) or not np.all(np.isfinite(a)) for a in arrays.values()):
        raise InputError(f"inner_products() takes finite plaintext columns of shape ({n},)", "align both parties first")
    sums: list[Any] = [None] * len(pairs)
    bound_of: dict[Hashable, float] = {}
    for i in range(n_chunks):
        rows = slice(i * slots, (i + 1) * slots)
        chunk = {c: columns[c].chunk(i) for c in used}
        if any(col.context.fingerprint != context.fingerprint for col in chunk.values()):
            raise InputError("inner_products() takes columns of one context", "pass one key owner's columns")
        for c, col in chunk.items():
            bound_of[c] = max(bound_of.get(c, 0.0), col.bound)
        cipher = _one_level(context, {c: col.ciphertext(0) for c, col in chunk.items()})
        encoded: dict[tuple[Hashable, tuple[int, ...]], Any] = {}
        for k, (c, p) in enumerate(pairs):
            at = (p, tuple(cipher[c].parms_id()))
            if at not in encoded:
                part = arrays[p][rows]
                encoded[at] = None if not np.any(part) else sealapi.Plaintext()
                if encoded[at] is not None:
                    piece = np.zeros(slots)
                    piece[:part.size] = part
                    encoder.encode(piece.tolist(), cipher[c].parms_id(), 2.0**parameters.scale_bits, encoded[at])
            if encoded[at] is None:  # a chunk of zeros adds nothing (SEAL refuses a product that is exactly 0)
                continue
            product = sealapi.Ciphertext()
            evaluator.multiply_plain(cipher[c], encoded[at], product)
            if sums[k] is None:
                sums[k] = product
            else:
                evaluator.add_inplace(sums[k], product)
    for s in sums:
        if s is not None:
            evaluator.rescale_to_next_inplace(s)
    bounds = [n_chunks * slots * bound_of[c] * float(np.max(np.abs(arrays[p]), initial=0.0)) for c, p in pairs]
    return sums, bounds


def _one_level(context: Any, ciphers: dict[Hashable, Any]) -> dict[Hashable, Any]:
    """The chunks brought to the lowest level among them (SEAL's ``mod_switch_to``: fewer primes, same scale), so
    that every product of the chunk sums at one level: a column another party multiplied already (three or more
    column groups, :func:`~collabcausal.vertical.dp_effects_rounds.arm_products`) is one level below the key owner's.
    Refused (one line): chunks at different scales."""
    seal_context = context.seal_context
    index = {c: seal_context.get_context_data(x.parms_id()).chain_index() for c, x in ciphers.items()}
    low = min(index, key=index.__getitem__)
    for c, x in ciphers.items():
        if index[c] != index[low]:
            context.evaluator.mod_switch_to_inplace(x, ciphers[low].parms_id())
    if len({x.scale for x in ciphers.values()}) > 1:
        raise InputError("inner_products() got columns at different CKKS scales",
                         "multiply fresh columns, or columns of one product by a plaintext (TenSEAL's nominal scale)")
    return ciphers
