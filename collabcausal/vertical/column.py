"""An encrypted column: n values under one party's CKKS key, with numpy's elementwise semantics.

The same score program runs on numpy arrays and on :class:`EncryptedColumn`: ``+ - *`` and unary
``-`` with another column (same context, same n), a numpy (n,) array or a scalar act slot-wise as
numpy's do; :meth:`EncryptedColumn.polyval` is
``numpy.polynomial.polynomial.polyval(x, coefficients)`` (ascending powers, power basis).

Values live in chunks of ``slot_count`` slots; the last chunk's unused slots ("padding") start at 0
and go through the same operations, so each holds the same known value, :attr:`pad` (what the
program gives at 0, tracked in float64); :meth:`total` subtracts them from slot 0.

What is checked where (fixed-point overflow):

- :func:`encrypt_column` refuses values (real, or complex: two values a slot) of modulus over 1 (``INPUT_BOUND``);
- every column carries a public :attr:`bound` on its |values|, from ``INPUT_BOUND`` through each
  operation (|a| + |b| for sums, |a| |b| for products, max |array| for plaintexts, sum |c_k| for a
  polynomial); an operation whose bound exceeds the preset's ``max_value`` is refused before it runs;
- :meth:`polyval` refuses a column whose bound exceeds 1 (the power basis is only accurate, and
  only bounded, on [-1, 1]: scale the column and the coefficients first);
- :func:`totals` refuses when the sum of all slots, the noise or 10 flooding sd could exceed
  ``max_value``.

Not checkable by the evaluator: that a key owner's ciphertexts hold values in [-1, 1] (no range
proofs); a key owner who encrypts larger values gets a wrong (overflowed) total, and docs say what
a malicious key owner can learn.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import numpy as np
import tenseal as ts
from numpy.typing import ArrayLike, NDArray
from tenseal import sealapi

from collabcausal.errors import InputError, ProtocolError
from collabcausal.vertical.context import PublicContext
from collabcausal.vertical.packing import FLOOD_TAIL, Summands
from collabcausal.vertical.parameters import INPUT_BOUND, CKKSParameters
from collabcausal.vertical.seal_io import save_seal, tag, tenseal_vector, untag

__all__ = ["FLOOD_TAIL", "ChunkedColumn", "EncryptedColumn", "RelayedColumn", "encrypt_column", "summands", "totals"]


def encrypt_column(context: PublicContext, values: ArrayLike, secret_key: Any = None) -> RelayedColumn:
    """Encrypt a 1-D array of values of modulus at most 1 (real, or complex: a slot holds two) under ``context``.

    With the key owner's SEAL ``secret_key`` (:meth:`~collabcausal.vertical.keys.KeyOwner.encrypt`) each chunk
    is a symmetric encryption saved in SEAL's seeded form: its second component, uniformly random, travels as
    the seed it is expanded from, so a chunk is half the bytes of a public-key encryption (Microsoft SEAL's
    ``Encryptor::encrypt_symmetric``; RLWE under the same key, as secure). Without it, anyone holding the public
    context encrypts under its public key (a coordinator could: the transcripts' signatures close that).
    The result is the column as sent: its chunks' bytes (:meth:`RelayedColumn.to_bytes`).
    """
    arr = np.asarray(values)
    if arr.ndim != 1 or arr.size == 0:
        raise InputError(f"encrypt() needs a non-empty 1-D array, got shape {arr.shape}", "pass one column")
    arr = arr.astype(np.complex128 if np.iscomplexobj(arr) else np.float64)
    if not np.all(np.isfinite(arr)):
        raise InputError("encrypt() got non-finite values", "drop or impute them before encrypting")
    largest = float(np.max(np.abs(arr)))
    if largest > INPUT_BOUND:
        raise InputError(
            f"encrypt() got |value| {largest:g} > {INPUT_BOUND:g}", "scale the column into [-1, 1] by a public bound"
        )
    parameters = context.parameters
    slots, scale = parameters.slot_count, 2.0**parameters.scale_bits
    symmetric = None if secret_key is None else sealapi.Encryptor(context.seal_context, secret_key)
    chunks = []
    for start in range(0, arr.size, slots):
        plain = sealapi.Plaintext()
        context.encoder.encode(_padded(arr, start, slots), scale, plain)
        if symmetric is None:
            ciphertext: Any = sealapi.Ciphertext()
            context.encryptor.encrypt(plain, ciphertext)
        else:
            ciphertext = symmetric.encrypt_symmetric(plain)
        chunks.append(tag(context.fingerprint, tenseal_vector(save_seal(ciphertext), slots, scale)))
    return RelayedColumn(context, chunks, arr.size)


def summands(columns: Sequence[EncryptedColumn]) -> Summands:
    """Each column's chunks added slot-wise: the :class:`~collabcausal.vertical.packing.Summands` of their sums over
    the n subjects (a public bound from each column's, its padding's known value as the correction).

    Refused (one line): columns of another context.
    """
    if not columns or any(c.context.fingerprint != columns[0].context.fingerprint for c in columns):
        raise InputError("totals() takes one or more columns of one context", "total each key owner's columns apart")
    slots = columns[0].context.parameters.slot_count
    summed = []
    for column in columns:
        chunk = column._chunks[0]
        for other in column._chunks[1:]:
            chunk = chunk + other
        summed.append(chunk.ciphertext()[0])
    return Summands(summed, [len(c._chunks) * slots * c.bound for c in columns], False,
                    np.array([-(len(c._chunks) * slots - c.n) * c.pad for c in columns]))


def totals(columns: Sequence[EncryptedColumn], noise: ArrayLike, *, flood_sd: float,
           rng: np.random.Generator | None = None) -> list[bytes]:
    """The sum over the n subjects of each column plus its ``noise`` share, packed two a slot into as few
    ciphertexts as hold them (:func:`summands`, :func:`~collabcausal.vertical.packing.pack_totals`: every other
    slot part flooded).

    ``rng`` draws the flooding noise reproducibly (simulations, tests: NOT secure). Refused (one line): columns
    of another context, a total that may overflow the preset's headroom, a program that left no level for the
    mask.
    """
    return summands(columns).packed(columns[0].context, noise, flood_sd, rng)


class ChunkedColumn(Protocol):
    """A column a program can read one chunk at a time (:class:`EncryptedColumn`, :class:`RelayedColumn`)."""

    n: int

    @property
    def n_chunks(self) -> int:
        """Ciphertexts holding the column."""

    def chunk(self, i: int) -> EncryptedColumn:
        """Chunk ``i`` alone, as a column."""


class EncryptedColumn:
    """``n`` values under one key owner's public context, in chunks of ``slot_count`` slots.

    Build it with :meth:`~collabcausal.vertical.keys.KeyOwner.encrypt` or :meth:`from_bytes`.
    ``bound`` is a public upper bound on |values|; ``pad`` the value of the unused slots.
    """

    __array_ufunc__ = None  # numpy array (op) column defers to the column's reflected operator

    def __init__(self, context: PublicContext, chunks: list[ts.CKKSVector], n: int, *, bound: float, pad: float):
        self.context = context
        self._chunks = chunks
        self.n = int(n)
        self.bound = float(bound)
        self.pad = float(pad)

    @classmethod
    def from_bytes(cls, context: PublicContext, chunks: Sequence[bytes], n: int) -> EncryptedColumn:
        """A column of fresh encryptions received from its key owner (values in [-1, 1], padding 0)."""
        slots = context.parameters.slot_count
        if int(n) != n or n < 1 or len(chunks) != math.ceil(n / slots):
            raise ProtocolError(
                f"{len(chunks)} ciphertexts cannot hold n = {n!r} values at {slots} slots each",
                "send every chunk of the column and its n",
            )
        payloads = [untag(bytes(c), context.fingerprint, "a column chunk") for c in chunks]
        try:
            vectors = [ts.ckks_vector_from(context.context, p) for p in payloads]
        except (ValueError, TypeError, RuntimeError):
            raise ProtocolError("a column chunk is not a ciphertext of this context", "resend the column") from None
        if any(v.size() != slots for v in vectors):
            raise ProtocolError(f"a column chunk does not hold {slots} slots", "resend the column unchanged")
        return cls(context, vectors, int(n), bound=INPUT_BOUND, pad=0.0)

    @classmethod
    def bounds_only(cls, parameters: CKKSParameters, n: int) -> EncryptedColumn:
        """A key owner's column of ``n`` values in [-1, 1] with no ciphertexts: a program run on it computes
        nothing and checks each intermediate's public bound against ``parameters``' headroom, as it will on the
        key owner's columns (a party runs its program on it before it charges)."""
        return cls(PublicContext(parameters, None, None, "bounds only"), [], n, bound=INPUT_BOUND, pad=0.0)

    @property
    def n_chunks(self) -> int:
        """Ciphertexts holding the column."""
        return len(self._chunks)

    def chunk(self, i: int) -> EncryptedColumn:
        """Chunk ``i`` alone, as a column of its own values (the last one's padding keeps :attr:`pad`)."""
        slots = self.context.parameters.slot_count
        n = min(slots, self.n - i * slots)
        if not 0 <= i < len(self._chunks):
            raise InputError(f"chunk {i} of a column of {len(self._chunks)}", "ask for 0 .. n_chunks - 1")
        return EncryptedColumn(self.context, [self._chunks[i]], n, bound=self.bound, pad=self.pad)

    def to_bytes(self) -> list[bytes]:
        """The serialized chunks (TenSEAL's format, one per ``slot_count`` values, tagged with the context)."""
        return [tag(self.context.fingerprint, c.serialize()) for c in self._chunks]

    def __add__(self, other: object) -> EncryptedColumn:
        return self._combine(other, lambda a, b: a + b, lambda a, b: a + b, lambda a, b: a + b)

    __radd__ = __add__

    def __sub__(self, other: object) -> EncryptedColumn:
        return self._combine(other, lambda a, b: a - b, lambda a, b: a + b, lambda a, b: a - b)

    def __rsub__(self, other: object) -> EncryptedColumn:
        return (-self) + other

    def __mul__(self, other: object) -> EncryptedColumn:
        return self._combine(other, lambda a, b: a * b, lambda a, b: a * b, lambda a, b: a * b)

    __rmul__ = __mul__

    def __neg__(self) -> EncryptedColumn:
        return self._result(lambda: self._run(lambda c: -c), self.bound, -self.pad)

    def polyval(self, coefficients: Sequence[float]) -> EncryptedColumn:
        """``sum_k coefficients[k] * x^k`` slot-wise (ascending powers), for a column within [-1, 1].

        TenSEAL evaluates each power by repeated squaring: ``ceil(log2(degree)) + 1`` levels (a
        degree-8 polynomial takes 4).
        """
        c = np.asarray(coefficients, dtype=np.float64)
        if c.ndim != 1 or c.size < 2 or not np.all(np.isfinite(c)):
            raise InputError("polyval() needs finite coefficients of degree >= 1", "pass c_0, c_1, ... as floats")
        if self.bound > INPUT_BOUND:
            raise InputError(
                f"polyval() needs a column within [-1, 1], this one is bounded by {self.bound:g}",
                f"multiply the column by 1/{self.bound:g} and rescale the coefficients",
            )
        pad = float(np.polynomial.polynomial.polyval(self.pad, c))
        return self._result(lambda: self._run(lambda v: v.polyval(c.tolist())), float(np.sum(np.abs(c))), pad)

    def known_bound(self, bound: float) -> EncryptedColumn:
        """The same column with a tighter public bound than interval arithmetic gives, proved by the caller.

        E.g. ``|T_k(x)| <= 1`` for a Chebyshev polynomial of ``|x| <= 1``, or a score's bound derived
        from its model (collabcausal/estimators/dp/effects/vertical.py). It rests, as every bound here
        does, on the key owner's values lying in [-1, 1]; a looser ``bound`` than the current one is ignored.
        """
        bound = float(bound)
        if not (math.isfinite(bound) and bound > 0):
            raise InputError(f"a known bound must be a positive number, got {bound!r}", "pass the proved bound")
        return EncryptedColumn(self.context, self._chunks, self.n, bound=min(self.bound, bound), pad=self.pad)

    def total(self, *, noise: float, flood_sd: float, rng: np.random.Generator | None = None) -> bytes:
        """The sum over the n subjects in slot 0's real part, plus ``noise``; every other slot part flooded; one
        ciphertext (:func:`totals` of this column alone).

        Parameters
        ----------
        noise : float
            The evaluator's DP noise share (from the project's sampler), added to the sum; nonzero.
        flood_sd : float
            sd of the independent Gaussian noise in every other real and imaginary slot part.
        rng : numpy.random.Generator, optional
            Draw the flooding noise reproducibly (simulations, tests: NOT secure); by default it is
            :func:`~collabcausal.vertical.total.flooding_noise` from a fresh OS-entropy key.

        Returns
        -------
        bytes
            One SEAL ciphertext, for the key owner's :meth:`~collabcausal.vertical.keys.KeyOwner.open`.
        """
        return totals([self], [noise], flood_sd=flood_sd, rng=rng)[0]

    def ciphertext(self, i: int) -> Any:
        """Chunk ``i``'s SEAL ciphertext (a copy), for arithmetic TenSEAL lacks
        (:mod:`~collabcausal.vertical.inner_products`)."""
        return self._chunks[i].ciphertext()[0]

    def _combine(
        self,
        other: object,
        op: Callable[[Any, Any], Any],
        bound: Callable[[float, float], float],
        pad: Callable[[float, float], float],
    ) -> EncryptedColumn:
        if isinstance(other, EncryptedColumn):
            if other.context.fingerprint != self.context.fingerprint:
                raise InputError(
                    "the two columns are under different CKKS contexts", "compute with columns of one key owner"
                )
            if other.n != self.n:
                raise InputError(f"columns of {self.n} and {other.n} values", "align both parties' subjects first")
            pairs = zip(self._chunks, other._chunks, strict=True)
            return self._result(
                lambda: [op(a, b) for a, b in pairs], bound(self.bound, other.bound), pad(self.pad, other.pad)
            )
        if isinstance(other, np.ndarray):
            arr = self._plain(other)
            slots = self.context.parameters.slot_count
            return self._result(
                lambda: [op(c, _padded(arr, i * slots, slots)) for i, c in enumerate(self._chunks)],
                bound(self.bound, float(np.max(np.abs(arr)))),
                pad(self.pad, 0.0),
            )
        if isinstance(other, numbers.Real):
            s = float(other)
            if not math.isfinite(s):
                raise InputError(f"a scalar operand must be finite, got {other!r}", "pass a finite number")
            return self._result(lambda: self._run(lambda c: op(c, s)), bound(self.bound, abs(s)), pad(self.pad, s))
        return NotImplemented

    def _plain(self, other: NDArray[Any]) -> NDArray[np.float64]:
        if other.shape != (self.n,):
            raise InputError(f"a plaintext operand of shape {other.shape} for a column of {self.n}", "pass shape (n,)")
        arr = np.asarray(other, dtype=np.float64)
        if not np.all(np.isfinite(arr)):
            raise InputError("a plaintext operand has non-finite values", "drop or impute them first")
        return arr

    def _run(self, op: Callable[[Any], Any]) -> list[Any]:
        return [op(c) for c in self._chunks]

    def _result(self, compute: Callable[[], list[Any]], bound: float, pad: float) -> EncryptedColumn:
        """Check the result's public bound, then compute its chunks (TenSEAL refuses a level too many)."""
        parameters = self.context.parameters
        if bound > parameters.max_value:
            raise InputError(
                f"an intermediate bounded by {bound:g} exceeds the preset's headroom {parameters.max_value:g}",
                "scale the inputs or plaintext factors down",
            )
        try:
            chunks = compute()
        except ValueError as error:
            if "scale out of bounds" not in str(error):
                raise
            raise InputError(
                f"the program is deeper than the preset's {parameters.depth} levels",
                "use preset(depth) with the program's multiplicative depth",
            ) from None
        return EncryptedColumn(self.context, chunks, self.n, bound=bound, pad=pad)


def _padded(arr: NDArray[Any], start: int, slots: int) -> list[Any]:
    piece = np.zeros(slots, dtype=arr.dtype)
    part = arr[start : start + slots]
    piece[: part.size] = part
    return piece.tolist()


class RelayedColumn:
    """A key owner's column as relayed: its chunks' bytes, each read into a ciphertext only when asked for.

    An evaluator holding many relayed columns (the scores round: 27 of 13 chunks at 100,000 subjects) reads
    them chunk by chunk (:meth:`chunk`) and never holds every ciphertext at once; :meth:`load` reads all.
    """

    def __init__(self, context: PublicContext, chunks: Sequence[bytes], n: int) -> None:
        slots = context.parameters.slot_count
        if int(n) != n or n < 1 or len(chunks) != math.ceil(n / slots):
            raise ProtocolError(f"{len(chunks)} ciphertexts cannot hold n = {n!r} values at {slots} slots each",
                                "send every chunk of the column and its n")
        self.context, self._chunks, self.n = context, list(chunks), int(n)

    @property
    def n_chunks(self) -> int:
        """Ciphertexts holding the column."""
        return len(self._chunks)

    def chunk(self, i: int) -> EncryptedColumn:
        """Chunk ``i`` read into a ciphertext (checked as :meth:`EncryptedColumn.from_bytes` checks a column)."""
        slots = self.context.parameters.slot_count
        if not 0 <= i < len(self._chunks):
            raise InputError(f"chunk {i} of a column of {len(self._chunks)}", "ask for 0 .. n_chunks - 1")
        return EncryptedColumn.from_bytes(self.context, [self._chunks[i]], min(slots, self.n - i * slots))

    def load(self) -> EncryptedColumn:
        """Every chunk read into ciphertexts."""
        return EncryptedColumn.from_bytes(self.context, self._chunks, self.n)

    def to_bytes(self) -> list[bytes | memoryview]:
        """The chunks' bytes as held (what the key owner sends)."""
        return list(self._chunks)
