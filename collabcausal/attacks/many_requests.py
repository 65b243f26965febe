"""Attack (d): many requests for the same subjects, combined.

A malicious analyst may ask a party for several representations in one study (up to the
party's ``max_representation_requests``): other m~, other r, and "bootstrap resamples" of its own
choosing (``rows``). Each resample refits the reducer, so subject i comes back through a slightly
different affine map ``f_b(x_i) = x_i B_b + c_b`` each time. Stacking a subject's rows from all
requests side by side gives an affine image of x_i whose rank is that of ``[B_1 ... B_K]``: up to
m_j even when every single request keeps m~ < m_j, because resampled PCA axes differ. ICA on the
stack (at the stack's numerical rank, at most m_j) then works as on a full-rank X~.

Requests that differ only in m~ (nested principal axes) or r (the anchor side) add nothing to X~.
Noisy releases (DP) stack too: their noise then averages, as the composed budget allows.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from collabcausal.attacks.calibration import PublicInfo, place_sources
from collabcausal.attacks.ica import fit_ica
from collabcausal.attacks.metrics import AttackResult, attack_result
from collabcausal.errors import InputError


def stack_requests(
    releases: Sequence[tuple[NDArray[np.int64] | None, NDArray[np.float64]]], n_subjects: int
) -> tuple[NDArray[np.float64], NDArray[np.bool_]]:
    """Each subject's rows from every release, side by side.

    Parameters
    ----------
    releases : sequence of (rows, x_tilde)
        ``rows`` the subject positions the analyst sent (None: all subjects in order) and the
        ``x_tilde`` it got back (one row per entry of ``rows``).
    n_subjects : int

    Returns
    -------
    stacked : ndarray of shape (n_subjects, sum of m~)
        A subject's first row in each release (zeros where a release missed it).
    covered : ndarray of bool
        Subjects present in every release.
    """
    blocks, covered = [], np.ones(n_subjects, dtype=bool)
    for rows, x_tilde in releases:
        positions = np.arange(n_subjects) if rows is None else np.asarray(rows, dtype=np.int64)
        if positions.shape[0] != x_tilde.shape[0]:
            raise InputError(
                f"a release has {x_tilde.shape[0]} rows for {positions.shape[0]} requested subjects",
                "pair each x_tilde with the rows it answered",
            )
        first = np.full(n_subjects, -1)
        first[positions[::-1]] = np.arange(positions.size)[::-1]  # the first occurrence wins
        covered &= first >= 0
        blocks.append(np.where((first >= 0)[:, None], x_tilde[np.maximum(first, 0)], 0.0))
    return np.hstack(blocks), covered


def ica_on_requests(
    releases: Sequence[tuple[NDArray[np.int64] | None, NDArray[np.float64]]],
    public: PublicInfo,
    *,
    n_subjects: int | None = None,
    seed: int = 0,
    truth: NDArray[np.float64] | None = None,
) -> AttackResult:
    """ICA on the stacked releases of the subjects every release covers; the others get the public means.

    ``n_subjects`` (public: ``describe``) defaults to the rows of ``truth``, else of a release made
    without ``rows``, else the largest requested position + 1. ``truth`` (n x m) is for scoring only.
    """
    if n_subjects is not None:
        n = int(n_subjects)
    elif truth is not None:
        n = truth.shape[0]
    else:
        n = max(x.shape[0] if rows is None else int(np.max(rows)) + 1 for rows, x in releases)
    stacked, covered = stack_requests(releases, n)
    if not covered.any():
        raise InputError("no subject is in every release", "combine releases that share subjects")
    ica = fit_ica(stacked[covered], public.ranges.shape[0], seed)
    reconstruction = np.tile(public.means(), (n, 1))
    reconstruction[covered] = place_sources(ica.transform(stacked[covered]), public)
    return attack_result(reconstruction, truth, public.ranges)
