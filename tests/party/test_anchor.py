"""Anchor columns: uniform on public ranges, the same for every party from the study seed."""

from __future__ import annotations

import numpy as np
import pytest

from collabcausal.errors import InputError
from collabcausal.party.anchor import anchor_columns

RANGES = {"age": (18.0, 80.0), "bmi": (15.0, 40.0), "sbp": (90.0, 200.0)}


def test_a_party_builds_exactly_its_slice_of_the_shared_anchor() -> None:
    full = anchor_columns(7, ["age", "bmi", "sbp"], RANGES, 500)
    right = anchor_columns(7, ["sbp"], RANGES, 500)
    np.testing.assert_array_equal(full[:, [2]], right)


def test_columns_are_uniform_on_their_ranges() -> None:
    a = anchor_columns(0, ["age", "bmi"], RANGES, 20000)
    assert a[:, 0].min() >= 18 and a[:, 0].max() <= 80
    assert abs(a[:, 1].mean() - 27.5) < 0.2


def test_other_seed_gives_other_anchor() -> None:
    assert not np.array_equal(anchor_columns(0, ["age"], RANGES, 10), anchor_columns(1, ["age"], RANGES, 10))


@pytest.mark.parametrize(
    ("columns", "ranges", "n", "message"),
    [
        (["weight"], RANGES, 10, "no anchor range for covariate 'weight'"),
        (["age"], {"age": (5.0, 5.0)}, 10, "low < high"),
        (["age"], RANGES, 0, "n_anchors must be at least 1"),
    ],
)
def test_bad_anchor_specifications_are_refused(columns, ranges, n, message) -> None:
    with pytest.raises(InputError, match=message):
        anchor_columns(0, columns, ranges, n)
