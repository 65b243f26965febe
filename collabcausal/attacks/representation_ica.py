"""Attack (c): ICA on the party's representation X~ alone (no anchor, no other request).

X~ = f(X) is an affine image of the party's standardised rows (reducer: standardise, then PCA),
so the independent components of X~ follow the party's non-Gaussian columns up to scale, sign and
order; public ranges and marginals fix those (:mod:`collabcausal.attacks.calibration`). The issue
measured |correlation| 0.82-1.00 on LaLonde at m~ = m_j. Works on any array, noisy ones included
(a DP representation is X~ plus Gaussian noise).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from collabcausal.attacks.calibration import PublicInfo, place_sources
from collabcausal.attacks.ica import fit_ica
from collabcausal.attacks.metrics import AttackResult, attack_result


def ica_on_representation(
    x_tilde: NDArray[np.float64], public: PublicInfo, *, seed: int = 0, truth: NDArray[np.float64] | None = None
) -> AttackResult:
    """Unmix ``x_tilde`` (n x m~) by FastICA and place the sources on the public columns.

    Parameters
    ----------
    x_tilde : ndarray of shape (n, m~)
        What the analyst received (exact or noisy).
    public : PublicInfo
        Public ranges (and marginals) of the party's m columns.
    seed : int
        FastICA's random start.
    truth : ndarray of shape (n, m), optional
        The party's rows, for scoring only.
    """
    ica = fit_ica(x_tilde, public.ranges.shape[0], seed)
    return attack_result(place_sources(ica.transform(x_tilde), public), truth, public.ranges)
