"""The two encrypted rounds of vertical ``dp_effects`` between a label holder L and another party P.

Each function is one party's step; what passes between them is ciphertexts (and, at the end, noisy
rounded sums), relayed by the coordinator, who cannot open them (docs/dp-effects-vertical.md):

**Statistics** (L owns the key; depth 1, :func:`~collabcausal.vertical.parameters.preset` ``(1)``):

1. L: :func:`encrypt_label_vectors`: its factors (its site's one-hot, its covariates, the arm indicator, the
   outcome), each as one complex column ``T v + i (1 - T) v``: the treated arm's factor in the real part of a
   slot, the controls' in the imaginary part;
2. P: :func:`cross_totals`: for each cross entry (:func:`~collabcausal.estimators.dp.effects.vertical.cross_entries`,
   in :func:`packed_entries`' order: the treated and control entries of one product side by side) the
   encrypted factor times its own plaintext columns, summed over subjects: one complex sum gives both arms'
   entries (:func:`~collabcausal.vertical.inner_products.inner_products`); all are packed two values a slot into
   one ciphertext with P's DP noise share on each, other slot parts masked and flooded
   (:func:`~collabcausal.vertical.packing.pack_totals`);
3. L: :func:`open_totals`: decrypt the values, add its own noise share to each, round; the entries local to L
   it computes in the clear with its noise.

**Scores** (P owns the key; depth 7):

1. P: :func:`encrypt_score_inputs`: its clipped parts of ``eta / E``, ``mu0 / U``, ``mu1 / U`` and of each
   replicate's change;
2. L: :func:`score_summands`: adds its own parts in the clear, evaluates
   :func:`~collabcausal.estimators.dp.effects.vertical.scaled_score_terms` under encryption and totals each
   released sum with L's noise share inside, the sums packed into one ciphertext;
3. P: :func:`open_totals` with its noise share.

The score program runs on numpy arrays too (no key, no total): the plaintext twin's sums are these
programs' (:mod:`collabcausal.simulations.vertical_simulation`), which tests/vertical checks; the cross
entries are :func:`~collabcausal.estimators.dp.effects.vertical.cross_term`'s sums.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from collabcausal.errors import ProtocolError
from collabcausal.estimators.dp.effects.scores import Component
from collabcausal.estimators.dp.effects.vertical import CrossEntry, WeightPolynomial, scaled_score_terms
from collabcausal.vertical.column import ChunkedColumn, EncryptedColumn, RelayedColumn, encrypt_column, summands
from collabcausal.vertical.context import PublicContext
from collabcausal.vertical.inner_products import inner_products
from collabcausal.vertical.keys import KeyOwner
from collabcausal.vertical.packing import VALUES_PER_SLOT, Summands, check_headroom, check_shares, packed_count
from collabcausal.vertical.parameters import CKKSParameters

LabelKey = tuple[str, int | str]

__all__ = ["ARM_PRODUCT", "ZERO_CHUNK", "arm_products", "check_score_headroom", "cross_summands", "cross_totals",
           "encrypt_label_vectors", "encrypt_score_inputs", "open_totals", "packed_entries", "score_summands",
           "statistics_depth"]


def statistics_depth(n_groups: int) -> int:
    """Multiplicative depth of the statistics round: L's factor times an evaluator's plaintext product; with three
    or more column groups one more, a party's column times L's arm before the next party's (:func:`arm_products`)."""
    return 1 if n_groups == 2 else 2


def encrypt_label_vectors(owner: KeyOwner, vectors: Mapping[LabelKey, NDArray[np.float64]]
                          ) -> dict[int | str, RelayedColumn]:
    """Statistics step 1 (L): each factor ``v`` of :func:`~collabcausal.estimators.dp.effects.vertical.label_vectors`
    under L's key as one complex column ``T v + i (1 - T) v`` (``vectors["T", key] + i (vectors["1", key] -
    vectors["T", key])``: modulus ``|v| <= 1``), by its key."""
    return {key: owner.encrypt(vectors["T", key] + 1j * (vectors["1", key] - vectors["T", key]))
            for kind, key in vectors if kind == "T"}


