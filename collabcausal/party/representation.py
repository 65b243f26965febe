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

    The analyst may ask for A~_ij in blocks of anchor rows (``anchor_rows``), so that it never
    holds every party's r x m~ image at once: the request for the block starting at row 0 fits the
    reducer and returns X~_ij with it; the same request for a later block is answered from that
    fit (the party keeps its latest one) and returns that block of A~_ij only. A later block
    reveals nothing the whole image would not, and it is not a new fit, so it is not counted
    against ``max_representation_requests`` (:func:`continues_representation`).

    The fit depends on neither ``anchor_rows`` nor ``labels``: a request from row 0 that differs
    from the latest fit's only in them (the settings of a simulation ask a party with and without
    its labels for the same resample) projects with that fit instead of refitting it. It is still
    a request from row 0, counted and audited as any, and its reply is the one a new fit would
    give: X~_ij and A~_ij of the same deterministic fit, the labels only when it asks for them.
"""

from __future__ import annotations

import hashlib
import threading
import weakref
from collections.abc import Mapping
from typing import Any

import numpy as np
from numpy.typing import NDArray

from collabcausal.anchor_key import anchor_fingerprint
from collabcausal.errors import InputError, PolicyError, ProtocolError
from collabcausal.estimators.blocks import ColumnMoments, row_blocks
from collabcausal.messages import Message
from collabcausal.party.anchor import anchor_blocks, anchor_columns
from collabcausal.party.node import Party, request_fingerprint
from collabcausal.party.operations import operation
from collabcausal.party.reducer import StandardizedPCA


@operation("describe", parameters=(), private_data=False)
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


@operation("dc_representation", parameters={"n_anchors", "anchor_ranges", "n_components", "labels", "anchor_rows"},
           exact_rows=True, out_of_core=True)
def dc_representation(party: Party, request: Message) -> Message:
    """Intermediate representations X~_ij and A~_ij of the party's (resampled) rows.

    Request params: ``study`` (study id), ``n_anchors``, ``anchor_ranges`` ({column: [lo, hi]}),
    ``n_components`` (m~_ij: an int, capped at the party's covariates, or a variance fraction),
    ``labels`` (bool: include treatment and outcome), optional ``anchor_rows`` ([start, stop]:
    the block of anchor rows to return, default all r; see the module docstring).
    Request arrays: optional ``rows`` (int64 positions into the party's table).
    Reply arrays: ``a_tilde`` ((stop - start) x m~); from anchor row 0 also ``x_tilde`` (n x m~) and
    ``treatment``/``outcome``.
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
    start, stop = requested_anchor_block(request) or (0, n_anchors)
    if not 0 <= start < stop <= n_anchors:
        raise ProtocolError(
            f"anchor_rows [{start}, {stop}] is not a block of the {n_anchors} anchor rows",
            "ask for 0 <= start < stop <= n_anchors",
        )
    same_fit = {k: v for k, v in p.items() if k not in _NOT_FITTED}
    fit = request_fingerprint(Message(request.operation, same_fit, request.arrays))
    # the fit is also that of the party's current table and reducer factory (align replaces the table)
    fit = (fit, party.reducer_factory)
    fitted, table, reducer = _FITTED.get(party, (None, lambda: None, None))
    fitted = fitted if table() is party.table else None
    arrays = {}
    if start == 0:
        reducer = _represent(party, request, n_components, None if fitted != fit else reducer, arrays)
        _FITTED[party] = (fit, weakref.ref(party.table), reducer)
    elif fitted != fit:
        raise ProtocolError(
            f"dc_representation asks for anchor rows from {start}, but party {party.name!r} holds no reducer "
            "fitted by the same request",
            "ask for the block from anchor row 0 first, with the same request",
        )
    columns = party.table.covariate_names
    bounds = tuple((c, *map(float, ranges[c])) for c in columns if c in ranges)
    arrays["a_tilde"] = _anchor_image(
        reducer, party.anchor_key, str(p.get("study", "")), columns, bounds, n_anchors, slice(start, stop)
    )
    return Message("dc_representation", {"n_components": int(arrays["a_tilde"].shape[1])}, arrays)


_FITTED: weakref.WeakKeyDictionary[Party, tuple[tuple[str, Any], Any, Any]] = weakref.WeakKeyDictionary()
"""Each party's latest fitted reducer, with the fingerprint of the request (but :data:`_NOT_FITTED`) that fitted
it and the party's reducer factory then, and a weak reference to the table it was fitted on: a request from
another table (``align`` replaces it) or factory is a new fit, and the old table is not kept alive."""

_NOT_FITTED = frozenset({"anchor_rows", "labels"})
"""The ``dc_representation`` params that do not enter the reducer's fit (what is released, not from what)."""


def _represent(
    party: Party, request: Message, n_components: int | float, reducer: Any, arrays: dict[str, NDArray[Any]]
) -> Any:
    """Put X~ of the requested rows (and the labels if asked) into ``arrays``; return the reducer that made it.

    ``reducer`` is the party's fit of these rows and ``n_components`` (kept from a request that
    differed only in :data:`_NOT_FITTED`), or None: a new one is fitted on the rows.
    """
    rows = selected_rows(party, request)
    fit = reducer is None
    if fit:
        if isinstance(n_components, int):
            n_components = min(n_components, len(party.table.covariate_names))
        reducer = (party.reducer_factory or StandardizedPCA)(n_components)
    if party.table.in_memory:
        X = party.table.covariates if rows is None else party.table.covariates.take(rows, axis=0)  # 4x X[rows]'s speed
        # fit, then transform as a reused fit does: a reducer's fit_transform may round otherwise (scikit-learn's PCA)
        x_tilde = (reducer.fit(X) if fit else reducer).transform(X)
    else:
        x_tilde = _reduce_out_of_core(party, reducer, rows, fit=fit)
    arrays["x_tilde"] = np.asarray(x_tilde, dtype=np.float64)
    if request.params.get("labels", False):
        if not party.table.has_labels:
            raise InputError(f"party {party.name!r} holds no treatment/outcome", "ask the row group's label holder")
        t, y = (party.table.treatment, party.table.outcome) if party.table.in_memory else party.table.labels()
        arrays["treatment"] = t if rows is None else t[rows]
        arrays["outcome"] = y if rows is None else y[rows]
    return reducer


def requested_anchor_block(request: Message) -> tuple[int, int] | None:
    """A ``dc_representation`` request's ``anchor_rows`` as (start, stop), or None when it asks for all."""
    block = request.params.get("anchor_rows")
    if block is None:
        return None
    if (
        not isinstance(block, (list, tuple))
        or len(block) != 2
        or any(isinstance(v, bool) or not isinstance(v, int) for v in block)
    ):
        raise ProtocolError(f"anchor_rows must be two integers [start, stop], got {block!r}", "send [start, stop]")
    return int(block[0]), int(block[1])


def continues_representation(request: Message) -> bool:
    """True for a ``dc_representation`` request of a later anchor block (``anchor_rows`` not from row 0).

    It is answered from the reducer that the same request from row 0 fitted, or refused: never by
    a new fit, so the policy does not count it as a representation request. A malformed
    ``anchor_rows`` is False here (counted) and refused by the operation.
    """
    if request.operation != "dc_representation":
        return False
    try:
        block = requested_anchor_block(request)
    except ProtocolError:
        return False
    return block is not None and block[0] != 0


def _reduce_out_of_core(
    party: Party, reducer: Any, rows: NDArray[np.int64] | None, *, fit: bool
) -> NDArray[np.float64]:
    """With ``fit``, fit the reducer on the merged moments of the table's blocks; project the blocks (two passes)."""
    if rows is not None:
        raise PolicyError(
            f"party {party.name} reads its table out of core, so it does not answer a resample (rows)",
            "run the study without party-side resamples, or give the party a table that fits in memory (one file)",
        )
    if fit and not hasattr(reducer, "fit_moments"):
        raise PolicyError(
            f"party {party.name}'s reducer {type(reducer).__name__} cannot be fitted out of core (no fit_moments)",
            "use the default StandardizedPCA for an out-of-core table",
        )
    names = party.table.covariate_names
    if fit:
        merged = party.table.reduce_rows(lambda _, X, t, y: ColumnMoments.of(X), names, ColumnMoments.merge)
        reducer.fit_moments(merged)
    return party.table.project_rows(reducer.transform, names, reducer.n_components_)


def selected_rows(party: Party, request: Message) -> NDArray[np.int64] | None:
    """The request's optional ``rows`` array, checked against the table size."""
    if "rows" not in request.arrays:
        return None
    rows = np.asarray(request.arrays["rows"])
    if rows.ndim != 1 or rows.dtype.kind not in "iu":
        raise ProtocolError("'rows' must be a 1-D integer array", "send subject positions as int64")
    if rows.size and (rows.min() < 0 or rows.max() >= party.table.n_subjects):
        raise ProtocolError(
            f"'rows' points outside the party's {party.table.n_subjects} subjects",
            "align subjects before resampling",
        )
    return rows.astype(np.int64, copy=False)


CACHED_ANCHOR_VALUES = 1 << 20
"""Blocks of anchor rows of at most this many values (rows x m, 8 MB) are kept for the next
request (:func:`_anchor`); larger ones are generated and reduced block by block, never held whole."""


def _anchor_image(
    reducer: Any,
    key: bytes,
    study: str,
    columns: tuple[str, ...],
    ranges: tuple[tuple[str, float, float], ...],
    n_anchors: int,
    rows: slice,
) -> NDArray[np.float64]:
    """Rows ``rows`` of A~ = f(X_anc): the reducer applied to those anchor rows (row by row, so block by block)."""
    if (rows.stop - rows.start) * len(columns) <= CACHED_ANCHOR_VALUES:
        anchor = _anchor(key, study, columns, ranges, n_anchors, rows.start, rows.stop)
        return np.asarray(reducer.transform(anchor), dtype=np.float64)
    blocks = anchor_blocks(key, study, columns, {name: (lo, hi) for name, lo, hi in ranges}, n_anchors, rows=rows)
    out = None
    for part, block in zip(row_blocks(rows.stop - rows.start), blocks, strict=True):
        image = np.asarray(reducer.transform(block), dtype=np.float64)
        if out is None:
            out = np.empty((rows.stop - rows.start, image.shape[1]))
        out[part] = image
    return out


_ANCHORS: dict[tuple[str, ...], tuple[tuple[object, ...], NDArray[np.float64]]] = {}
"""The anchor block kept for each set of columns: the request it answers and its values (:func:`_anchor`)."""

_ANCHOR_LOCKS: dict[tuple[str, ...], threading.Lock] = {}
"""One lock per set of columns, held while its anchor block is looked up or built (:func:`_anchor`)."""


def _anchor(
    key: bytes,
    study: str,
    columns: tuple[str, ...],
    ranges: tuple[tuple[str, float, float], ...],
    n_anchors: int,
    start: int,
    stop: int,
) -> NDArray[np.float64]:
    """Anchor rows ``start`` to ``stop``, kept for the next request of the same columns.

    A study's B + 1 requests share its anchor (or its first block). Only the latest block per set
    of columns is kept: a party (whose columns are its table's) holds one, so an analyst varying
    ``n_anchors``, the block or the study cannot pin several blocks of up to 8 MB in the party's
    memory (issue 10); the parties of one simulation process keep theirs side by side instead of
    rebuilding them in turn, and the parties of one column group share each block (asked
    concurrently, :class:`~collabcausal.protocol.inprocess.InProcessGrid` with ``workers``, they
    wait for the one building it rather than build it again).
    """
    request = (key, study, ranges, n_anchors, start, stop)
    with _ANCHOR_LOCKS.setdefault(columns, threading.Lock()):
        kept = _ANCHORS.get(columns)
        if kept is None or kept[0] != request:
            by_name = {name: (lo, hi) for name, lo, hi in ranges}
            out = anchor_columns(key, study, columns, by_name, n_anchors, rows=slice(start, stop))
            out.setflags(write=False)
            kept = _ANCHORS[columns] = (request, out)
    return kept[1]
