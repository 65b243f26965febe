import numpy as np
import pytest

from collabcausal.estimators.small_systems import eigvalsh, solve


@pytest.mark.parametrize("rhs", [(), (3,)])
def test_solve_gives_numpys_numbers(rhs):
    rng = np.random.default_rng(0)
    for k in (1, 5, 9):
        a, b = rng.normal(size=(k, k)), rng.normal(size=(k, *rhs))
        np.testing.assert_allclose(solve(a, b), np.linalg.solve(a, b), rtol=1e-12, atol=1e-14)


def test_a_singular_system_raises_numpys_error():
    with pytest.raises(np.linalg.LinAlgError, match="Singular matrix"):
        solve(np.ones((3, 3)), np.ones(3))


def test_eigvalsh_gives_numpys_ascending_eigenvalues():
    rng = np.random.default_rng(1)
    for k in (1, 5, 9):
        a = rng.normal(size=(3 * k, k))
        gram = a.T @ a
        np.testing.assert_allclose(eigvalsh(gram), np.linalg.eigvalsh(gram), rtol=1e-12, atol=1e-12)
    singular = np.ones((3, 3))  # rank 1: the condition check sends it to least squares
    assert eigvalsh(singular)[-1] == pytest.approx(3.0) and abs(eigvalsh(singular)[0]) < 1e-12
