import numpy as np
import pytest

from collabcausal.estimators.small_systems import solve


@pytest.mark.parametrize("rhs", [(), (3,)])
def test_solve_gives_numpys_numbers(rhs):
    rng = np.random.default_rng(0)
    for k in (1, 5, 9):
        a, b = rng.normal(size=(k, k)), rng.normal(size=(k, *rhs))
        np.testing.assert_allclose(solve(a, b), np.linalg.solve(a, b), rtol=1e-12, atol=1e-14)


def test_a_singular_system_raises_numpys_error():
    with pytest.raises(np.linalg.LinAlgError, match="Singular matrix"):
        solve(np.ones((3, 3)), np.ones(3))
