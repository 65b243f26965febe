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
from collabcausal.estimators.matching import nearest_neighbor_match, psm
from collabcausal.estimators.propensity import LogisticPropensity
from collabcausal.estimators.results import EffectEstimate, wald_interval
from collabcausal.estimators.weighting import ipw, ipw_weights

__all__ = [
    "ArmMoments",
    "AugmentedIPW",
    "BootstrapSummary",
    "EffectEstimate",
    "InverseProbabilityWeighting",
    "LogisticPropensity",
    "PropensityScoreMatching",
    "aipw",
    "gap",
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
