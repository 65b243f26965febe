"""Replications of the ``dp_effects`` study on the multi-site design, with its non-private peer (issue 21).

:func:`run_private` runs the study exactly as ``collabcausal analyst serve`` would: real
:class:`~collabcausal.party.node.Party` objects (ledgers, OpenDP noise) on an in-process grid,
:func:`~collabcausal.analyst.dp_effects.dp_effects_results` as the coordinator. :func:`federated_aipw`
is the non-private reference: the centralized AIPW with site-level nuisances (a logistic propensity
fitted per site, linear outcome regressions with site intercepts; the sandwich SE of
:func:`~collabcausal.estimators.doubly_robust.aipw`), i.e. what the parties would get if they
pooled their rows. :func:`summarize` turns replications into bias, RMSE, coverage and noise share.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.linear_model import LogisticRegression

from collabcausal.analyst.dp_effects import DPEffectsSpec, dp_effects_results
from collabcausal.attacks.privacy_audit import fast_directory
from collabcausal.estimators.doubly_robust import aipw
from collabcausal.party import Party, PartyTable
from collabcausal.party.ledger import PrivacyLedger
from collabcausal.protocol.inprocess import InProcessGrid
from collabcausal.simulations.multisite import OUTCOME_RANGE, Site, covariate_bounds

COLUMNS = tuple(f"x{j}" for j in range(10))


def study_spec(outcome: str, epsilon: float, **changes: object) -> DPEffectsSpec:
    """The benchmark's study: the design's public ranges, trimming 0.1, AIPW, both estimands."""
    spec = DPEffectsSpec(epsilon=epsilon, delta=1e-6, outcome_range=OUTCOME_RANGE[outcome], trim=0.1,
                         columns=COLUMNS, bounds=tuple(covariate_bounds()), estimators=("aipw",),
                         estimands=("ate",))
    return replace(spec, **changes)  # type: ignore[arg-type]


def site_parties(sites: Sequence[Site], folder: Path, epsilon: float, delta: float) -> list[Party]:
    """One party per site, each with a fresh ledger holding the study's budget."""
    parties = []
    for i, site in enumerate(sites):
        frame = pd.DataFrame(site.X, columns=COLUMNS).assign(t=site.T, y=site.Y)
        table = PartyTable.from_frame(frame, COLUMNS, treatment="t", outcome="y")
        ledger = PrivacyLedger(folder / f"site{i}.sqlite", epsilon=epsilon, delta=delta)
        parties.append(Party(f"site{i}", table, ledger=ledger))
    return parties


def run_private(sites: Sequence[Site], spec: DPEffectsSpec, identities: object = None) -> dict[str, object]:
    """One ``dp_effects`` study over ``sites``: the report's kind part."""
    with tempfile.TemporaryDirectory(dir=fast_directory()) as folder:
        parties = site_parties(sites, Path(folder), spec.epsilon, spec.delta)
        if identities is not None:
            from collabcausal.party.secagg import attach_identities

            attach_identities(parties, identities)
        return dp_effects_results(InProcessGrid(parties), spec, "bench", [p.name for p in parties])


def federated_aipw(sites: Sequence[Site], estimand: str = "ate") -> tuple[float, float]:
    """Non-private AIPW over the pooled rows with site-level nuisances: (estimate, se)."""
    e = np.concatenate([
        LogisticRegression(C=np.inf, max_iter=1000).fit(s.X, s.T).predict_proba(s.X)[:, 1] for s in sites
    ])
    dummies = np.vstack([np.tile(np.eye(len(sites))[i, 1:], (len(s.T), 1)) for i, s in enumerate(sites)])
    X = np.hstack([np.vstack([s.X for s in sites]), dummies])
    y = np.concatenate([s.Y for s in sites])
    t = np.concatenate([s.T for s in sites])
    result = aipw(y, t, np.clip(e, 0.01, 0.99), X, estimand)
    return float(result.estimate), float(result.se)


