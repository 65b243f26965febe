"""Input checks of collabcausal/estimators/validation.py."""

from __future__ import annotations

import numpy as np
import pytest

from collabcausal.errors import InputError
from collabcausal.estimators.validation import (
    check_treatment,
    is_finite_number,
    number_in_range,
    refuse_unknown_keys,
)


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


@pytest.mark.parametrize("value", [True, False, "2", None, [1.0], float("nan"), float("inf"), -float("inf"), 10**400])
def test_a_request_number_that_is_not_a_finite_number_is_refused_not_raised(value):
    assert not is_finite_number(value) and not number_in_range(value, -1e308, 1e308)


@pytest.mark.parametrize(("value", "inside"), [(0.125, True), (8, True), (2.0, True), (-0.0, False),
                                               (np.nextafter(8.0, 9.0), False), (0.1249999, False)])
def test_number_in_range_is_closed_at_both_ends(value, inside):
    assert is_finite_number(value) and bool(number_in_range(value, 0.125, 8.0)) is inside


ACCEPTED = frozenset({"bounds", "n_sites"})


def test_a_key_the_parser_does_not_apply_is_named_with_the_accepted_ones_in_one_line():
    with pytest.raises(InputError) as caught:
        refuse_unknown_keys({"bounds": [], "n_sites": 1, "sigma": 0.0}, ACCEPTED, "dp_effects design")
    assert str(caught.value) == ("dp_effects design option 'sigma' is not one this party applies (bounds, n_sites); "
                                 "fix: drop it, or run the analyst's collabcausal version")


def test_every_unknown_key_is_named_sorted_and_quoted_on_one_line():
    with pytest.raises(InputError, match=r"^sums options 'a\\nb', 'z' are not ones this party applies \(bounds, "
                                         r"n_sites\); fix: drop them") as caught:
        refuse_unknown_keys({"z": 1, "a\nb": 2, "n_sites": 1}, ACCEPTED, "sums")
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("spec", [{}, {"n_sites": 1}, {"bounds": [], "n_sites": 1}])
def test_a_spec_of_accepted_keys_passes_whichever_it_leaves_out(spec):
    assert refuse_unknown_keys(spec, ACCEPTED, "dp_effects design") is None  # the parser checks what it requires
