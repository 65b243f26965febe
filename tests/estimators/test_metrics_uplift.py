"""Uplift curve and AUUC (collabcausal.estimators.metrics)."""

from __future__ import annotations

import numpy as np
import pytest

from collabcausal.estimators.metrics import auuc, uplift_curve


def test_uplift_curve_known_answer():
    y = np.array([1.0, 0.0, 1.0, 0.0])
    t = np.array([1, 0, 0, 1])
    k, curve = uplift_curve(y, t, np.array([4.0, 3.0, 2.0, 1.0]))
    # after 2: treated mean 1, control mean 0 -> 2; after 3: 1 - 0.5 -> 1.5; after 4: 0.5 - 0.5 -> 0
    assert k.tolist() == [0, 1, 2, 3, 4]
    assert curve.tolist() == [0.0, 1.0, 2.0, 1.5, 0.0]
    assert auuc(y, t, np.array([4.0, 3.0, 2.0, 1.0]), normalize=False) == pytest.approx(0.5 + 1.5 + 1.75 + 0.75)


def test_auuc_ranks_the_true_uplift_above_its_reverse():
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, 5000)
    t = rng.binomial(1, 0.5, 5000)
    y = t * x + rng.normal(0, 0.5, 5000)
    assert auuc(y, t, x) > auuc(y, t, rng.random(5000)) > auuc(y, t, -x)
