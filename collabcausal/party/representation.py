"""Party side of DC-QE: describe the table, build intermediate representations.

Operations (paper 003, Algorithm 2 lines 2-6; DESIGN.md "DC-QE" steps 1-3):

``describe``
    Public metadata: subject count, shared covariate names, whether the party holds labels, and
    the fingerprint of its anchor key for the study asked about.
``dc_representation``
    Fit the private reducer f_ij on the party's rows (optionally a bootstrap resample of them,
    given as ``rows``), and return X~_ij = f_ij(X_ij) and A~_ij = f_ij(X_anc_j); the label holder
    adds treatment and outcome of the same rows. These representations are NOT differentially
    private: their protection is that f_ij stays with the party (paper 003, section 4.2).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

import numpy as np
from numpy.typing import NDArray

from collabcausal.anchor_key import anchor_fingerprint
from collabcausal.errors import InputError, PolicyError, ProtocolError
from collabcausal.estimators.blocks import row_blocks
from collabcausal.messages import Message
from collabcausal.party.anchor import anchor_blocks, anchor_columns
from collabcausal.party.node import Party
from collabcausal.party.operations import operation
from collabcausal.party.reducer import StandardizedPCA


@operation("describe", private_data=False)
def describe(party: Party, request: Message) -> Message:
    """Public metadata about the party's table (no values).

    ``ids_sha256`` is the SHA-256 of the party's ordered subject ids (when it has an id column):
    parties of one row group must hold the same subjects in the same order, and equal digests
    show it without revealing an id. ``anchor_fingerprint`` (:func:`anchor_fingerprint` of the
    party's anchor key and the request's ``study``; ``None`` without a key or a study) shows the same of the
    anchor key: parties with different keys would build different anchors, and the collaborative
    representation would silently mix incompatible coordinates.
    """
    study = request.params.get("study")
    if study is not None and not isinstance(study, str):
        raise ProtocolError(f"describe request has study {study!r}, not a study id", "send the study id")
    ids = party.table.subject_ids
    digest = None if ids is None else hashlib.sha256("\x1f".join(ids.tolist()).encode()).hexdigest()
    return Message(
        "describe",
        {
            "party": party.name,
            "n_subjects": party.table.n_subjects,
            "covariates": list(party.table.covariate_names),
            "has_labels": party.table.has_labels,
            "ids_sha256": digest,
            "anchor_fingerprint": None
            if party.anchor_key is None or study is None
            else anchor_fingerprint(party.anchor_key, study),
        },
    )


@operation("dc_representation", exact_rows=True)
def dc_representation(party: Party, request: Message) -> Message:
    """Intermediate representations X~_ij and A~_ij of the party's (resampled) rows.

    Request params: ``study`` (study id), ``n_anchors``, ``anchor_ranges`` ({column: [lo, hi]}),
    ``n_components`` (m~_ij: an int, capped at the party's covariates, or a variance fraction),
    ``labels`` (bool: include treatment and outcome).
    Request arrays: optional ``rows`` (int64 positions into the party's table).
    Reply arrays: ``x_tilde`` (n x m~), ``a_tilde`` (r x m~), and ``treatment``/``outcome``.
    """
    p = request.params
    try:
        n_anchors, n_components = int(p["n_anchors"]), p["n_components"]
        ranges: Mapping[str, list[float]] = p["anchor_ranges"]
    except KeyError as exc:
        raise ProtocolError(f"dc_representation request lacks {exc.args[0]!r}", "send a complete request") from None
    if party.anchor_key is None:
        raise PolicyError(
            f"party {party.name!r} has no anchor key, so it cannot build the study's secret anchor",
            "give every party the study's anchor key: [anchor] key_file in party.toml",
        )
    rows = selected_rows(party, request)
    X = party.table.covariates if rows is None else party.table.covariates[rows]
    if isinstance(n_components, int):
        n_components = min(n_components, X.shape[1])
    reducer = (party.reducer_factory or StandardizedPCA)(n_components)
    x_tilde = reducer.fit_transform(X)
    columns = party.table.covariate_names
    study = str(p.get("study", ""))
    bounds = tuple((c, *map(float, ranges[c])) for c in columns if c in ranges)
    a_tilde = _anchor_image(reducer, party.anchor_key, study, columns, bounds, n_anchors)
    arrays = {"x_tilde": np.asarray(x_tilde, dtype=np.float64), "a_tilde": a_tilde}
    if p.get("labels", False):
        if not party.table.has_labels:
            raise InputError(f"party {party.name!r} holds no treatment/outcome", "ask the row group's label holder")
        t, y = party.table.treatment, party.table.outcome
        arrays["treatment"] = t if rows is None else t[rows]
        arrays["outcome"] = y if rows is None else y[rows]
    return Message("dc_representation", {"n_components": int(arrays["x_tilde"].shape[1])}, arrays)


def selected_rows(party: Party, request: Message) -> NDArray[np.int64] | None:
    """The request's optional ``rows`` array, checked against the table size."""
    if "rows" not in request.arrays:
        return None
    rows = np.asarray(request.arrays["rows"])
    if rows.ndim != 1 or not np.issubdtype(rows.dtype, np.integer):
        raise ProtocolError("'rows' must be a 1-D integer array", "send subject positions as int64")
    if rows.size and (rows.min() < 0 or rows.max() >= party.table.n_subjects):
        raise ProtocolError(
            f"'rows' points outside the party's {party.table.n_subjects} subjects",
            "align subjects before resampling",
        )
    return rows.astype(np.int64, copy=False)


CACHED_ANCHOR_VALUES = 1 << 20
"""Anchors of at most this many values (r x m, 8 MB) are kept for the next request (:func:`_anchor`);
larger ones are generated and reduced block by block, never held whole."""


def _anchor_image(
    reducer: Any,
    key: bytes,
    study: str,
    columns: tuple[str, ...],
    ranges: tuple[tuple[str, float, float], ...],
    n_anchors: int,
) -> NDArray[np.float64]:
    """A~ = f(X_anc): the reducer applied to the study's anchor (row by row, so block by block)."""
    if n_anchors * len(columns) <= CACHED_ANCHOR_VALUES:
        return np.asarray(reducer.transform(_anchor(key, study, columns, ranges, n_anchors)), dtype=np.float64)
    blocks = anchor_blocks(key, study, columns, {name: (lo, hi) for name, lo, hi in ranges}, n_anchors)
    out = None
    for rows, block in zip(row_blocks(n_anchors), blocks, strict=True):
        image = np.asarray(reducer.transform(block), dtype=np.float64)
        if out is None:
            out = np.empty((n_anchors, image.shape[1]))
        out[rows] = image
    return out


_ANCHORS: dict[tuple[str, ...], tuple[tuple[object, ...], NDArray[np.float64]]] = {}
"""The anchor kept for each set of columns: the request it answers and its values (:func:`_anchor`)."""


def _anchor(
    key: bytes, study: str, columns: tuple[str, ...], ranges: tuple[tuple[str, float, float], ...], n_anchors: int
) -> NDArray[np.float64]:
    """The study's anchor, kept for the next request of the same columns (a study's B + 1 requests share it).

    Only the latest per set of columns is kept: a party (whose columns are its table's) holds one,
    so an analyst varying ``n_anchors`` or the study cannot pin several matrices of up to
    ``max_anchors`` x m floats in the party's memory (issue 10); the parties of one simulation
    process keep theirs side by side instead of rebuilding them in turn.
    """
    request = (key, study, ranges, n_anchors)
    kept = _ANCHORS.get(columns)
    if kept is None or kept[0] != request:
        out = anchor_columns(key, study, columns, {name: (lo, hi) for name, lo, hi in ranges}, n_anchors)
        out.setflags(write=False)
        kept = _ANCHORS[columns] = (request, out)
    return kept[1]
