"""Public caps on what one request may ask of a party, checked before anything is charged or computed.

A hostile analyst chooses the sizes in its requests: a ``dp_histogram`` of 10^12 cells was charged
to the ledger and then died with MemoryError, 2 x 10^7 cells ran 120 s in 2.6 GB. The caps below
are part of the party's public policy (``[policy]`` in ``party.toml``, all optional, safe
defaults) and :meth:`RequestLimits.check` runs in
:meth:`collabcausal.party.policy.PartyPolicy.authorize`, i.e. before the ledger is charged and
before any private value is read. Over gRPC the byte cap is also handed to the wire
(:func:`request_byte_limit`), so an oversized request is refused from its header, before its
arrays are buffered.

==========================  ==========  =========================================================
key                         default     what it bounds
==========================  ==========  =========================================================
``max_cells``               100000      entries a ``dp_histogram`` releases: cells x arms x
                                        (1 + summed columns)
``max_request_bytes``       268435456   bytes of all arrays of one request (256 MiB)
``max_ciphertext_bytes``    2147483648  bytes of a request's ciphertext arrays (those named
                                        ``ckks_*``: the vertical rounds' relayed columns; 100,000
                                        subjects' score round sends 0.7 GB), counted apart from
                                        ``max_request_bytes`` (2 GiB)
``max_params_bytes``        1048576     bytes of the request's params as JSON (1 MiB)
``max_params_depth``        8           nesting levels of the params (the project's requests
                                        use at most 4)
``max_list_length``         10000       items in any one list or mapping of the params (sums,
                                        quantiles, partition centers, ...)
``max_moment_requests``     32          ``weighted_moments`` samples answered per study (a
                                        request stacking k counts k), persisted
                                        (:mod:`collabcausal.party.differencing`)
==========================  ==========  =========================================================

The anchor rows (``min_anchors``/``max_anchors``) and the components of a representation
(``max_components``) are capped by the reduction rules of :mod:`collabcausal.party.policy`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from collabcausal.errors import ConfigError, PolicyError
from collabcausal.messages import Message, nesting

CIPHERTEXT_PREFIX = "ckks_"
"""Arrays of ciphertext bytes, sealed ones included (:mod:`collabcausal.vertical.relay`), capped by
``max_ciphertext_bytes``."""
CIPHERTEXT_OPERATIONS = frozenset({"vertical_statistics_totals", "vertical_statistics_open", "vertical_scores_totals",
                                   "vertical_scores_open", "vertical_scores_parts"})
"""The operations whose requests carry ciphertexts (the wire admits ``max_ciphertext_bytes`` more for a party
that allows one)."""


@dataclass(frozen=True)
class RequestLimits:
    """A party's public caps on request sizes (see the module docstring for keys and defaults)."""

    max_cells: int = 100_000
    max_request_bytes: int = 256 << 20
    max_ciphertext_bytes: int = 2 << 30
    max_params_bytes: int = 1 << 20
    max_params_depth: int = 8
    max_list_length: int = 10_000
    max_moment_requests: int = 32

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"policy {f.name} must be a positive integer, got {value!r}", f"e.g. {f.default}")

    def check(self, who: str, request: Message) -> None:
        """Refuse a request above any cap with a one-line :class:`PolicyError` naming the key.

        Reads only the request (never the party's data), so it runs before any charge.
        """
        op = request.operation
        sizes = {name: int(np.asarray(a).nbytes) for name, a in request.arrays.items()}
        cipher = sum(size for name, size in sizes.items() if name.startswith(CIPHERTEXT_PREFIX))
        self._cap(who, op, "max_request_bytes", sum(sizes.values()) - cipher, "bytes of arrays", "send fewer rows")
        self._cap(who, op, "max_ciphertext_bytes", cipher, "bytes of ciphertexts", "send fewer subjects per row group")
        depth, longest = nesting(dict(request.params), self.max_params_depth)
        self._cap(who, op, "max_params_depth", depth, "levels of nested params", "send flat params")
        self._cap(who, op, "max_list_length", longest, "items in one list of its params", "send shorter lists")
        text = json.dumps(dict(request.params), default=str)
        self._cap(who, op, "max_params_bytes", len(text.encode()), "bytes of params", "send smaller params")
        if op == "dp_histogram":
            what = "histogram entries (cells x arms x (1 + sums))"
            self._cap(who, op, "max_cells", histogram_entries(request.params), what, "ask for fewer cells")

    def _cap(self, who: str, op: str, key: str, value: int, what: str, fix: str) -> None:
        limit = getattr(self, key)
        if value > limit:
            raise PolicyError(
                f"{who} refuses {op!r}: {value} {what}, above its {key} of {limit}",
                f"{fix}, or ask the party to raise [policy] {key}",
            )


def histogram_entries(params: Mapping[str, Any]) -> int:
    """Numbers a ``dp_histogram`` request would release: cells x arms x (1 + summed columns).

    Counted from the public partition spec without building it (a grid's cells are the product
    of its cuts; a centers partition has one cell per center). A malformed spec counts as 0 and
    is refused by the operation itself, still before any charge.
    """
    spec = params.get("partition")
    if not isinstance(spec, Mapping):
        return 0
    cuts = spec.get("n_cells") if spec.get("kind") == "grid" else None
    if spec.get("kind") == "centers" and isinstance(spec.get("centers"), list):
        cells = len(spec["centers"])
    elif isinstance(cuts, list) and all(isinstance(k, (int, float)) and math.isfinite(k) for k in cuts):
        cells = math.prod(max(int(k), 0) for k in cuts)  # floats counted too (the partition refuses them)
    else:
        return 0
    sums = params.get("sums", [])
    arms = 2 if params.get("by_arm", False) else 1
    return cells * arms * (1 + (len(sums) if isinstance(sums, list) else 0))


def request_byte_limit(policy: Any) -> int | None:
    """The most array bytes a party's policy admits, for the wire to refuse bigger requests unread:
    ``max_request_bytes``, plus ``max_ciphertext_bytes`` when it allows an operation that receives ciphertexts."""
    limits = getattr(policy, "limits", None)
    if limits is None:
        return None
    receives = any(op in CIPHERTEXT_OPERATIONS for op in getattr(policy, "operations", ()))
    return limits.max_request_bytes + (limits.max_ciphertext_bytes if receives else 0)
