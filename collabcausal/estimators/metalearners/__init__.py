"""CATE meta-learners (S, T, X, DR, R) and their sample-splitting plans."""

from collabcausal.estimators.metalearners.learners import (
    DRLearner,
    RLearner,
    SLearner,
    TLearner,
    XLearner,
)
from collabcausal.estimators.metalearners.splits import Round, cross_fit_plan, disjoint_plan

__all__ = [
    "DRLearner",
    "RLearner",
    "Round",
    "SLearner",
    "TLearner",
    "XLearner",
    "cross_fit_plan",
    "disjoint_plan",
]
