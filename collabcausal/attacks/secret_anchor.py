"""Attack (b): the anchor is secret, but its law is public; unmix its image A~ and apply the map to X~.

The analyst receives ``A~ = f(X_anc)`` and ``X~ = f(X)`` through the same affine reducer
``f(x) = x B + c``. It does not know ``X_anc``, but it knows how X_anc was drawn: column k
independent and uniform on its public range ``[lo_k, hi_k]`` (:mod:`collabcausal.party.anchor`).
With ``u_k = (x_k - mid_k) / (w_k / sqrt(12))`` (mean 0, variance 1, excess kurtosis -6/5),
``A~ = U B' + c'`` with ``B' = diag(w / sqrt(12)) B``, so

* **ICA on A~** (:func:`ica_sources`) finds unmixing directions with ``A~ W ~ U`` up to sign and
  order (uniform columns are non-Gaussian) and, as f is the same map, ``X~ W`` gives the party's
  standardised columns, placed back on the scale the anchor law fixes
  (``x_k = mid_k +- (w_k / sqrt(12)) u_k``; order and sign from the public marginals);
* **moment matching** (:func:`moment_sources`) fits ``B'`` to the second and fourth cumulants
  of A~ (``Cov A~ = B'^T B'`` and ``cum4(A~) = -6/5 sum_k b'_k (x) b'_k (x) b'_k (x) b'_k``, rows
  ``b'_k`` of B'), then ``c' = mean(A~)`` and inverts ``x~ = u B' + c'`` (nearest ``u = 0`` when
  m~ < m_j). The scale follows from the law; order and sign do not (the standardised uniforms are
  alike and symmetric), so the ``u_k`` are placed like ICA's sources.

Both work on any arrays (noisy X~ included). The truth is used for scoring only.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray
from scipy.optimize import least_squares

from collabcausal.attacks.calibration import PublicInfo, place_sources
from collabcausal.attacks.ica import fit_ica
from collabcausal.attacks.known_anchor import invert_affine
from collabcausal.attacks.metrics import AttackResult, attack_result
from collabcausal.errors import InputError
from collabcausal.randomness import child_rng

UNIFORM_EXCESS_KURTOSIS = -1.2
N_STARTS = 8


def secret_anchor_attack(
    a_tilde: NDArray[np.float64],
    x_tilde: NDArray[np.float64],
    public: PublicInfo,
    *,
    method: str = "moments",
    seed: int = 0,
    truth: NDArray[np.float64] | None = None,
) -> AttackResult:
    """Attack (b): standardised anchor-law sources of ``x_tilde`` found from ``a_tilde``, placed on the columns.

    Parameters
    ----------
    a_tilde : ndarray of shape (r, m~)
    x_tilde : ndarray of shape (n, m~)
        The party's release (exact or noisy).
    public : PublicInfo
        Public ranges (the anchor's law) and marginals (order and sign) of the party's m columns.
    method : {"ica", "moments"}
        ``"ica"``: :func:`ica_sources`; ``"moments"``: :func:`moment_sources`.
    seed : int
        FastICA's start, or the moment fit's random starts.
    truth : ndarray of shape (n, m), optional
        Scoring only.
    """
    if method not in METHODS:
        raise InputError(f"unknown secret-anchor method {method!r}", f"use one of {sorted(METHODS)}")
    sources = METHODS[method](np.asarray(a_tilde, dtype=np.float64), np.asarray(x_tilde, dtype=np.float64),
                              public.ranges.shape[0], seed)
    mid = public.ranges.mean(axis=1)
    reconstruction = place_sources(sources, public, offsets=mid, scales=public.width / np.sqrt(12.0))
    return attack_result(reconstruction, truth, public.ranges)


def ica_sources(
    a_tilde: NDArray[np.float64], x_tilde: NDArray[np.float64], n_columns: int, seed: int
) -> NDArray[np.float64]:
    """FastICA on A~; its unmixing applied to X~ gives sources standardised on the anchor rows (variance 1 there)."""
    return fit_ica(a_tilde, n_columns, seed).transform(x_tilde)


def moment_sources(
    a_tilde: NDArray[np.float64], x_tilde: NDArray[np.float64], n_columns: int, seed: int
) -> NDArray[np.float64]:
    """Fit ``B'`` to A~'s second and fourth cumulants under the uniform law; solve ``x~ = u B' + mean(A~)`` for u.

    ``seed`` draws the ``N_STARTS`` random starts of the least-squares fit; the best fit wins.
    """
    m = n_columns
    centre = a_tilde.mean(axis=0)
    y = a_tilde - centre
    # Whiten A~ so the fit is well scaled: Y = A~ W, Cov Y = I, and B'' = B' W has B''^T B'' = I.
    eigval, eigvec = np.linalg.eigh(y.T @ y / y.shape[0])
    whitener = eigvec / np.sqrt(np.maximum(eigval, np.finfo(float).tiny * eigval.max()))
    y = y @ whitener
    p = y.shape[1]
    target2 = y.T @ y / y.shape[0]
    target4 = fourth_cumulant(y)
    upper = np.triu_indices(p)

    def residuals(flat: NDArray[np.float64]) -> NDArray[np.float64]:
        b = flat.reshape(m, p)
        model4 = UNIFORM_EXCESS_KURTOSIS * np.einsum("ki,kj,kl,kh->ijlh", b, b, b, b)
        return np.concatenate([(b.T @ b - target2)[upper], (model4 - target4).ravel()])

    rng = child_rng(seed, "moment-matching")
    fits = [
        least_squares(residuals, rng.standard_normal(m * p) / np.sqrt(m), method="trf", max_nfev=2000)
        for _ in range(N_STARTS)
    ]
    b_prime = min(fits, key=lambda fit: fit.cost).x.reshape(m, p) @ np.linalg.inv(whitener)  # A~ = U B' + centre
    return invert_affine(b_prime, centre, x_tilde, np.zeros(m))


METHODS = {"ica": ica_sources, "moments": moment_sources}


def fourth_cumulant(y: NDArray[np.float64]) -> NDArray[np.float64]:
    """Sample fourth cumulant tensor of centred data ``y`` (n x p): E[y_i y_j y_k y_l] minus the Gaussian part."""
    n = y.shape[0]
    moment = np.einsum("ni,nj,nk,nl->ijkl", y, y, y, y, optimize=True) / n
    c = y.T @ y / n
    return (
        moment
        - np.einsum("ij,kl->ijkl", c, c)
        - np.einsum("ik,jl->ijkl", c, c)
        - np.einsum("il,jk->ijkl", c, c)
    )
