"""The key owner: what it encrypts, and that open() never returns an un-noised, unrounded value."""

from __future__ import annotations

import numpy as np
import pytest
from vertical_helpers import decrypt_slots, relay

from collabcausal.errors import InputError, ProtocolError
from collabcausal.vertical.seal_io import tag, unframe


@pytest.fixture(scope="module")
def returned(owner1, evaluator1):
    """(returned total, exact sum, evaluator's noise share) of a seeded depth-1 program."""
    rng = np.random.default_rng(36)
    x, z = rng.uniform(-1, 1, 5000), rng.uniform(-1, 1, 5000)
    return (relay(owner1, evaluator1, x) * z).total(noise=0.75, flood_sd=1.0, rng=rng), float(x @ z), 0.75


@pytest.mark.parametrize("noise", [0.0, -0.0, float("nan"), float("inf")])
def test_open_refuses_a_zero_or_non_finite_noise_share(owner1, returned, noise):
    with pytest.raises(InputError, match="nonzero noise share") as info:
        owner1.open(returned[0], noise=noise, grid=0.01)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("grid", [1e-7, 0.0, -1.0, float("nan")])
def test_open_refuses_a_grid_finer_than_the_error_bound(owner1, returned, grid):
    with pytest.raises(InputError, match="finer than the CKKS error bound"):
        owner1.open(returned[0], noise=0.5, grid=grid)


@pytest.mark.parametrize("grid", [1e-5, 0.01, 0.25, 3.0])
def test_open_adds_the_noise_and_rounds_to_the_grid(owner1, returned, grid):
    total, exact, evaluator_noise = returned
    opened = float(owner1.open(total, noise=[0.3], grid=grid)[0])
    assert abs(opened / grid - round(opened / grid)) < 1e-6  # a multiple of the grid
    # within half a grid (plus the CKKS error bound of 5000 terms) of the noisy sum
    assert abs(opened - (exact + evaluator_noise + 0.3)) <= grid / 2 + 5000 * owner1.parameters.error_bound
    assert opened != decrypt_slots(owner1, total)[0].real  # not the raw decryption


def test_open_refuses_bytes_that_are_no_total_of_its_own_context(owner1, evaluator1, owner7, evaluator7):
    with pytest.raises(ProtocolError, match="not a collabcausal CKKS blob"):
        owner1.open(b"garbage", noise=0.5, grid=0.01)
    other = relay(owner7, evaluator7, np.zeros(3)).total(noise=1.0, flood_sd=1.0, rng=np.random.default_rng(0))
    with pytest.raises(ProtocolError, match="under another CKKS context") as info:
        owner1.open(other, noise=0.5, grid=0.01)
    assert "\n" not in str(info.value)
    with pytest.raises(ProtocolError, match="not valid under this round's CKKS context"):
        owner1.open(tag(evaluator1.fingerprint, b"not a ciphertext"), noise=0.5, grid=0.01)
    with pytest.raises(ProtocolError, match="not valid under this round's CKKS context"):
        owner1.open(tag(evaluator1.fingerprint, unframe(other, 2, "total")[1]), noise=0.5, grid=0.01)


@pytest.mark.parametrize(
    ("values", "match"),
    [
        (np.array([0.5, 1.0 + 1e-12]), r"\|value\| 1 > 1"),
        (np.array([0.5, -3.0]), r"\|value\| 3 > 1"),
        (np.array([0.5, np.nan]), "non-finite"),
        (np.zeros((2, 2)), "1-D"),
        (np.zeros(0), "non-empty"),
    ],
)
def test_encrypt_refuses_values_outside_the_headroom_before_encrypting(owner1, values, match):
    with pytest.raises(InputError, match=match) as info:
        owner1.encrypt(values)
    assert "fix:" in str(info.value)
