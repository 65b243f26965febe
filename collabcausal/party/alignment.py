"""Party side of subject alignment for vertical splits (parties sharing subjects, not columns).

The parties of a row group share a secret key that the analyst never sees (``[alignment]
key_file`` in ``party.toml``; make one with :func:`new_alignment_key`). Each party releases
HMAC-SHA256(key, subject id) for its rows, never the ids; the analyst intersects the digests,
orders them and tells each party which of its rows, in which order, form the study
(:mod:`collabcausal.analyst.alignment`). Without the key the digests cannot be inverted or linked
to ids by the analyst (keyed hash; honest-but-curious analyst, no collusion with a party).

Operations
----------
``aligned_ids``
    Reply array ``ids``: uint8 (n_subjects, 32), the HMACs of the party's subject ids in row order.
``align``
    Request array ``order``: int64 positions into the party's rows. The party keeps exactly those
    rows, in that order, for the rest of the study; reply params ``n_before``, ``n_after``.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from collabcausal.errors import PolicyError, ProtocolError
from collabcausal.messages import Message
from collabcausal.party.node import Party
from collabcausal.party.operations import operation
from collabcausal.party.secret_keys import new_key_file, read_key_file


def new_alignment_key(path: str | Path) -> Path:
    """Write a fresh random 256-bit key (hex) to ``path`` with mode 0600; share it within the row group."""
    return new_key_file(path)


def read_alignment_key(path: str | Path) -> bytes:
    """Read a key written by :func:`new_alignment_key`."""
    return read_key_file(path, "alignment", "new_alignment_key")


def hmac_ids(ids: Iterable[str], key: bytes) -> NDArray[np.uint8]:
    """HMAC-SHA256 of each id (UTF-8) under ``key``, as a (n, 32) uint8 array."""
    digests = b"".join(hmac.new(key, str(i).encode(), hashlib.sha256).digest() for i in ids)
    return np.frombuffer(digests, dtype=np.uint8).reshape(-1, 32).copy()


@operation("aligned_ids", parameters=())
def aligned_ids(party: Party, request: Message) -> Message:
    """HMACs of the party's subject ids, in row order (see module docstring)."""
    key = getattr(party.policy, "alignment_key", None)
    if key is None:
        raise PolicyError(
            f"party {party.name!r} has no alignment key; subject ids never leave it in clear",
            "set [alignment] key_file in party.toml to the row group's shared key",
        )
    if party.table.subject_ids is None:
        raise PolicyError(f"party {party.name!r} declares no subject id column", "set [data] subject_id")
    return Message(
        "aligned_ids", {"n_subjects": party.table.n_subjects}, {"ids": hmac_ids(party.table.subject_ids, key)}
    )


@operation("align", parameters=(), private_data=False)
def align(party: Party, request: Message) -> Message:
    """Keep the rows the analyst's ``order`` names, in that order (see module docstring)."""
    order = np.asarray(request.array("order"))
    n = party.table.n_subjects
    if (
        order.ndim != 1
        or not np.issubdtype(order.dtype, np.integer)
        or (order.size and (order.min() < 0 or order.max() >= n))
    ):
        raise ProtocolError(f"'order' must be 1-D row positions in [0, {n})", "send int64 positions")
    if np.unique(order).size != order.size:
        raise ProtocolError("'order' repeats a row", "send each aligned row once")
    t = party.table
    party.table = replace(
        t,
        covariates=np.ascontiguousarray(t.covariates[order]),
        treatment=None if t.treatment is None else t.treatment[order],
        outcome=None if t.outcome is None else t.outcome[order],
        subject_ids=None if t.subject_ids is None else t.subject_ids[order],
    )
    return Message("align", {"n_before": n, "n_after": int(order.size)})
