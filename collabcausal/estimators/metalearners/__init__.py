"""CATE meta-learners (S, T, X, DR, R), their bootstrap inference and sample-splitting plans."""

from collabcausal.estimators.metalearners.inference import BootstrapInference
from collabcausal.estimators.metalearners.learners import (
    DRLearner,
    RLearner,
    SLearner,
    TLearner,
    XLearner,
)
from collabcausal.estimators.metalearners.splits import Round, cross_fit_plan, disjoint_plan

__all__ = [
    "BootstrapInference",
    "DRLearner",
    "RLearner",
    "Round",
    "SLearner",
    "TLearner",
    "XLearner",
    "cross_fit_plan",
    "disjoint_plan",
]