@dataclass(frozen=True)
class Summary:
    """Bias, RMSE, empirical coverage of the 95% interval, mean SE and DP noise share over replications."""

    n: int
    bias: float
    rmse: float
    coverage: float
    mean_se: float
    noise_share: float
    failed: int


def summarize(estimates: Sequence[float | None], ses: Sequence[float | None], truth: float,
              noise_shares: Sequence[float] = ()) -> Summary:
    """:class:`Summary` of replications (``None`` = no estimate, counted as failed)."""
    pairs = [(e, s) for e, s in zip(estimates, ses, strict=True) if e is not None and s is not None]
    est = np.array([p[0] for p in pairs])
    se = np.array([p[1] for p in pairs])
    err = est - truth
    return Summary(len(pairs), float(err.mean()), float(np.sqrt(np.mean(err**2))),
                   float(np.mean(np.abs(err) <= 1.959964 * se)), float(se.mean()),
                   float(np.mean(noise_shares)) if len(noise_shares) else 0.0, len(estimates) - len(pairs))


def peer_parties(sites: Sequence[Site], folder: Path, epsilon: float, delta: float) -> list[Party]:
    """:func:`site_parties` holding the study's anchor key too (for the DC-QE peers)."""
    from collabcausal.party.anchor import simulation_anchor_key

    parties = site_parties(sites, folder, epsilon, delta)
    for party in parties:
        party.anchor_key = simulation_anchor_key(0)
    return parties


def run_adum(sites: Sequence[Site], outcome: str, epsilon: float, cells: int = 4) -> float:
    """eps-ADUM (paper 001) over the sites on a regular grid of the two strongest confounders: the ATE."""
    from collabcausal.analyst.adum import fit_adum
    from collabcausal.estimators.dp.partitions import GridPartition

    bounds = covariate_bounds()[:2]
    with tempfile.TemporaryDirectory(dir=fast_directory()) as folder:
        parties = site_parties(sites, Path(folder), epsilon, 0.0 + 1e-9)
        model = fit_adum(InProcessGrid(parties), GridPartition(list(COLUMNS[:2]), bounds, [cells, cells]), epsilon,
                         OUTCOME_RANGE[outcome], study="bench", parties=[p.name for p in parties])
    weights = np.clip(np.asarray(model.aggregates_.counts, dtype=float).sum(axis=1), 0.0, None)
    return float(weights @ model.uplift_ / weights.sum())


def run_dcqe(sites: Sequence[Site], outcome: str, epsilon: float | None) -> tuple[float | None, float | None]:
    """DC-QE over the sites (paper 003): plain (``epsilon=None``, AIPW) or on DP representations (IPW, SIMEX).

    Returns (estimate, se); (None, None) when the study refuses (the DP noise floor is too high).
    """
    from collabcausal.analyst.dcqe import DCQEPlan
    from collabcausal.analyst.dcqe import run_dcqe as run_plain
    from collabcausal.analyst.dp_release import DPRepresentationSpec, run_dp_dcqe
    from collabcausal.errors import CollabCausalError

    ranges = dict(zip(COLUMNS, covariate_bounds(), strict=True))
    with tempfile.TemporaryDirectory(dir=fast_directory()) as folder:
        parties = peer_parties(sites, Path(folder), epsilon or 1.0, 1e-6)
        names = [[p.name] for p in parties]
        grid = InProcessGrid(parties)
        if epsilon is None:
            plan = DCQEPlan(row_groups=names, anchor_ranges=ranges, n_anchors=2000, party_components=9,
                            estimators=("aipw",), study="bench")
            e = run_plain(grid, plan).effects.estimates["aipw"]
            return float(e.estimate), float(e.se)
        plan = DCQEPlan(row_groups=names, anchor_ranges=ranges, n_anchors=2000, party_components=10,
                        estimators=("ipw",), study="bench")
        try:
            result = run_dp_dcqe(grid, plan, DPRepresentationSpec(epsilon, 1e-6, OUTCOME_RANGE[outcome]), n_boot=50)
        except CollabCausalError:
            return None, None
        return float(result.estimate.estimate), float(np.std(result.replicates, ddof=1))
