"""The names under which the vertical rounds' messages carry ciphertexts, and what the coordinator forwards.

Both roles import it: the parties build and read these arrays and params
(:mod:`collabcausal.party.vertical.exchange`), the coordinator only moves them from one party's reply to the
next party's request (:mod:`collabcausal.analyst.dp_effects_vertical`), unchanged: everything in them is a
ciphertext, sealed or signed, or a signature.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from collabcausal.messages import Message

CONTEXT = "ckks_context"
COLUMNS = "ckks_columns"
TOTALS = "ckks_totals"
"""Message arrays of ciphertext bytes (capped by ``max_ciphertext_bytes``, not ``max_request_bytes``)."""
SEALED_FOR = "ckks_sealed_for"
SEALED_FROM = "ckks_sealed_from"
"""A reply's sealed ciphertexts by receiver, and a request's by sender (row-group indices): params of that name
(per index its ephemeral key, chunk counts and signature) and arrays ``<name>_<index>``."""

__all__ = ["COLUMNS", "CONTEXT", "SEALED_FOR", "SEALED_FROM", "TOTALS", "relay_sealed", "relayed_totals",
           "totals_keys"]


def totals_keys(evaluator: int) -> tuple[str, str]:
    """The array and param names of the ``evaluator``-th evaluator's totals in an open request (the first keeps
    :data:`TOTALS` and ``totals_advertisement``; three or more column groups add ``_1``, ``_2``...)."""
    suffix = "" if evaluator == 0 else f"_{evaluator}"
    return f"{TOTALS}{suffix}", f"totals_advertisement{suffix}"


def relayed_totals(reply: Message, evaluator: int) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """An evaluator's totals reply, renamed for the open request as its ``evaluator``-th (:func:`totals_keys`)."""
    array, param = totals_keys(evaluator)
    return {param: reply.params.get("totals_advertisement")}, _renamed(reply, TOTALS, array)


def relay_sealed(reply: Message, sender: int, receiver: int) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """What the coordinator forwards of ``reply`` (from row-group index ``sender``) to ``receiver``: the sealed
    ciphertexts' params and arrays, unchanged, renamed from the sender's ``sealed_for`` to the receiver's
    ``sealed_from``."""
    sealed = reply.params.get(SEALED_FOR)
    entry = sealed.get(str(receiver)) if isinstance(sealed, dict) else None
    return {str(sender): entry}, _renamed(reply, f"{SEALED_FOR}_{receiver}", f"{SEALED_FROM}_{sender}")


def _renamed(reply: Message, name: str, new: str) -> dict[str, np.ndarray]:
    """The blob arrays ``name`` and ``name + "_lengths"`` of ``reply`` (as
    :func:`~collabcausal.vertical.transcript.blob_arrays` packs them), under ``new``; none if ``reply`` has none."""
    return {new + suffix: reply.arrays[name + suffix] for suffix in ("", "_lengths") if name + suffix in reply.arrays}
