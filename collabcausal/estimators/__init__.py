"""Pure-math estimators on in-memory arrays: propensity, matching, weighting, balance, bootstrap.

Functions (``psm``, ``ipw``, ``aipw``) work on given propensities; the scikit-learn-style classes
(``PropensityScoreMatching``, ``InverseProbabilityWeighting``, ``AugmentedIPW``) fit the propensity
model too.

No I/O, no network, no global state. See docs/estimators.md.
"""

from collabcausal.estimators.average_effects import AugmentedIPW, InverseProbabilityWeighting, PropensityScoreMatching
from collabcausal.estimators.balance import (
    ArmMoments,
    masmd,
    propensity_inconsistency,
    smd,
    smd_from_moments,
    weighted_moments,
)
from collabcausal.estimators.bootstrap import BootstrapSummary, gap, run_replicates, stratified_resample, summarize
from collabcausal.estimators.doubly_robust import aipw
from collabcausal.estimators.intervals import INTERVALS, IntervalEstimate, bca_interval, interval_estimate
from collabcausal.estimators.matching import nearest_neighbor_match, psm
from collabcausal.estimators.propensity import LogisticPropensity
from collabcausal.estimators.results import EffectEstimate, wald_interval
from collabcausal.estimators.weighting import ipw, ipw_weights

__all__ = [
    "INTERVALS",
    "ArmMoments",
    "AugmentedIPW",
    "BootstrapSummary",
    "EffectEstimate",
    "IntervalEstimate",
    "InverseProbabilityWeighting",
    "LogisticPropensity",
    "PropensityScoreMatching",
    "aipw",
    "bca_interval",
    "gap",
    "interval_estimate",
    "ipw",
    "ipw_weights",
    "masmd",
    "nearest_neighbor_match",
    "propensity_inconsistency",
    "psm",
    "run_replicates",
    "smd",
    "smd_from_moments",
    "stratified_resample",
    "summarize",
    "wald_interval",
    "weighted_moments",
]