def packed_entries(entries: Sequence[CrossEntry]) -> list[CrossEntry]:
    """``entries`` in the order the statistics round packs them: each product's treated entry, then its control
    entry (the real and imaginary parts of one slot), products in the treated arm's order."""
    control = {(e.label, e.party): e for e in entries if e.arm == 0}
    treated = [e for e in entries if e.arm == 1]
    if len(treated) != len(control) or len(treated) + len(control) != len(entries) or any(
            (e.label, e.party) not in control for e in treated):
        raise ProtocolError("the cross entries do not pair up by arm", "pass cross_entries() of the study")
    return [e for t in treated for e in (t, control[t.label, t.party])]


ARM_PRODUCT = "arm x"
"""Key of a relayed product of the label holder's arm with another party's column ``c``: ``(ARM_PRODUCT, c)``."""


ZERO_CHUNK = 2.0**-16
"""What :func:`arm_products` multiplies into the last slot of a chunk of zeros (a product of exactly zero is no
ciphertext)."""


def arm_products(arm: ChunkedColumn, design: NDArray[np.float64], own: Sequence[int]) -> list[list[bytes]]:
    """Statistics step 2 with three or more column groups (a party Pi that a later party Pj multiplies): the label
    holder's encrypted arm factor ``T + i (1 - T)`` times each of Pi's design columns ``own``, per subject (no sum),
    each column's chunks serialized. Pj totals ``sum_k a_k x_k y_k`` from them (:func:`cross_summands`); they are
    under the label holder's key, so they travel sealed to Pj (:mod:`~collabcausal.vertical.sealed`).

    A chunk of a column that is zero on every subject (a covariate at its range's midpoint) would make an empty
    ciphertext, which SEAL refuses: it is multiplied instead with :data:`ZERO_CHUNK` as its last subject's value (that
    one product off by 1.5e-5, a total by at most that: inside the depth-2 preset's error bound of 2e-5 a subject,
    which the statistics' sensitivity margin covers). Never refused: a refusal after the charge would tell the
    coordinator, with batches of one subject, that the subject's value is its range's midpoint.
    """
    slots = arm.chunk(0).context.parameters.slot_count
    out = []
    for c in own:
        chunks = []
        for i in range(arm.n_chunks):
            values = design[i * slots:(i + 1) * slots, c]
            if not np.any(values):
                values = np.zeros(values.size)
                values[-1] = ZERO_CHUNK
            chunks += (arm.chunk(i) * values).to_bytes()
        out.append(chunks)
    return out


def cross_summands(columns: Mapping[Any, ChunkedColumn], design: NDArray[np.float64],
                   entries: Sequence[CrossEntry], own: Sequence[int] | None = None) -> Summands:
    """Statistics step 2 (an evaluator), before its noise: the cross entries (in :func:`packed_entries`' order) as
    complex summands, both arms of a product from one complex sum of an encrypted factor times the evaluator's
    plaintext product of its design columns ``own`` (default: every column an entry names): the label holder's factor
    (a factor L did not send, another site's one-hot, is zero in this row group) or, for a column of another party,
    that party's product of the arm with it (``columns[ARM_PRODUCT, c]``, :func:`arm_products`).
    :func:`cross_term`'s sums over the subjects of ``design`` (the rows of one batch, or all)."""
    if list(entries) != packed_entries(entries):
        raise ProtocolError("the cross entries are not in the packed order", "pass packed_entries(cross_entries())")
    mine = None if own is None else {int(c) for c in own}
    pairs: list[tuple[Any, tuple[int, ...]]] = []
    for e in entries[0::2]:
        foreign = [] if mine is None else [c for c in e.party if c not in mine]
        if foreign:
            pairs.append(((ARM_PRODUCT, foreign[0]), tuple(c for c in e.party if c in mine)))
        else:
            pairs.append((e.label, e.party) if e.label in columns else ("arm", ()))
    products = {p: np.prod(design[:, list(p)], axis=1) if p else np.zeros(design.shape[0]) for _, p in pairs}
    sums, bounds = inner_products(columns, products, pairs)
    return Summands(sums, bounds, True)


