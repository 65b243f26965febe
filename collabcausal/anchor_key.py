"""What the parties and the analyst compute identically about a study's anchor key.

The key itself is a secret of the parties (:mod:`collabcausal.party.anchor` builds the anchor from
it); the analyst never holds it. Two things derived from it are public, and both sides compute
them with the functions here:

* the key's **fingerprint** in a study (:func:`anchor_fingerprint`): a party sends it in
  ``describe``; the analyst checks its format (:data:`FINGERPRINT_HEX` hex digits) and that every
  party of a study holds the same key;
* the **simulation-only key** of a study seed (:func:`simulation_anchor_key`): simulations give it
  to their parties, and the analyst recognises its fingerprint to say that a study's anchor is a
  simulation's. Anyone who knows the seed can rebuild it, so it is for simulations only.
"""

from __future__ import annotations

import hashlib
import hmac

_SIMULATION_LABEL = b"collabcausal simulation-only anchor key"
_FINGERPRINT_LABEL = "collabcausal anchor-key fingerprint v1|"
FINGERPRINT_HEX = 32
"""Hex digits of an anchor-key fingerprint (128 bits: two different keys collide with probability 2^-128)."""

__all__ = ["FINGERPRINT_HEX", "anchor_fingerprint", "simulation_anchor_key"]


def simulation_anchor_key(seed: int) -> bytes:
    """The anchor key of a simulation with study seed ``seed``: SIMULATION ONLY (anyone with the seed has it)."""
    return hashlib.sha256(_SIMULATION_LABEL + str(int(seed)).encode()).digest()


def anchor_fingerprint(key: bytes, study: str) -> str:
    """Proof that a party holds the study's anchor key, revealing nothing usable about the key.

    ``HMAC-SHA256(key, "collabcausal anchor-key fingerprint v1|" + study)``, the first
    :data:`FINGERPRINT_HEX` hex digits. HMAC-SHA256 under a 256-bit key is a pseudo-random function,
    so the coordinator, which sees fingerprints only, learns whether two parties hold the same key and
    nothing else; binding the study id makes a fingerprint useless in any other study, and the label
    never prefixes an anchor stream's label (``anchor/``, ``dp-anchor/``, ``dp-rotation/``,
    ``dp-order/``), so no fingerprint is an output of the anchor's generators (docs/threat-model.md).

    Parameters
    ----------
    key : bytes
        The study's anchor key.
    study : str
        The study id the analyst asked about.

    Returns
    -------
    str
        Lower-case hex of length :data:`FINGERPRINT_HEX`.
    """
    digest = hmac.new(key, (_FINGERPRINT_LABEL + study).encode(), hashlib.sha256).hexdigest()
    return digest[:FINGERPRINT_HEX]
