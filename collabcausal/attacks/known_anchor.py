"""Attack (a): the analyst knows (or guesses) the anchor and inverts a party's affine reducer.

A party's reducer is affine (standardise, then project: ``f(x) = (x - mu) M``), so from the anchor
``X_anc`` and its image ``A~ = f(X_anc)`` the analyst fits ``[X_anc, 1] B = A~`` by least squares and
solves ``[x, 1] B = x~`` for every released row (when m~ < m_j, the solution nearest the anchor's
mean). With the true anchor and m~ = m_j this returns the party's rows exactly; that is why the
anchor is a secret of the parties (:mod:`collabcausal.party.anchor`). Without it the analyst can
only guess an anchor. An analyst colluding with a party holds the key, hence the true anchor
(:mod:`collabcausal.attacks.collusion`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from numpy.typing import NDArray

from collabcausal.attacks.metrics import AttackResult, attack_result


def fit_reducer(
    anchor: NDArray[np.float64], a_tilde: NDArray[np.float64]
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Least-squares affine map ``x -> x @ linear + offset`` taking the anchor (r x m_j) to ``a_tilde`` (r x m~)."""
    design = np.column_stack([anchor, np.ones(anchor.shape[0])])
    coef = np.linalg.lstsq(design, a_tilde, rcond=None)[0]  # (m_j + 1, m~)
    return coef[:-1], coef[-1]


def invert_affine(
    linear: NDArray[np.float64], offset: NDArray[np.float64], x_tilde: NDArray[np.float64], centre: NDArray[np.float64]
) -> NDArray[np.float64]:
    """Rows ``x`` with ``x @ linear + offset = x~`` (least squares), nearest ``centre`` when not unique."""
    return centre + (x_tilde - offset - centre @ linear) @ np.linalg.pinv(linear)


def invert_reducer(
    anchor: NDArray[np.float64], a_tilde: NDArray[np.float64], x_tilde: NDArray[np.float64]
) -> NDArray[np.float64]:
    """Reconstruct the rows behind ``x_tilde`` from an anchor (true or guessed) and its image ``a_tilde``.

    Parameters
    ----------
    anchor : ndarray of shape (r, m_j)
    a_tilde : ndarray of shape (r, m~)
    x_tilde : ndarray of shape (n, m~)

    Returns
    -------
    ndarray of shape (n, m_j)
    """
    linear, offset = fit_reducer(anchor, a_tilde)
    return invert_affine(linear, offset, x_tilde, anchor.mean(axis=0))


def known_anchor_attack(
    anchor: NDArray[np.float64],
    a_tilde: NDArray[np.float64],
    x_tilde: NDArray[np.float64],
    ranges: Sequence[Sequence[float]] | Mapping,
    truth: NDArray[np.float64] | None = None,
) -> AttackResult:
    """Attack (a) with a given anchor (true: the threat; guessed: all a key-less analyst can do), scored."""
    return attack_result(invert_reducer(anchor, a_tilde, x_tilde), truth, ranges)
