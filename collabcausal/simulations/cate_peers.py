"""The private CATE peers beside the private projection in benchmarks/bench_dp_cate_projection.py (``--peers``).

Each peer is run at the study's epsilon on the design of :mod:`.cate_benchmark` and returns its
CATE estimate at a set of evaluation rows, from which the benchmark takes the PEHE and the implied
projection (least squares of the estimate on ``(1, z0, z8)``, the quantity the private projection
estimates directly):

* paper 000's DP meta-algorithm (:class:`~collabcausal.estimators.dp.meta_algorithm.DPCATELearner`,
  DR-learner, DP-EBM base learners), run centrally on the pooled rows of every site;
* paper 004's DP-CATE (:class:`~collabcausal.estimators.dp.dp_cate.DPCATE`, R-learner, functional
  release of Theorem 3), run centrally;
* the study kind ``cate``: DC-QE over the sites' parties (paper 003), then DP-CATE on the analyst's
  collaborative representation, the two calls :func:`collabcausal.analyst.kind_cate.run` makes.

Paper 004's two rows are kernel methods (a Gaussian-kernel ridge regression and a Gaussian-process
sample path, cubic in their rows), so they run on the first ``kernel_rows`` subjects of every site
(default 500 per site, 2,000 in all) and are evaluated there; the meta-algorithm runs on every row.
"""

from __future__ import annotations

import tempfile
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
from numpy.typing import NDArray

from collabcausal.attacks.privacy_audit import fast_directory
from collabcausal.estimators.dp.clipping import ClippingWarning
from collabcausal.estimators.dp.dp_cate import DPCATE
from collabcausal.estimators.dp.meta_algorithm import DPCATELearner
from collabcausal.ledger import PrivacyLedger
from collabcausal.simulations.multisite import OUTCOME_RANGE, Outcome, Site, covariate_bounds

PEERS = ("DP-EBM DR (paper 000)", "DP-CATE R functional (paper 004)", "cate kind (DC-QE + DP-CATE)")
KERNEL_ROWS = 500
"""Subjects per site for paper 004's kernel methods (module docstring)."""
DELTA = 1e-6
REPRESENTATION_BOUND = 4.0
"""The ``cate`` kind's declared bound on the standardised representation's columns (``[cate] feature_bound``)."""


@dataclass(frozen=True)
class PeerEstimate:
    """One peer's CATE estimate at its evaluation rows (``rows``: positions in the stacked sites)."""

    name: str
    tau_hat: NDArray[np.float64]
    rows: NDArray[np.int64]


def kernel_sites(sites: Sequence[Site], per_site: int = KERNEL_ROWS) -> tuple[list[Site], NDArray[np.int64]]:
    """The first ``per_site`` subjects of every site, and their positions in the stacked sites."""
    starts = np.cumsum([0] + [len(s.T) for s in sites[:-1]])
    cut = [replace(s, X=s.X[:per_site], T=s.T[:per_site], Y=s.Y[:per_site], propensity=s.propensity[:per_site],
                   mean_control=s.mean_control[:per_site], mean_treated=s.mean_treated[:per_site]) for s in sites]
    return cut, np.concatenate([start + np.arange(min(per_site, len(s.T))) for start, s in zip(starts, sites,
                                                                                                 strict=True)])


def _stack(sites: Sequence[Site]) -> tuple[NDArray[np.float64], NDArray[np.int8], NDArray[np.float64]]:
    return np.vstack([s.X for s in sites]), np.concatenate([s.T for s in sites]), np.concatenate([s.Y for s in sites])


def dp_meta_learner(sites: Sequence[Site], outcome: Outcome, epsilon: float, seed: int) -> PeerEstimate:
    """Paper 000's DR-learner with DP-EBMs on the pooled rows, (epsilon, 1e-6)-DP; evaluated at every row."""
    X, T, Y = _stack(sites)
    lo, hi = OUTCOME_RANGE[outcome]
    half = 0.5 * (hi - lo)
    model = DPCATELearner("dr", epsilon=epsilon, delta=DELTA, feature_bounds=covariate_bounds(),
                          outcome_bounds=(lo, hi), pseudo_outcome_bounds=(-half, half), random_state=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ClippingWarning)
        tau = model.fit(Y, T, X=X).effect(X)
    return PeerEstimate(PEERS[0], np.asarray(tau, dtype=float), np.arange(len(T)))


