"""The key owner: one round's CKKS secret key, which never leaves it.

One :class:`KeyOwner` per party per round. It sends :meth:`KeyOwner.public_context` (read by the
evaluator with :func:`~collabcausal.vertical.context.load_public_context`), encrypts its own columns
and opens the totals that come back.

Decryption (:meth:`KeyOwner.open`) follows Li & Micciancio (2021, "On the Security of Homomorphic
Encryption on Approximate Numbers", EUROCRYPT, section 1): an approximate decryption that leaves the
key holder as computed reveals the error and hence the secret key, so ``open`` adds the caller's DP
noise share to every value it returns and rounds it to a grid, refuses a share of 0, and returns only
the slot parts that carry the round's values (:mod:`~collabcausal.vertical.packing`), never the flooded rest.
"""

from __future__ import annotations

import math

import numpy as np
import tenseal as ts
from numpy.typing import ArrayLike, NDArray
from tenseal import sealapi

from collabcausal.errors import InputError
from collabcausal.vertical.column import RelayedColumn, encrypt_column
from collabcausal.vertical.context import PublicContext, fingerprint, parameters_header
from collabcausal.vertical.packing import VALUES_PER_SLOT, check_shares
from collabcausal.vertical.parameters import CKKSParameters
from collabcausal.vertical.seal_io import frame, load_seal, save_seal, untag
from collabcausal.vertical.total import rotation_steps

__all__ = ["KeyOwner"]


class KeyOwner:
    """Holds one round's CKKS secret key: encrypts its own columns, opens returned totals with noise.

    Parameters
    ----------
    parameters : CKKSParameters
        A preset (:func:`~collabcausal.vertical.parameters.preset`) deep enough for the program.
    """

    def __init__(self, parameters: CKKSParameters) -> None:
        self.parameters = parameters
        bits = list(parameters.coeff_mod_bit_sizes)
        context = ts.context(ts.SCHEME_TYPE.CKKS, parameters.poly_modulus_degree, coeff_mod_bit_sizes=bits)
        context.global_scale = 2.0**parameters.scale_bits
        context.generate_relin_keys()
        seal_context = context.seal_context().data
        tool = seal_context.key_context_data().galois_tool()
        elements = [tool.get_elt_from_step(s) for s in rotation_steps(parameters)]
        galois = sealapi.KeyGenerator(seal_context, context.secret_key().data).create_galois_keys(elements)
        public = context.serialize(save_public_key=True, save_secret_key=False, save_galois_keys=False,
                                   save_relin_keys=True)
        self._public_bytes = frame(parameters_header(parameters), public, save_seal(galois))
        self._context = context
        # Its own view (its parameters, its key, the fingerprint it signs), not a second copy of the context.
        self.public = PublicContext(parameters, context, None, fingerprint(self._public_bytes))

    def public_context(self) -> bytes:
        """The blob to send (through the relay) to the evaluator, with no secret key; sign its fingerprint."""
        return self._public_bytes

    def encrypt(self, values: ArrayLike) -> RelayedColumn:
        """Encrypt ``n`` values of modulus at most 1 (``INPUT_BOUND``; complex values fill both parts of a slot)
        into ceil(n / slot_count) seeded symmetric ciphertexts (:func:`~collabcausal.vertical.column.encrypt_column`):
        the column as sent."""
        return encrypt_column(self.public, values, self._context.secret_key().data)

    def open(self, ciphertext: bytes, *, noise: ArrayLike, grid: float) -> NDArray[np.float64]:
        """Decrypt the values a returned ciphertext carries, add ``noise`` to each and round to a multiple of ``grid``.

        Parameters
        ----------
        ciphertext : bytes
            What :func:`~collabcausal.vertical.packing.pack_totals` (or :meth:`EncryptedColumn.total`) returned,
            under this owner's key.
        noise : array of float
            This party's DP noise share of each value, drawn from the project's sampler, nonzero: as many as the
            ciphertext carries values (value ``2j`` is slot ``j``'s real part, ``2j + 1`` its imaginary part).
        grid : float
            Rounding step, no finer than ``parameters.error_bound`` (a total of n subjects is off by
            at most n times that: choose the grid from the release's n and its noise).

        Returns
        -------
        ndarray
            ``grid * round((value + noise) / grid)`` for each value: never an un-noised decryption, nor any
            slot part past the values.
        """
        shares = check_shares(noise, "open()")
        grid = float(grid)
        bound = self.parameters.error_bound
        if not (math.isfinite(grid) and grid >= bound):
            raise InputError(
                f"grid {grid!r} is finer than the CKKS error bound {bound:g}", f"round to a grid of at least {bound:g}"
            )
        if shares.size > VALUES_PER_SLOT * self.parameters.slot_count:
            raise InputError(f"{shares.size} values cannot come from one ciphertext of {self.parameters.slot_count} "
                             "slots", "open each ciphertext with its own values' shares")
        seal_context = self._context.seal_context().data
        payload = untag(bytes(ciphertext), self.public.fingerprint, "the returned total")
        loaded = load_seal(sealapi.Ciphertext(), seal_context, payload, "the returned total")
        plain = sealapi.Plaintext()
        sealapi.Decryptor(seal_context, self._context.secret_key().data).decrypt(loaded, plain)
        slots = np.asarray(sealapi.CKKSEncoder(seal_context).decode_complex(plain))
        values = np.column_stack([slots.real, slots.imag]).ravel()[: shares.size]
        return np.round((values + shares) / grid) * grid