def cross_totals(columns: Mapping[int | str, ChunkedColumn], design: NDArray[np.float64],
                 entries: Sequence[CrossEntry], noise: NDArray[np.float64], flood_sd: float,
                 rng: np.random.Generator | None = None) -> list[bytes]:
    """Statistics step 2 (P): :func:`cross_summands` packed two a slot, ``noise[e]`` (P's DP share of entry ``e``)
    on each. ``rng`` draws the flooding reproducibly (simulations, tests: NOT secure)."""
    _check_noise(noise, len(entries))
    check_shares(noise, "cross_totals()")
    summed = cross_summands(columns, design, entries)
    return summed.packed(next(iter(columns.values())).chunk(0).context, noise, flood_sd, rng)


def encrypt_score_inputs(owner: KeyOwner | PublicContext, inputs: Sequence[NDArray[np.float64]]
                         ) -> Iterator[RelayedColumn]:
    """Scores step 1 (P, the key ``owner``; or a further party with P's public context, three or more column groups):
    its parts ``(x, m0, m1)`` of the model, then of each replicate's change, encrypted one at a time as they are
    consumed (a caller that serializes each drops its ciphertexts before the next)."""
    if isinstance(owner, PublicContext):
        return (encrypt_column(owner, v) for v in inputs)
    return (owner.encrypt(v) for v in inputs)


def score_summands(
    encrypted: Sequence[ChunkedColumn], plain: Sequence[NDArray[np.float64]], treatment: NDArray[np.float64],
    outcome: NDArray[np.float64], poly: WeightPolynomial, parts: Sequence[Component], unit: float,
    others: Sequence[Sequence[ChunkedColumn]] = (),
) -> Summands:
    """Scores step 2 (L), before its noise: the summands of :func:`scaled_score_terms` on ``encrypted + others +
    plain`` parts, over the subjects of these columns (the rows of one batch, or all).

    ``encrypted`` and ``plain`` are P's and L's ``(x, m0, m1)`` of the model followed by those of each
    replicate's change; ``others`` the same inputs of every further party, encrypted under P's key (three or more
    column groups). The program runs one chunk of subjects at a time (every operation is slot-wise), so only
    one chunk's intermediates are held at once, and each chunk's terms are added into the running summands.
    """
    _check_score_inputs(encrypted, plain)
    if any(len(o) != len(encrypted) for o in others):
        raise ProtocolError(f"score inputs of {[len(o) for o in others]} columns from further parties, not "
                            f"{len(encrypted)}", "send every party's (x, m0, m1) of the model and of each change")
    counts = {c.n_chunks for c in [*encrypted, *(c for o in others for c in o)]}
    if len(counts) != 1:
        raise ProtocolError(f"score inputs of {sorted(counts)} ciphertexts", "send every input for every subject")
    chunks = counts.pop()
    context = encrypted[0].chunk(0).context
    slots = context.parameters.slot_count
    running: Summands | None = None
    for i in range(chunks):
        rows = slice(i * slots, (i + 1) * slots)
        chunk = summands(_score_terms([e.chunk(i) for e in encrypted], [p[rows] for p in plain], treatment[rows],
                                      outcome[rows], poly, parts, unit, [[c.chunk(i) for c in o] for o in others]))
        running = chunk if running is None else running.plus(chunk, context)
    assert running is not None  # a column has at least one chunk
    return running


