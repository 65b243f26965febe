"""Attack (b): the anchor is secret, but its law is public; unmix its image A~ and apply the map to X~.

The analyst receives ``A~ = f(X_anc)`` and ``X~ = f(X)`` through the same affine reducer
``f(x) = x B + c``. It does not know ``X_anc``, but it knows how X_anc was drawn: column k
independent and uniform on its public range ``[lo_k, hi_k]`` (:mod:`collabcausal.party.anchor`).
With ``u_k = (x_k - mid_k) / (w_k / sqrt(12))`` (mean 0, variance 1, excess kurtosis -6/5),
``A~ = U B' + c'`` with ``B' = diag(w / sqrt(12)) B``, so

* **ICA on A~** (:func:`ica_on_anchor`) finds unmixing directions with ``A~ W ~ U`` up to sign and
  order (uniform columns are non-Gaussian) and, as f is the same map, ``X~ W`` gives the party's
  standardised columns, placed back on the scale the anchor law fixes
  (``x_k = mid_k +- (w_k / sqrt(12)) u_k``; order and sign from the public marginals);
* **moment matching** (:func:`moment_matching`) fits ``B'`` to the second and fourth cumulants
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
from collabcausal.randomness import child_rng

UNIFORM_EXCESS_KURTOSIS = -1.2
N_STARTS = 8


def ica_on_anchor(
    a_tilde: NDArray[np.float64],
    x_tilde: NDArray[np.float64],
    public: PublicInfo,
    *,
    seed: int = 0,
    truth: NDArray[np.float64] | None = None,
) -> AttackResult:
    """FastICA on ``a_tilde`` (r x m~); its unmixing applied to ``x_tilde`` (n x m~), placed by the anchor law."""
    ica = fit_ica(a_tilde, public.ranges.shape[0], seed)
    # FastICA's unit-variance sources are standardised on the anchor rows, where u_k has variance 1.
    sources = ica.transform(x_tilde)
    mid = public.ranges.mean(axis=1)
    reconstruction = place_sources(sources, public, offsets=mid, scales=public.width / np.sqrt(12.0))
    return attack_result(reconstruction, truth, public.ranges)


def moment_matching(
    a_tilde: NDArray[np.float64],
    x_tilde: NDArray[np.float64],
    public: PublicInfo,
    *,
    seed: int = 0,
    truth: NDArray[np.float64] | None = None,
) -> AttackResult:
    """Fit the reducer to A~'s second and fourth cumulants under the uniform anchor law, then invert it on X~.

    ``seed`` draws the ``N_STARTS`` random starts of the least-squares fit; the best fit wins.
    """
    m = public.ranges.shape[0]
    a = np.asarray(a_tilde, dtype=np.float64)
    centre = a.mean(axis=0)
    y = a - centre
    # Whiten A~ so the fit is well scaled: Y = A~ W, Cov Y = I, and B'' = B' W has B''^T B'' = I.
    cov = y.T @ y / y.shape[0]
    eigval, eigvec = np.linalg.eigh(cov)
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
    b_white = min(fits, key=lambda fit: fit.cost).x.reshape(m, p)
    b_prime = b_white @ np.linalg.inv(whitener)  # rows b'_k in A~ units: A~ = U B' + centre
    sources = invert_affine(b_prime, centre, np.asarray(x_tilde, dtype=np.float64), np.zeros(m))
    mid = public.ranges.mean(axis=1)
    reconstruction = place_sources(sources, public, offsets=mid, scales=public.width / np.sqrt(12.0))
    return attack_result(reconstruction, truth, public.ranges)


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