def dp_cate_central(sites: Sequence[Site], outcome: Outcome, epsilon: float, seed: int,
                    per_site: int = KERNEL_ROWS) -> PeerEstimate:
    """Paper 004's R-learner, functional release (Theorem 3), on the kernel rows; evaluated there."""
    cut, rows = kernel_sites(sites, per_site)
    X, T, Y = _stack(cut)
    model = DPCATE("r", "functional", epsilon=epsilon, delta=DELTA, feature_bounds=covariate_bounds(),
                   outcome_bounds=OUTCOME_RANGE[outcome], random_state=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ClippingWarning)
        tau = model.fit(Y, T, X=X).release_function()(np.clip(X, *np.array(covariate_bounds()).T))
    return PeerEstimate(PEERS[1], np.asarray(tau, dtype=float), rows)


def cate_kind(sites: Sequence[Site], outcome: Outcome, epsilon: float, seed: int,
              per_site: int = KERNEL_ROWS) -> PeerEstimate:
    """The ``cate`` study kind on the kernel rows: DC-QE over one party per site, then DP-CATE on (X^, T, Y).

    The representation's columns are standardised by their own sd before the declared bound
    :data:`REPRESENTATION_BOUND` (the kind's ``feature_bound`` is declared on the representation's
    scale; here in units of its sd, an analyst-side choice that the kind's missing guarantee against the
    coordinator makes moot).
    """
    from collabcausal.analyst.dcqe import DCQEPlan, run_dcqe
    from collabcausal.analyst.dp_cate import dp_cate_on_representation
    from collabcausal.protocol.inprocess import InProcessGrid
    from collabcausal.simulations.dp_effects_benchmark import site_parties

    cut, rows = kernel_sites(sites, per_site)
    columns = [f"x{j}" for j in range(cut[0].X.shape[1])]
    with tempfile.TemporaryDirectory(dir=fast_directory()) as folder:
        parties = site_parties(cut, folder, epsilon, DELTA)
        plan = DCQEPlan(row_groups=[[p.name] for p in parties], anchor_ranges=dict(zip(columns, covariate_bounds(),
                                                                                           strict=True)),
                        n_anchors=2000, estimators=("aipw",), study="cate-peer", seed=seed)
        result = run_dcqe(InProcessGrid(parties), plan, analytic_se=False, unweighted_smd=False, balance=False)
        X_hat = np.asarray(result.representation.X_hat)
        scale = X_hat.std(axis=0)
        standardised = replace(result, representation=replace(result.representation, X_hat=X_hat / scale))
        ledger = PrivacyLedger(f"{folder}/study-ledger.sqlite", epsilon=epsilon, delta=DELTA)
        b = REPRESENTATION_BOUND
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ClippingWarning)
            function = dp_cate_on_representation(standardised, feature_bounds=[(-b, b)] * X_hat.shape[1],
                                                 outcome_bounds=OUTCOME_RANGE[outcome], epsilon=epsilon,
                                                 delta=DELTA, ledger=ledger, seed=seed)
            tau = function(np.clip(X_hat / scale, -b, b))
    return PeerEstimate(PEERS[2], np.asarray(tau, dtype=float), rows)


def run_peers(sites: Sequence[Site], outcome: Outcome, epsilon: float, seed: int,
              per_site: int = KERNEL_ROWS) -> list[PeerEstimate]:
    """Every peer of :data:`PEERS`, in that order (paper 004's two on ``per_site`` subjects of every site)."""
    return [dp_meta_learner(sites, outcome, epsilon, seed), dp_cate_central(sites, outcome, epsilon, seed, per_site),
            cate_kind(sites, outcome, epsilon, seed, per_site)]