def check_score_headroom(parameters: CKKSParameters, n_inputs: int, n: int, batch_rows: int, poly: WeightPolynomial,
                         parts: Sequence[Component], unit: float, outcome_bound: float, noise_sd: float,
                         encrypting: int = 1) -> None:
    """Refuse, before either party charges, a score program whose evaluation (:func:`score_summands`) could exceed
    ``parameters``' headroom on some subjects: a :class:`~collabcausal.errors.InputError` in one line.

    The program runs on columns of no ciphertexts (:meth:`EncryptedColumn.bounds_only`; ``encrypting`` parties'
    inputs) and plaintexts at every corner a subject can take (``T`` in {0, 1}, ``y'`` at ``+-outcome_bound``, the
    label holder's parts at ``+-1``). Each intermediate's public bound grows with its plaintexts' largest modulus,
    so if these pass, the evaluation on any subjects passes; the totals of ``n`` subjects in batches of
    ``batch_rows`` are checked with :func:`~collabcausal.vertical.packing.check_headroom`. Without it, whether the
    evaluator refused after its charge depended on its subjects (one at an edge of the outcome range, or of a clip
    limit).
    """
    corner_t, corner_y = np.array([0.0, 0.0, 1.0, 1.0]), outcome_bound * np.array([-1.0, 1.0, -1.0, 1.0])
    corner_part = np.array([1.0, -1.0, -1.0, 1.0])

    def columns() -> list[EncryptedColumn]:
        return [EncryptedColumn.bounds_only(parameters, corner_t.size) for _ in range(n_inputs)]

    terms = _score_terms(columns(), [corner_part] * n_inputs, corner_t, corner_y, poly, parts, unit,
                         [columns() for _ in range(encrypting - 1)])
    check_headroom(parameters, n, batch_rows, max(t.bound for t in terms), noise_sd, "the score program")


def _score_terms(encrypted: Sequence[EncryptedColumn], plain: Sequence[NDArray[np.float64]],
                 treatment: NDArray[np.float64], outcome: NDArray[np.float64], poly: WeightPolynomial,
                 parts: Sequence[Component], unit: float, others: Sequence[Sequence[EncryptedColumn]] = (),
                 ) -> list[EncryptedColumn]:
    """One chunk's terms of :func:`scaled_score_terms` on ``encrypted + others + plain`` parts (model, then
    changes)."""
    summed = [e + p for e, p in zip(encrypted, plain, strict=True)]
    for other in others:
        summed = [s + o for s, o in zip(summed, other, strict=True)]
    at_model = summed[:3]
    at_copies = [[a + d for a, d in zip(at_model, summed[j:j + 3], strict=True)] for j in range(3, len(summed), 3)]
    return scaled_score_terms(treatment, outcome, at_model, at_copies, poly, parts, unit)


def open_totals(owner: KeyOwner, returned: Sequence[bytes | memoryview], noise: NDArray[np.float64], grid: float
                ) -> NDArray[np.float64]:
    """Statistics step 3 (L) and scores step 3 (P): every value of the returned ciphertexts (packed in order,
    :mod:`~collabcausal.vertical.packing`) decrypted, plus this party's noise share, rounded."""
    capacity = VALUES_PER_SLOT * owner.parameters.slot_count
    expected = packed_count(np.size(noise), owner.parameters.slot_count)
    if len(returned) != expected:
        raise ProtocolError(f"{len(returned)} returned ciphertexts for {np.size(noise)} values (expected {expected})",
                            "return every value of the round, packed")
    _check_noise(noise, np.size(noise))
    return np.concatenate([owner.open(t, noise=noise[k * capacity:(k + 1) * capacity], grid=grid)
                           for k, t in enumerate(returned)])


def _check_score_inputs(encrypted: Sequence[ChunkedColumn], plain: Sequence[NDArray[np.float64]]) -> None:
    """A one-line refusal of score inputs that do not pair up."""
    if len(encrypted) != len(plain) or len(encrypted) % 3:
        raise ProtocolError(f"{len(encrypted)} encrypted and {len(plain)} plaintext score inputs",
                            "send (x, m0, m1) of the model and of each replicate's change")


def _check_noise(noise: NDArray[np.float64], length: int) -> None:
    if np.shape(noise) != (length,) or length == 0 or not np.all(np.isfinite(noise)):
        raise ProtocolError(f"{np.shape(noise)} noise shares for {length} totals", "draw one share per total")
