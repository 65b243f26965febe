"""The public CKKS context: what an evaluator holds to encrypt and compute, never to decrypt.

A key owner's :meth:`~collabcausal.vertical.keys.KeyOwner.public_context` is one blob: the parameters
(JSON), TenSEAL's context with the public and relinearization keys but no secret key and no Galois
keys, and SEAL Galois keys for the rotation steps of
:func:`~collabcausal.vertical.total.rotation_steps` only. :func:`load_public_context` reads it and
refuses a context carrying a secret key; its :func:`fingerprint` (SHA-256) is what the key owner
signs (collabcausal/vertical/advertisement.py).
"""

from __future__ import annotations

import hashlib
import json
from functools import cached_property
from typing import Any

import tenseal as ts
from tenseal import sealapi

from collabcausal.errors import InputError, ProtocolError
from collabcausal.vertical.parameters import CKKSParameters
from collabcausal.vertical.seal_io import load_seal, unframe
from collabcausal.vertical.total import rotation_steps

__all__ = ["PublicContext", "fingerprint", "load_public_context", "parameters_header"]


def parameters_header(parameters: CKKSParameters) -> bytes:
    """The JSON header of a public context blob: the parameters, canonical."""
    return json.dumps(
        {
            "poly_modulus_degree": parameters.poly_modulus_degree,
            "coeff_mod_bit_sizes": list(parameters.coeff_mod_bit_sizes),
            "scale_bits": parameters.scale_bits,
            "error_bound": parameters.error_bound,
            "rotation_base": parameters.rotation_base,
        },
        sort_keys=True,
    ).encode("utf-8")


def fingerprint(public_context: bytes) -> str:
    """SHA-256 of a public context blob, hex: what the key owner signs and the evaluator checks."""
    return hashlib.sha256(public_context).hexdigest()


class PublicContext:
    """A key owner's public context as the evaluator holds it: encrypts and computes, cannot decrypt.

    Build it with :func:`load_public_context`. ``context`` is TenSEAL's context (public key,
    relinearization keys), ``galois_keys`` SEAL's rotation keys, ``fingerprint`` the blob's SHA-256.
    """

    def __init__(self, parameters: CKKSParameters, context: ts.Context, galois_keys: Any, fingerprint: str) -> None:
        self.parameters = parameters
        self.context = context
        self.galois_keys = galois_keys
        self.fingerprint = fingerprint

    @property
    def seal_context(self) -> Any:
        """The SEAL context under TenSEAL's."""
        return self.context.seal_context().data

    @cached_property
    def evaluator(self) -> Any:
        """A SEAL evaluator (rotations, masking)."""
        return sealapi.Evaluator(self.seal_context)

    @cached_property
    def encoder(self) -> Any:
        """A SEAL CKKS encoder (complex slots)."""
        return sealapi.CKKSEncoder(self.seal_context)

    @cached_property
    def encryptor(self) -> Any:
        """A SEAL encryptor under the key owner's public key."""
        return sealapi.Encryptor(self.seal_context, self.context.public_key().data)


def load_public_context(data: bytes) -> PublicContext:
    """Read a public context blob from the relay.

    Raises
    ------
    ProtocolError
        Not a blob of :meth:`KeyOwner.public_context`, a context carrying a secret key, one without
        public or relinearization keys, or one that does not match its stated parameters.
    """
    header, tenseal_bytes, galois_bytes = unframe(data, 3, "the public CKKS context")
    fix = "send KeyOwner.public_context() unchanged"
    try:
        stated = json.loads(header.decode("utf-8"))
        parameters = CKKSParameters(
            int(stated["poly_modulus_degree"]),
            tuple(int(b) for b in stated["coeff_mod_bit_sizes"]),
            int(stated["scale_bits"]),
            float(stated["error_bound"]),
            int(stated["rotation_base"]),
        )
        context = ts.context_from(tenseal_bytes)
    except (ValueError, KeyError, TypeError, RuntimeError, InputError):
        raise ProtocolError("the public CKKS context is not readable", fix) from None
    if context.has_secret_key() or not context.is_public():
        raise ProtocolError("the public CKKS context carries a secret key", "send KeyOwner.public_context() only")
    if not (context.has_public_key() and context.has_relin_keys()):
        raise ProtocolError("the public CKKS context lacks its public or relinearization keys", fix)
    key_data = context.seal_context().data.key_context_data()
    found = (key_data.parms().poly_modulus_degree(), key_data.total_coeff_modulus_bit_count(), key_data.chain_index())
    expected = (parameters.poly_modulus_degree, parameters.total_bits, len(parameters.coeff_mod_bit_sizes) - 1)
    if found != expected or context.global_scale != 2.0**parameters.scale_bits:
        raise ProtocolError("the public CKKS context does not match its stated parameters", fix)
    galois_keys = load_seal(sealapi.GaloisKeys(), context.seal_context().data, galois_bytes, "the Galois keys")
    tool = key_data.galois_tool()
    if not all(galois_keys.has_key(tool.get_elt_from_step(s)) for s in rotation_steps(parameters)):
        raise ProtocolError("the public CKKS context lacks Galois keys for the rotations of a total", fix)
    return PublicContext(parameters, context, galois_keys, fingerprint(bytes(data)))
