"""Attack (a): the analyst knows (or guesses) the anchor and inverts a party's affine reducer.

A party's reducer is affine (standardise, then project: ``f(x) = (x - mu) M``), so from the anchor
``X_anc`` and its image ``A~ = f(X_anc)`` the analyst fits ``[X_anc, 1] B = A~`` by least squares and
solves ``[x, 1] B = x~`` for every released row (minimum-norm when m~ < m_j). With the true anchor
and m~ = m_j this returns the party's rows exactly; that is why the anchor is a secret of the
parties (:mod:`collabcausal.party.anchor`). Without it the analyst can only guess an anchor.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray


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
    design = np.column_stack([anchor, np.ones(anchor.shape[0])])
    coef = np.linalg.lstsq(design, a_tilde, rcond=None)[0]  # (m_j + 1, m~)
    linear, offset = coef[:-1], coef[-1]
    return (x_tilde - offset) @ np.linalg.pinv(linear)
