import json

import numpy as np
import pytest

from collabcausal.errors import InputError
from collabcausal.estimators.results import EffectEstimate, wald_interval


def _estimate(**diagnostics):
    return EffectEstimate(1.5, 0.2, 1.1, 1.9, "ate", "test", 3, 4, diagnostics)


def test_effect_estimate_is_frozen_and_its_diagnostics_read_only():
    est = _estimate(k=1)
    with pytest.raises(AttributeError):
        est.estimate = 2.0
    with pytest.raises(TypeError):
        est.diagnostics["k"] = 2


def test_diagnostics_are_copied_so_later_changes_of_the_callers_dict_do_not_leak():
    diag = {"k": 1}
    est = EffectEstimate(1.0, None, None, None, "att", "x", 1, 1, diag)
    diag["k"] = 2
    assert est.diagnostics["k"] == 1


def test_to_dict_is_json_serializable_with_arrays_numpy_scalars_and_nan():
    est = _estimate(weights=np.array([1.0, np.nan]), count=np.int64(3), nested={"m": np.ones((2, 2))})
    d = est.to_dict()
    text = json.dumps(d, allow_nan=False)
    assert json.loads(text)["diagnostics"] == {"weights": [1.0, None], "count": 3, "nested": {"m": [[1.0, 1.0]] * 2}}
    assert d["estimate"] == 1.5 and d["se"] == 0.2 and d["n_control"] == 4 and d["estimand"] == "ate"


def test_wald_interval_uses_the_normal_quantile():
    lo, hi = wald_interval(1.0, 0.5)
    assert lo == pytest.approx(1.0 - 1.959963984540054 * 0.5, abs=1e-12)
    assert hi == pytest.approx(1.0 + 1.959963984540054 * 0.5, abs=1e-12)


def test_wald_interval_rejects_alpha_outside_unit_interval():
    with pytest.raises(InputError, match="alpha"):
        wald_interval(1.0, 0.5, alpha=1.5)
