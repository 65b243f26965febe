"""Red team of the check_input=False paths: every public entry point with its defaults still refuses bad input.

estimate_effects checks its inputs once and runs the propensity fit and the estimators unchecked;
psm, ipw, aipw and LogisticPropensity check by default. Each bad input is refused by each of them
with a one-line InputError naming the problem and the fix, before any unchecked computation.
"""

from __future__ import annotations

import numpy as np
import pytest

from collabcausal.analyst.effects import estimate_effects
from collabcausal.errors import InputError
from collabcausal.estimators.doubly_robust import aipw
from collabcausal.estimators.matching import psm
from collabcausal.estimators.propensity import LogisticPropensity
from collabcausal.estimators.weighting import ipw

N = 60


def data() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(11)
    X = rng.normal(size=(N, 2))
    t = (rng.random(N) < 1 / (1 + np.exp(-X[:, 0]))).astype(np.int64)
    t[:2] = (0, 1)
    y = X @ [1.0, -0.5] + 2.0 * t + rng.normal(size=N)
    e = LogisticPropensity().fit(X, t).predict_propensity(X)
    return X, t, y, e


def with_value(array: np.ndarray, value, dtype=None) -> np.ndarray:
    out = np.array(array, dtype=dtype or np.result_type(array, type(value)))
    out[3] = value
    return out


BAD = {
    # name: (what changes, the problem named)
    "treatment 2": ("t", lambda t: with_value(t, 2), "treatment must be coded 0/1, found 2"),
    "treatment -1": ("t", lambda t: with_value(t, -1), "treatment must be coded 0/1, found -1"),
    "treatment 0.5": ("t", lambda t: with_value(t, 0.5, np.float64), "treatment must be coded 0/1, found 0.5"),
    "treatment NaN": ("t", lambda t: with_value(t, np.nan, np.float64), "treatment contains NaN"),
    "treatment one arm": ("t", lambda t: np.ones_like(t), r"treatment has only one arm \(1\)"),
    "treatment one arm, boolean": ("t", lambda t: np.zeros(t.shape, bool), r"treatment has only one arm \(0\)"),
    "treatment one short": ("t", lambda t: t[:-1], "entries but .* were expected|has .* entries"),
    "treatment as a matrix": ("t", lambda t: np.stack([t, t], axis=1), "must be one-dimensional"),
    "outcome NaN": ("y", lambda y: with_value(y, np.nan), "y contains NaN or infinite values"),
    "outcome inf": ("y", lambda y: with_value(y, np.inf), "y contains NaN or infinite values"),
    "outcome -inf": ("y", lambda y: with_value(y, -np.inf), "y contains NaN or infinite values"),
    "outcome one short": ("y", lambda y: y[:-1], f"y has {N - 1} entries but {N} were expected"),
    "outcome one long": ("y", lambda y: np.r_[y, 0.0], f"y has {N + 1} entries but {N} were expected"),
}
FEATURES = {
    "features NaN": (lambda X: np.where(np.arange(N)[:, None] == 3, np.nan, X), "NaN|infinit"),
    "features inf": (lambda X: np.where(np.arange(N)[:, None] == 3, np.inf, X), "NaN|infinit"),
    "features one row short": (lambda X: X[:-1], "entries but|inconsistent|samples|rows"),
}
PROPENSITY = {
    "propensity NaN": (lambda e: with_value(e, np.nan), "propensity contains NaN"),
    "propensity 0": (lambda e: with_value(e, 0.0), r"propensity has values outside the open interval \(0, 1\)"),
    "propensity 1": (lambda e: with_value(e, 1.0), r"propensity has values outside the open interval \(0, 1\)"),
    "propensity 1.5": (lambda e: with_value(e, 1.5), r"propensity has values outside the open interval \(0, 1\)"),
    "propensity one short": (lambda e: e[:-1], f"propensity has {N - 1} entries but {N} were expected"),
}


def refused(match: str):
    return pytest.raises(InputError, match=match)


def one_line_with_fix(info) -> None:
    message = str(info.value)
    assert "\n" not in message and "; fix: " in message


def entry_points(X, t, y, e):
    """Every public entry point, with its default arguments."""
    return {
        "estimate_effects": lambda: estimate_effects(X, t, y),
        "psm": lambda: psm(y, t, e),
        "ipw": lambda: ipw(y, t, e),
        "aipw": lambda: aipw(y, t, e, X),
        "psm with X_propensity": lambda: psm(y, t, e, X_propensity=X),
        "ipw with X_propensity": lambda: ipw(y, t, e, X_propensity=X),
        "aipw with X_propensity": lambda: aipw(y, t, e, X, X_propensity=X),
    }


