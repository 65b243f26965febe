"""Every public estimator of collabcausal.estimators follows scikit-learn's conventions.

The list is built by walking the package, so a new class with a ``fit`` method is checked (and
fails until it is a ``BaseEstimator`` with an example in ``EXAMPLES`` if it needs arguments).
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import numpy as np
import pytest
from sklearn.base import BaseEstimator, clone
from sklearn.linear_model import LinearRegression, LogisticRegression
from sklearn.utils.estimator_checks import (
    check_get_params_invariance,
    check_no_attributes_set_in_init,
    check_set_params,
    parametrize_with_checks,
)

import collabcausal.estimators
from collabcausal.errors import BudgetExceededError
from collabcausal.estimators.dp.linear_baselines import AdaSSPRegression
from collabcausal.estimators.dp.partitions import GridPartition
from collabcausal.estimators.propensity import LogisticPropensity


def public_estimator_classes() -> list[type]:
    """Public classes with a ``fit`` method defined anywhere under collabcausal.estimators."""
    found = {}
    prefix = collabcausal.estimators.__name__ + "."
    for info in pkgutil.walk_packages(collabcausal.estimators.__path__, prefix):
        module = importlib.import_module(info.name)
        for name, obj in vars(module).items():
            if (
                inspect.isclass(obj)
                and obj.__module__ == module.__name__
                and not name.startswith("_")
                and not inspect.isabstract(obj)
                and callable(getattr(obj, "fit", None))
            ):
                found[f"{obj.__module__}.{name}"] = obj
    return [found[key] for key in sorted(found)]


# Constructor arguments of the classes without a default for every parameter.
EXAMPLES = {
    "SLearner": lambda cls: cls(LinearRegression()),
    "TLearner": lambda cls: cls(LinearRegression()),
    "XLearner": lambda cls: cls(LinearRegression(), propensity_model=LogisticRegression()),
    "DRLearner": lambda cls: cls(LogisticRegression(), LinearRegression(), LinearRegression(), random_state=0),
    "RLearner": lambda cls: cls(LinearRegression(), LogisticRegression(), LinearRegression(), cv=3),
    "DPCATELearner": lambda cls: cls("r", epsilon=1.0, feature_bounds=[(0, 1)], outcome_bounds=(0, 1)),
    "DPCATE": lambda cls: cls("dr", "linear", epsilon=1.0, feature_bounds=[(0, 1)], outcome_bounds=(0, 1)),
    "EpsADUM": lambda cls: cls(GridPartition(["x"], [(0.0, 1.0)], [4]), 1.0, (0.0, 1.0)),
    "FunctionalMechanismRegression": lambda cls: cls(1.0),
    "AdaSSPRegression": lambda cls: cls(1.0, 1e-6),
    "ObjectivePerturbationLogistic": lambda cls: cls(1.0),
    "DPTwoModel": lambda cls: cls(lambda: AdaSSPRegression(1.0, 1e-6), 1, [(0.0, 1.0)], (0.0, 1.0)),
}

CLASSES = public_estimator_classes()


def make(cls: type) -> BaseEstimator:
    if cls.__name__ in EXAMPLES:
        return EXAMPLES[cls.__name__](cls)
    return cls()


def test_the_introspection_finds_the_estimators_of_every_family():
    names = {cls.__name__ for cls in CLASSES}
    expected = {"LogisticPropensity", "PropensityScoreMatching", "InverseProbabilityWeighting", "AugmentedIPW",
                "SLearner", "DRLearner", "DPCATELearner", "DPCATE", "EpsADUM", "GaussianKRR"}
    assert expected <= names


@pytest.mark.parametrize("cls", CLASSES, ids=lambda cls: cls.__name__)
def test_estimator_clones_and_round_trips_its_parameters(cls: type):
    est = make(cls)
    assert isinstance(est, BaseEstimator), f"{cls.__name__} must derive from sklearn.base.BaseEstimator"
    params = est.get_params(deep=False)
    assert set(params) == set(inspect.signature(cls.__init__).parameters) - {"self"}
    twin = clone(est)
    assert type(twin) is cls and twin is not est
    for key, value in twin.get_params(deep=False).items():
        if isinstance(value, BaseEstimator):
            assert type(value) is type(params[key]) and value.get_params() == params[key].get_params()
        elif not callable(value):
            assert repr(value) == repr(params[key])
    assert est.set_params(**params) is est
    assert repr(est).startswith(cls.__name__ + "(")


@pytest.mark.parametrize("cls", CLASSES, ids=lambda cls: cls.__name__)
def test_init_stores_parameters_unchanged_and_sets_nothing_else(cls: type):
    name = cls.__name__
    check_no_attributes_set_in_init(name, make(cls))
    check_get_params_invariance(name, make(cls))
    check_set_params(name, make(cls))  # odd values are stored, not validated: validation is in fit


# penalty > 0: scikit-learn's check data sets are separable blobs, where the unpenalized maximum
# likelihood estimate does not exist (LogisticPropensity() then refuses with a NumericalError).
@parametrize_with_checks([LogisticPropensity(penalty=1e-3), LogisticPropensity(penalty=1.0, clip=(0.01, 0.99))])
def test_logistic_propensity_passes_scikit_learns_classifier_checks(estimator, check):
    check(estimator)


def test_a_cloned_dp_learner_charges_the_same_ledger(tmp_path):
    from collabcausal.estimators.dp.dp_cate import DPCATE
    from collabcausal.ledger import PrivacyLedger

    ledger = PrivacyLedger(tmp_path / "ledger.sqlite", epsilon=1.5, delta=1e-3, dataset="d")
    rng = np.random.default_rng(0)
    X = rng.uniform(0, 1, (400, 1))
    T = rng.binomial(1, 0.5, 400)
    Y = np.clip(X[:, 0] + T + rng.normal(0, 0.1, 400), 0, 2)
    learner = DPCATE("dr", "functional", epsilon=1.0, feature_bounds=[(0, 1)], outcome_bounds=(0, 2), ledger=ledger,
                     random_state=0)
    twin = clone(learner)
    learner.fit(Y, T, X=X)
    with pytest.raises(BudgetExceededError):  # a clone is no way around the budget
        twin.fit(Y, T, X=X)
