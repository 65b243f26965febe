"""The shared anchor data set (paper 003, Algorithm 2 line 1; DESIGN.md "DC-QE" step 1).

The anchor is never built from private rows, and it is a **secret of the parties**: column ``k`` is
uniform on its public range ``[lo_k, hi_k]``, drawn from a stream derived by HMAC-SHA256 from the
study's anchor key, the study id and the column's name. Every party holds the same key (a file
made by ``collabcausal certs anchor-key`` and given to every party out of band, like the row
group's alignment key; ``[anchor] key_file`` in ``party.toml``), so each builds exactly its own
columns of the same ``r x m`` matrix without seeing anyone else's, while the analyst, which never
holds the key, cannot compute X_anc. With X_anc known, the analyst could fit each party's affine
reducer by least squares from (X_anc, A~) and invert it on X~ (exact reconstruction, measured:
``collabcausal.attacks.known_anchor``); no request carries anything from which the anchor follows.

Simulations derive the key from the study seed
(:func:`~collabcausal.anchor_key.simulation_anchor_key`): the same code path, but a key anyone who
knows the seed can rebuild, so it is for simulations only. The key's fingerprint, which a party
shows in ``describe``, is :func:`~collabcausal.anchor_key.anchor_fingerprint`.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from collabcausal.errors import InputError
from collabcausal.estimators.blocks import ROW_BLOCK, row_blocks
from collabcausal.estimators.validation import check_bounds
from collabcausal.party.secret_keys import new_key_file, read_key_file


def new_anchor_key(path: str | Path) -> Path:
    """Write a fresh random 256-bit anchor key (hex) to ``path`` with mode 0600; give it to every party."""
    return new_key_file(path)


def read_anchor_key(path: str | Path) -> bytes:
    """Read a key written by :func:`new_anchor_key`; one-line :class:`ConfigError` otherwise."""
    return read_key_file(path, "anchor", "`collabcausal certs anchor-key`")


def anchor_columns(
    key: bytes,
    study: str,
    columns: Sequence[str],
    ranges: Mapping[str, Sequence[float]],
    n_anchors: int,
    *,
    purpose: str = "anchor",
    rows: slice | None = None,
) -> NDArray[np.float64]:
    """The anchor's columns ``columns`` (``n_anchors`` rows, or its rows ``rows``), uniform on their declared ranges.

    Parameters
    ----------
    key : bytes
        The study's anchor key, held by the parties only.
    study : str
        The study id: one key gives a different anchor in every study.
    columns : sequence of str
        Covariate names, in the order the party shares them.
    ranges : mapping of str to (low, high)
        Public ranges per covariate (study config, or DP range estimates).
    n_anchors : int
        Number of anchor rows ``r``.
    purpose : str
        Separates independent anchors of one study: plain DC-QE uses ``"anchor"``, DP
        representations ``"dp-anchor"`` (their exact anchor image lets an analyst recover that
        anchor, which must then say nothing about the plain one).
    rows : slice, optional
        Only these anchor rows (``start`` to ``stop``), as :func:`anchor_blocks` draws them.

    Returns
    -------
    ndarray of shape (n_anchors, len(columns)), or (rows.stop - rows.start, len(columns))
    """
    streams, bounds, n_rows = _anchor_streams(key, study, columns, ranges, n_anchors, purpose, rows)
    return _draw_uniform(streams, bounds, np.empty((n_rows, len(columns))))


def anchor_blocks(
    key: bytes,
    study: str,
    columns: Sequence[str],
    ranges: Mapping[str, Sequence[float]],
    n_anchors: int,
    *,
    purpose: str = "anchor",
    rows: slice | None = None,
) -> Iterator[NDArray[np.float64]]:
    """The rows of :func:`anchor_columns`, in blocks of :data:`~collabcausal.estimators.blocks.ROW_BLOCK` rows.

    The same numbers (each column's stream is drawn in order, block after block), for a reducer
    to transform an anchor of r = 10^6-10^7 rows without holding it whole. Parameters as in
    :func:`anchor_columns`, and ``rows``: only the anchor rows ``rows.start`` to ``rows.stop``
    (default all ``n_anchors``), the streams advanced past the rows before them (one 64-bit draw
    per value), so a block asked for alone has the numbers it has in the whole anchor. Everything
    is checked before the first block is asked for.
    """
    streams, bounds, n_rows = _anchor_streams(key, study, columns, ranges, n_anchors, purpose, rows)
    return (_draw_uniform(streams, bounds, np.empty((b.stop - b.start, len(columns)))) for b in row_blocks(n_rows))


def _anchor_streams(
    key: bytes,
    study: str,
    columns: Sequence[str],
    ranges: Mapping[str, Sequence[float]],
    n_anchors: int,
    purpose: str,
    rows: slice | None,
) -> tuple[list[np.random.Generator], list[tuple[float, float]], int]:
    """Each column's keyed stream advanced to the first row asked for, its checked range, and the rows asked for.

    Parameters as in :func:`anchor_columns`; every argument is checked here.
    """
    if int(n_anchors) < 1:
        raise InputError(f"n_anchors must be at least 1, got {n_anchors}", "use e.g. the number of subjects")
    start, stop = (0, int(n_anchors)) if rows is None else (rows.start, rows.stop)
    if not 0 <= start < stop <= int(n_anchors):
        raise InputError(
            f"anchor rows {start} to {stop} are not a non-empty part of the {n_anchors} anchor rows",
            "ask for rows start < stop within 0 to n_anchors",
        )
    bounds = []
    for name in columns:
        if name not in ranges:
            raise InputError(f"no anchor range for covariate {name!r}", "declare [low, high] for every covariate")
        bounds.append(check_bounds(tuple(ranges[name]), f"anchor range of {name!r}"))
    streams = [keyed_stream(key, f"{purpose}/{study}/{name}") for name in columns]
    for stream in streams:
        stream.bit_generator.advance(start)
    return streams, bounds, stop - start


def _draw_uniform(
    streams: Sequence[np.random.Generator], bounds: Sequence[tuple[float, float]], out: NDArray[np.float64]
) -> NDArray[np.float64]:
    """Fill ``out``'s column k with the next draws of ``streams[k]``, uniform on ``bounds[k]``; return ``out``.

    The numbers of ``Generator.uniform(lo, hi)``, ``lo + (hi - lo) U`` rounded as it rounds them
    (one 64-bit draw per value), drawn block by block of :data:`~collabcausal.estimators.blocks.ROW_BLOCK`
    rows into one reused buffer: no array allocated per column and block.
    """
    buffer = np.empty(min(ROW_BLOCK, out.shape[0]))
    for rows in row_blocks(out.shape[0]):
        draws = buffer[: rows.stop - rows.start]
        for k, (stream, (lo, hi)) in enumerate(zip(streams, bounds, strict=True)):
            stream.random(out=draws)
            draws *= hi - lo
            draws += lo
            out[rows, k] = draws
    return out


def keyed_stream(key: bytes, label: str) -> np.random.Generator:
    """A Generator keyed by HMAC-SHA256(key, label): unpredictable without the key."""
    digest = hmac.new(key, label.encode(), hashlib.sha256).digest()
    words = [int.from_bytes(digest[i : i + 4], "little") for i in range(0, 32, 4)]
    return np.random.default_rng(np.random.SeedSequence(words))
