"""A key owner's public CKKS context, bound to its study certificate: the relay cannot substitute it.

The coordinator relays the public context from the key owner to the evaluator. A coordinator that
swapped in a context of its own would hold the secret key of everything the evaluator returns. So
the key owner signs the context's SHA-256 :func:`~collabcausal.vertical.context.fingerprint` with
its certificate (the secure-aggregation :class:`~collabcausal.secagg.identity.Signer`, under its own
kind, so an X25519 key advertisement can never pass for a context's), and the evaluator accepts a
context only if the advertisement verifies (study CA, certificate pins, study, round), names the
key owner it expects, and the fingerprint of the bytes it received is the one signed.
"""

from __future__ import annotations

from collections.abc import Mapping

from collabcausal.errors import IdentityError
from collabcausal.secagg.identity import Signer, Verifier
from collabcausal.vertical.context import PublicContext, fingerprint, load_public_context

CONTEXT_KIND = "ckks-context-advertisement"
"""What the signature covers: distinct from secure aggregation's "key-advertisement"."""

__all__ = ["CONTEXT_KIND", "advertise_context", "verified_public_context"]


def advertise_context(signer: Signer, study: str, round_id: str, public_context: bytes) -> dict[str, str]:
    """The signed advertisement of ``public_context``'s fingerprint, to send along with it."""
    return signer.advertise(study, round_id, bytes.fromhex(fingerprint(public_context)), kind=CONTEXT_KIND)


def verified_public_context(
    public_context: bytes,
    advertisement: Mapping[str, object],
    verifier: Verifier,
    *,
    key_owner: str,
    study: str,
    round_id: str,
) -> PublicContext:
    """Load ``public_context`` only if ``key_owner`` signed exactly these bytes for this study and round.

    Raises
    ------
    IdentityError
        The advertisement does not verify, is another party's, or signs another context.
    """
    party, digest = verifier.verify(advertisement, study=study, round_id=round_id, kind=CONTEXT_KIND)
    fix = "restart the round; if it recurs, the relay is substituting keys"
    if party != key_owner:
        raise IdentityError(f"the CKKS context is advertised by {party!r}, not by the key owner {key_owner!r}", fix)
    if digest.hex() != fingerprint(public_context):
        raise IdentityError(f"the CKKS context relayed for {key_owner!r} is not the one it signed", fix)
    return load_public_context(public_context)
