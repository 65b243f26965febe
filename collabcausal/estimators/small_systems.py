"""Small dense linear systems solved, and their conditioning checked, many times per bootstrap replicate.

A replicate of the LaLonde 2x2 table solves about 50 systems of 5 to 9 unknowns (Newton steps,
outcome regressions, the collaborative maps); ``numpy.linalg.solve`` spends three quarters of its
time at that size on per-call wrapping around the LAPACK routine it calls, and ``numpy.linalg.cond``
likewise (the outcome regressions' conditioning, from the eigenvalues of their Gram matrices).
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



def eigvalsh(a: NDArray[np.float64]) -> NDArray[np.float64]:
    """``numpy.linalg.eigvalsh(a)``, ascending: the same LAPACK routine (``dsyevd``, lower triangle), called directly.

    Parameters
    ----------
    a : ndarray of shape (k, k), symmetric

    Raises
    ------
    numpy.linalg.LinAlgError
        The algorithm did not converge, as ``numpy.linalg.eigvalsh`` raises.
    """
    w, _, info = lapack.dsyevd(a, compute_v=0, lower=1)
    if info > 0:
        raise np.linalg.LinAlgError("Eigenvalues did not converge")
    return w
