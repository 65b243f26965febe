"""The key owner: one round's CKKS secret key, which never leaves it.

One :class:`KeyOwner` per party per round. It sends :meth:`KeyOwner.public_context` (read by the
evaluator with :func:`~collabcausal.vertical.context.load_public_context`), encrypts its own columns
and opens the totals that come back.

Decryption (:meth:`KeyOwner.open`) follows Li & Micciancio (2021, "On the Security of Homomorphic
Encryption on Approximate Numbers", EUROCRYPT, section 1): an approximate decryption that leaves the
key holder as computed reveals the error and hence the secret key, so ``open`` adds the caller's DP
noise share and rounds to a grid before anything is returned, and refuses noise 0.
"""

from __future__ import annotations

import math

import numpy as np
import tenseal as ts
from numpy.typing import ArrayLike
from tenseal import sealapi

from collabcausal.errors import InputError
from collabcausal.vertical.column import EncryptedColumn, encrypt_column
from collabcausal.vertical.context import load_public_context, parameters_header
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
        elements = [tool.get_elt_from_step(s) for s in rotation_steps(parameters.slot_count)]
        galois = sealapi.KeyGenerator(seal_context, context.secret_key().data).create_galois_keys(elements)
        public = context.copy()
        public.make_context_public()
        header = parameters_header(parameters)
        self._public_bytes = frame(header, public.serialize(save_galois_keys=False), save_seal(galois))
        self._context = context
        self.public = load_public_context(self._public_bytes)

    def public_context(self) -> bytes:
        """The blob to send (through the relay) to the evaluator, with no secret key; sign its fingerprint."""
        return self._public_bytes

    def encrypt(self, values: ArrayLike) -> EncryptedColumn:
        """Encrypt ``n`` values in [-1, 1] (``INPUT_BOUND``) into ceil(n / slot_count) ciphertexts."""
        return encrypt_column(self.public, values)

    def open(self, ciphertext: bytes, *, noise: float, grid: float) -> float:
        """Decrypt slot 0 of a returned total, add ``noise`` and round to a multiple of ``grid``.

        Parameters
        ----------
        ciphertext : bytes
            What :meth:`EncryptedColumn.total` returned, under this owner's key.
        noise : float
            This party's DP noise share, drawn from the project's sampler; nonzero.
        grid : float
            Rounding step, no finer than ``parameters.error_bound`` (a total of n subjects is off by
            at most n times that: choose the grid from the release's n and its noise).

        Returns
        -------
        float
            ``grid * round((slot_0 + noise) / grid)``: never the un-noised decryption.
        """
        noise, grid = float(noise), float(grid)
        if not math.isfinite(noise) or noise == 0.0:
            raise InputError(f"open() needs a nonzero noise share, got {noise!r}", "draw it from the DP sampler")
        bound = self.parameters.error_bound
        if not (math.isfinite(grid) and grid >= bound):
            raise InputError(
                f"grid {grid!r} is finer than the CKKS error bound {bound:g}", f"round to a grid of at least {bound:g}"
            )
        seal_context = self._context.seal_context().data
        payload = untag(bytes(ciphertext), self.public.fingerprint, "the returned total")
        loaded = load_seal(sealapi.Ciphertext(), seal_context, payload, "the returned total")
        plain = sealapi.Plaintext()
        sealapi.Decryptor(seal_context, self._context.secret_key().data).decrypt(loaded, plain)
        value = sealapi.CKKSEncoder(seal_context).decode_double(plain)[0]
        return float(np.round((value + noise) / grid) * grid)
