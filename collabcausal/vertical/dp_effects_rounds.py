"""The two encrypted rounds of vertical ``dp_effects`` between a label holder L and another party P.

Each function is one party's step; what passes between them is ciphertexts (and, at the end, noisy
rounded sums), relayed by the coordinator, who cannot open them (docs/dp-effects-vertical.md):

**Statistics** (L owns the key; depth 1, :func:`~collabcausal.vertical.parameters.preset` ``(1)``):

1. L: :func:`encrypt_label_vectors`: its factors (T, its covariates, the outcome, each alone and times T);
2. P: :func:`cross_totals`: for each cross entry (:func:`~collabcausal.estimators.dp.effects.vertical.cross_entries`)
   the encrypted factor times its own plaintext columns, summed over subjects with P's DP noise share
   inside (:meth:`~collabcausal.vertical.column.EncryptedColumn.total`: other slots masked and flooded);
3. L: :func:`open_totals`: decrypt each, add its own noise share, round; the entries local to L it
   computes in the clear with its noise.

**Scores** (P owns the key; depth 7):

1. P: :func:`encrypt_score_inputs`: its clipped parts of ``eta / E``, ``mu0 / U``, ``mu1 / U`` and of each
   replicate's change;
2. L: :func:`score_totals`: adds its own parts in the clear, evaluates
   :func:`~collabcausal.estimators.dp.effects.vertical.scaled_score_terms` under encryption and totals each
   released sum with L's noise share inside;
3. P: :func:`open_totals` with its noise share.

The same functions run on numpy arrays (no key, no total): the plaintext twin's sums are these
programs' (:mod:`collabcausal.simulations.vertical_simulation`), which tests/vertical checks.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

import numpy as np
from numpy.typing import NDArray

from collabcausal.errors import ProtocolError
from collabcausal.estimators.dp.effects.scores import Component
from collabcausal.estimators.dp.effects.vertical import CrossEntry, WeightPolynomial, cross_term, scaled_score_terms
from collabcausal.vertical.column import ChunkedColumn, EncryptedColumn
from collabcausal.vertical.keys import KeyOwner

LabelKey = tuple[str, int | str]

__all__ = ["cross_totals", "encrypt_label_vectors", "encrypt_score_inputs", "open_totals", "score_totals"]


def encrypt_label_vectors(owner: KeyOwner, vectors: Mapping[LabelKey, NDArray[np.float64]]
                          ) -> dict[LabelKey, EncryptedColumn]:
    """Statistics step 1 (L): each factor of :func:`~collabcausal.estimators.dp.effects.vertical.label_vectors`
    under L's key."""
    return {key: owner.encrypt(v) for key, v in vectors.items()}


def cross_totals(columns: Mapping[LabelKey, EncryptedColumn], design: NDArray[np.float64],
                 entries: Sequence[CrossEntry], noise: NDArray[np.float64], flood_sd: float) -> list[bytes]:
    """Statistics step 2 (P): one total per cross entry, ``noise[e]`` (P's DP share) inside."""
    _check_noise(noise, len(entries))
    return [cross_term(columns, design, entry).total(noise=float(z), flood_sd=flood_sd)
            for entry, z in zip(entries, noise, strict=True)]


def encrypt_score_inputs(owner: KeyOwner, inputs: Sequence[NDArray[np.float64]]) -> Iterator[EncryptedColumn]:
    """Scores step 1 (P): its parts ``(x, m0, m1)`` of the model, then of each replicate's change, encrypted one
    at a time as they are consumed (a caller that serializes each drops its ciphertexts before the next)."""
    return (owner.encrypt(v) for v in inputs)


def score_totals(
    encrypted: Sequence[ChunkedColumn], plain: Sequence[NDArray[np.float64]], treatment: NDArray[np.float64],
    outcome: NDArray[np.float64], poly: WeightPolynomial, parts: Sequence[Component], unit: float,
    noise: NDArray[np.float64], flood_sd: float,
) -> list[bytes]:
    """Scores step 2 (L): the released sums of :func:`scaled_score_terms` on ``encrypted + plain`` parts.

    ``encrypted`` and ``plain`` are P's and L's ``(x, m0, m1)`` of the model followed by those of each
    replicate's change; ``noise[j]`` is L's DP share of sum ``j``. The program runs one chunk of subjects at a
    time (every operation is slot-wise), so only one chunk's intermediates are held at once; the terms' chunks
    are then joined and totalled.
    """
    if len(encrypted) != len(plain) or len(encrypted) % 3:
        raise ProtocolError(f"{len(encrypted)} encrypted and {len(plain)} plaintext score inputs",
                            "send (x, m0, m1) of the model and of each replicate's change")
    _check_noise(noise, len(parts))
    chunks = {c.n_chunks for c in encrypted}
    if len(chunks) != 1:
        raise ProtocolError(f"score inputs of {sorted(chunks)} ciphertexts", "send every input for every subject")
    slots = encrypted[0].chunk(0).context.parameters.slot_count
    per_chunk = []
    for i in range(chunks.pop()):
        rows = slice(i * slots, (i + 1) * slots)
        summed = [e.chunk(i) + p[rows] for e, p in zip(encrypted, plain, strict=True)]
        at_model = summed[:3]
        at_copies = [[a + d for a, d in zip(at_model, summed[j:j + 3], strict=True)]
                     for j in range(3, len(summed), 3)]
        per_chunk.append(scaled_score_terms(treatment[rows], outcome[rows], at_model, at_copies, poly, parts, unit))
    terms = [EncryptedColumn.join([chunk_terms[j] for chunk_terms in per_chunk]) for j in range(len(parts))]
    return [t.total(noise=float(z), flood_sd=flood_sd) for t, z in zip(terms, noise, strict=True)]


def open_totals(owner: KeyOwner, totals: Sequence[bytes], noise: NDArray[np.float64], grid: float
                ) -> NDArray[np.float64]:
    """Statistics step 3 (L) and scores step 3 (P): each total decrypted, plus this party's noise share, rounded."""
    _check_noise(noise, len(totals))
    return np.array([owner.open(t, noise=float(z), grid=grid) for t, z in zip(totals, noise, strict=True)])


def _check_noise(noise: NDArray[np.float64], length: int) -> None:
    if np.shape(noise) != (length,) or not np.all(np.isfinite(noise)):
        raise ProtocolError(f"{np.shape(noise)} noise shares for {length} totals", "draw one share per total")
