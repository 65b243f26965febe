"""Attack (e): the analyst colludes with one party of the row group and attacks that party's partners.

Every party holds the study's anchor key, so a colluding party hands the analyst the key (hence
the whole anchor ``X_anc``, :func:`collabcausal.party.anchor.anchor_columns`, for any party's
public column names) and its own raw columns. For a partner's release (``A~ = f(X_anc)``,
``X~ = f(X)``) the analyst fits the partner's affine reducer from the anchor
(:func:`collabcausal.attacks.known_anchor.fit_reducer`) and then, per released row:

* with m~ = m_j, inverts it: the rows come back exactly;
* with m~ < m_j the map loses m_j - m~ directions; the analyst fills them with what is public:
  each binary column (public marginal on the two range ends) is enumerated over its two values,
  the continuous columns are predicted from their part of the image by the best linear predictor
  under the anchor's law (a regression fitted on the anchor), clipped to their ranges, and the
  combination whose image is nearest the released row wins. With LaLonde's two binary columns per
  party and m~ = 3 this is exact for every subject.

Works on noisy releases as well (nearest image in the least-squares sense). The truth is used for
scoring only.
"""

from __future__ import annotations

from itertools import product

import numpy as np
from numpy.typing import NDArray

from collabcausal.attacks.calibration import PublicInfo
from collabcausal.attacks.known_anchor import fit_reducer
from collabcausal.attacks.metrics import AttackResult, attack_result
from collabcausal.errors import InputError

MAX_BINARY = 12  # 2**12 combinations per row at most


def colluding_reconstruction(
    anchor: NDArray[np.float64],
    a_tilde: NDArray[np.float64],
    x_tilde: NDArray[np.float64],
    public: PublicInfo,
    *,
    truth: NDArray[np.float64] | None = None,
) -> AttackResult:
    """Reconstruct a partner's rows from its release and the anchor the colluding party supplies.

    Parameters
    ----------
    anchor : ndarray of shape (r, m)
        The partner's anchor columns, built from the key the colluder hands over.
    a_tilde, x_tilde : ndarray
        The partner's release (r x m~ and n x m~).
    public : PublicInfo
        Public ranges (and marginals: binary columns are enumerated) of the partner's m columns.
    truth : ndarray of shape (n, m), optional
        Scoring only.
    """
    linear, offset = fit_reducer(anchor, a_tilde)
    binary = public.binary()
    if binary.sum() > MAX_BINARY:
        raise InputError(f"{int(binary.sum())} binary columns: too many to enumerate", f"at most {MAX_BINARY}")
    lo, hi = public.ranges[:, 0], public.ranges[:, 1]
    cont = ~binary
    # Best linear predictor of the continuous columns from their image x_C L_C, fitted on the anchor.
    image = anchor[:, cont] @ linear[cont]
    predictor = np.linalg.lstsq(np.column_stack([image, np.ones(anchor.shape[0])]), anchor[:, cont], rcond=None)[0]
    x = np.asarray(x_tilde, dtype=np.float64)
    best = np.full(x.shape[0], np.inf)
    out = np.empty((x.shape[0], linear.shape[0]))
    for values in product(*[(lo[k], hi[k]) for k in np.flatnonzero(binary)]):
        v = np.asarray(values, dtype=np.float64)
        part = x - offset - v @ linear[binary]
        guess = np.empty_like(out)
        guess[:, binary] = v
        guess[:, cont] = np.clip(np.column_stack([part, np.ones(x.shape[0])]) @ predictor, lo[cont], hi[cont])
        distance = np.linalg.norm(guess @ linear + offset - x, axis=1)
        better = distance < best
        out[better], best[better] = guess[better], distance[better]
    return attack_result(out, truth, public.ranges)
