"""Strict JSON: undefined numbers become null with a reason; NaN and Infinity never reach a file."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from collabcausal.strict_json import dumps, strict, write_json


def _strict_load(text: str):
    return json.loads(text, parse_constant=lambda name: pytest.fail(f"{name} in strict JSON"))


def test_non_finite_numbers_become_null_with_their_path_and_reason() -> None:
    value, reasons = strict({"a": [1.0, float("nan")], "b": {"c": np.float64(np.inf)}, "d": -math.inf})
    assert value == {"a": [1.0, None], "b": {"c": None}, "d": None}
    assert reasons == {"a/1": "NaN", "b/c": "+inf", "d": "-inf"}


def test_numpy_values_are_written_as_plain_numbers_and_lists() -> None:
    text = dumps({"n": np.int64(3), "x": np.array([1.5, np.nan]), "ok": np.bool_(True)})
    assert _strict_load(text) == {"n": 3, "x": [1.5, None], "ok": True, "undefined": {"x/1": "NaN"}}


def test_a_reason_the_writer_knows_beats_the_generic_one() -> None:
    document = {"masmd": float("nan"), "undefined": {"masmd": "undefined: an SMD is"}}
    assert _strict_load(dumps(document))["undefined"] == {"masmd": "undefined: an SMD is"}


def test_a_document_without_undefined_numbers_is_unchanged(tmp_path) -> None:
    document = {"rows": [{"estimate": 0.5, "se": None}], "name": "x"}
    path = write_json(tmp_path / "r.json", document)
    assert _strict_load(path.read_text()) == document


def test_an_undefined_number_outside_an_object_is_refused() -> None:
    with pytest.raises(ValueError, match="not an object"):
        dumps([float("nan")])