@pytest.mark.parametrize("case", sorted(BAD))
@pytest.mark.parametrize("entry", sorted(entry_points(*data())))
def test_every_entry_point_refuses_a_bad_treatment_or_outcome(case, entry):
    X, t, y, e = data()
    name, change, match = BAD[case]
    t, y = (change(t), y) if name == "t" else (t, change(y))
    with refused(match) as info:
        entry_points(X, t, y, e)[entry]()
    one_line_with_fix(info)


@pytest.mark.parametrize("case", sorted(FEATURES))
@pytest.mark.parametrize("entry", ["estimate_effects", "aipw", "fit", "predict_propensity"])
def test_features_are_refused_by_every_entry_point_reading_them(case, entry):
    X, t, y, e = data()
    change, match = FEATURES[case]
    bad = change(X)
    run = {
        "estimate_effects": lambda: estimate_effects(bad, t, y),
        "aipw": lambda: aipw(y, t, e, bad),
        "fit": lambda: LogisticPropensity().fit(bad, t),
        "predict_propensity": lambda: LogisticPropensity().fit(X, t).predict_propensity(bad),
    }[entry]
    if entry == "predict_propensity" and "short" in case:
        assert run().shape == (N - 1,)  # a prediction for fewer subjects is no mismatch
        return
    with refused(match) as info:
        run()
    one_line_with_fix(info)


@pytest.mark.parametrize("case", sorted(PROPENSITY))
@pytest.mark.parametrize("entry", ["psm", "ipw", "aipw"])
def test_the_estimators_refuse_a_bad_propensity_by_default(case, entry):
    X, t, y, e = data()
    change, match = PROPENSITY[case]
    with refused(match) as info:
        entry_points(X, t, y, change(e))[entry]()
    one_line_with_fix(info)


@pytest.mark.parametrize("start", [np.full(N, np.nan), np.zeros(N - 1), np.zeros((N, 2))])
def test_estimate_effects_refuses_a_bad_start_logit(start):
    X, t, y, _ = data()
    with refused("start_logit") as info:
        estimate_effects(X, t, y, start_logit=start)
    one_line_with_fix(info)


@pytest.mark.parametrize("clip", [(0.0, 1.0), (0.2, 0.1), (np.nan, 0.9)])
def test_estimate_effects_refuses_a_clip_that_would_let_the_unchecked_estimators_divide_by_zero(clip):
    X, t, y, _ = data()
    with refused("clip") as info:
        estimate_effects(X, t, y, clip=clip)
    one_line_with_fix(info)


@pytest.mark.parametrize("coding", ["bool", "float", "int8", "uint8", "column"])
def test_every_accepted_treatment_coding_gives_estimate_effects_the_int_codings_numbers(coding):
    X, t, y, _ = data()
    coded = {"bool": t.astype(bool), "float": t.astype(float), "int8": t.astype(np.int8),
             "uint8": t.astype(np.uint8), "column": t[:, None]}[coding]
    ours, theirs = estimate_effects(X, coded, y), estimate_effects(X, t, y)
    np.testing.assert_array_equal(ours.propensity, theirs.propensity)
    for name, estimate in theirs.estimates.items():
        assert ours.estimates[name].estimate == estimate.estimate
        assert ours.estimates[name].se == estimate.se


def test_estimate_effects_refuses_an_unknown_estimator_or_estimand():
    X, t, y, _ = data()
    with refused("estimand|ate") as info:
        estimate_effects(X, t, y, estimand="atc")
    one_line_with_fix(info)
    with refused("psm|estimator") as info:
        estimate_effects(X, t, y, estimators=["ols"])
    one_line_with_fix(info)


@pytest.mark.parametrize("case", sorted(FEATURES))
@pytest.mark.parametrize("entry", ["psm", "ipw", "aipw"])
def test_the_estimators_refuse_bad_propensity_covariates_by_default(case, entry):
    X, t, y, e = data()
    change, match = FEATURES[case]
    bad = change(X)
    run = {"psm": lambda: psm(y, t, e, X_propensity=bad), "ipw": lambda: ipw(y, t, e, X_propensity=bad),
           "aipw": lambda: aipw(y, t, e, X, X_propensity=bad)}[entry]
    with refused(match) as info:
        run()
    one_line_with_fix(info)
