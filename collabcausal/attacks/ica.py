"""Independent component analysis for the attacks (scikit-learn's FastICA, seeded).

A linear representation of independent-ish, non-Gaussian columns (binary indicators, skewed
earnings, uniform anchor draws) is, up to scale, sign and order, unmixed by ICA (Hyvarinen & Oja
2000). Only non-Gaussian columns are identifiable: on jointly Gaussian data (paper 003's
synthetic Experiment I) any rotation is as good as another and ICA finds arbitrary directions.
"""

from __future__ import annotations

import warnings

import numpy as np
from numpy.typing import NDArray
from sklearn.decomposition import FastICA
from sklearn.exceptions import ConvergenceWarning

RANK_RTOL = 1e-9  # exact representations: directions below this share of the largest are round-off


def fit_ica(data: NDArray[np.float64], max_components: int, seed: int) -> FastICA:
    """FastICA on ``data`` (n x k) with at most ``max_components`` sources and the data's numerical rank.

    Non-convergence is not an error for an attacker: the last iterate is still its best guess.
    """
    centred = np.asarray(data, dtype=np.float64) - np.mean(data, axis=0)
    s = np.linalg.svd(centred, compute_uv=False)
    rank = int(np.sum(s > RANK_RTOL * s[0])) if s.size and s[0] > 0 else 1
    ica = FastICA(
        n_components=max(1, min(rank, int(max_components))),
        whiten="unit-variance",
        random_state=int(seed),
        max_iter=1000,
        tol=1e-6,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        ica.fit(data)
    return ica
