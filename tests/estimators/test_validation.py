"""Input checks of collabcausal/estimators/validation.py."""

from __future__ import annotations

import numpy as np
import pytest

from collabcausal.errors import InputError
from collabcausal.estimators.validation import check_treatment


@pytest.mark.parametrize("t", [np.array([], np.int64), np.array([], np.float64), np.array([], bool)])
def test_an_empty_treatment_is_refused_by_name_not_by_a_numpy_traceback(t):
    with pytest.raises(InputError, match="treatment has no subjects; fix: "):
        check_treatment(t)
    assert check_treatment(t, both_arms=False).size == 0  # a table block may be empty


@pytest.mark.parametrize(
    ("t", "found"),
    [([0, 1, 2], "2"), ([-1, 0, 1], "-1"), (np.array([0, 1, 3], np.uint8), "3"), ([0.0, 1.0, 0.5], "0.5")],
)
def test_a_coding_other_than_0_1_is_named(t, found):
    with pytest.raises(InputError, match=f"coded 0/1, found {found}"):
        check_treatment(t)


@pytest.mark.parametrize("t", [[0, 1, 1], np.array([False, True]), np.array([0, 1], np.uint8), [0.0, 1.0]])
def test_every_0_1_coding_gives_int8(t):
    out = check_treatment(t)
    assert out.dtype == np.int8 and set(out.tolist()) == {0, 1}
