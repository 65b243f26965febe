"""The GP sample path of paper 004's functional release: every draw and every noisy sum goes through OpenDP."""

import numpy as np
import pytest
from scipy.stats import chi2

from collabcausal.estimators.dp import mechanisms
from collabcausal.estimators.dp.dp_cate import gaussian_kernel
from collabcausal.estimators.dp.dp_cate_functional import GaussianProcessPath

POINTS = np.array([[0.1, 0.2], [0.3, 0.1], [0.9, 0.9]])
CENTER = np.array([3.0, -1.5, 0.25])


def kernel(A, B):
    return gaussian_kernel(A, B, 0.3)


@pytest.fixture
def opendp_calls(monkeypatch):
    """Replace OpenDP's draw by a zero-noise fake that records its inputs (issue 11 item 5).

    With the fake, the release must be exactly a function of what OpenDP received: if any other
    sampler (numpy, the Python random module) added noise, the zero-noise release would not
    equal the centre.
    """
    calls = []

    def fake(kind, atom, scale, arr):
        calls.append((kind, scale, arr.copy()))
        return arr.copy()

    monkeypatch.setattr(mechanisms, "_opendp_draw", fake)
    return calls


def test_batch_and_iterative_releases_add_noise_only_inside_opendp(opendp_calls):
    batch = GaussianProcessPath(kernel)(POINTS, center=CENTER, scale=2.0)
    path = GaussianProcessPath(kernel)
    iterative = [path(p[None, :], center=[c], scale=2.0)[0] for p, c in zip(POINTS, CENTER, strict=True)]
    for release in (batch, iterative):
        assert release == pytest.approx(CENTER, abs=1e-8)
    assert [kind for kind, _, _ in opendp_calls] == ["gaussian"] * 4
    assert all(scale == 2.0 for _, scale, _ in opendp_calls)
    # OpenDP received the whitened centre R^-1 g (data-dependent), not zeros to be added afterwards.
    assert np.abs(opendp_calls[0][2]).max() > 1.0


def test_release_distribution_is_center_plus_scaled_gp_by_exact_chi_square_bounds():
    """N paths through the real OpenDP sampler; for each direction a in {e_i, e_i + e_j},
    sum_n (a'(x_n - g))^2 / (r^2 a'Ka) is exactly chi^2(N) if the law is N(g, r^2 K). Two-sided
    bounds at total level 1e-6 (union over 2 x 6 tails): a false failure happens in < 1e-6 of runs.
    A missing Cholesky factor (covariance I instead of K) moves the e_1 + e_2 statistic by 1.6x."""
    n, scale = 2000, 0.7
    K = kernel(POINTS, POINTS)
    batch = np.array([GaussianProcessPath(kernel)(POINTS, center=CENTER, scale=scale) for _ in range(n)])
    iterative = np.empty_like(batch)
    for k in range(n):
        path = GaussianProcessPath(kernel)
        iterative[k] = [path(p[None, :], center=[c], scale=scale)[0] for p, c in zip(POINTS, CENTER, strict=True)]
    eye = np.eye(3)
    directions = [eye[i] for i in range(3)] + [eye[i] + eye[j] for i in range(3) for j in range(i + 1, 3)]
    level = 1e-6 / (2 * 2 * len(directions))
    lo, hi = chi2.ppf(level, n), chi2.isf(level, n)
    for sample in (batch, iterative):
        for a in directions:
            stat = np.sum(((sample - CENTER) @ a) ** 2) / (scale**2 * a @ K @ a)
            assert lo < stat < hi, (a, stat, lo, hi)


def test_repeated_point_returns_the_number_released_before():
    path = GaussianProcessPath(kernel)
    first = path(POINTS[:2], center=CENTER[:2], scale=1.0)
    again = path(np.array([POINTS[1], [0.5, 0.5], POINTS[0]]), center=[CENTER[1], 0.0, CENTER[0]], scale=1.0)
    assert again[0] == first[1] and again[2] == first[0]
