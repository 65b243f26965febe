"""Small dense linear systems solved many times per bootstrap replicate.

A replicate of the LaLonde 2x2 table solves about 50 systems of 5 to 9 unknowns (Newton steps,
outcome regressions, the collaborative maps); ``numpy.linalg.solve`` spends three quarters of its
time at that size on per-call wrapping around the LAPACK routine it calls.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray
from scipy.linalg import lapack


def solve(a: NDArray[np.float64], b: NDArray[np.float64]) -> NDArray[np.float64]:
    """``numpy.linalg.solve(a, b)``: the same LU with partial pivoting (LAPACK ``dgesv``), called directly.

    Parameters
    ----------
    a : ndarray of shape (k, k)
    b : ndarray of shape (k,) or (k, r)

    Raises
    ------
    numpy.linalg.LinAlgError
        ``a`` is exactly singular (a zero pivot), as ``numpy.linalg.solve`` raises.
    """
    _, _, x, info = lapack.dgesv(a, b)
    if info > 0:
        raise np.linalg.LinAlgError("Singular matrix")
    return x
