"""Replications of the ``dp_effects`` study and its peers on one set of row groups (issue 21, item 6).

:func:`run_private` runs the study exactly as ``collabcausal analyst serve`` would: real
:class:`~collabcausal.party.node.Party` objects (ledgers, OpenDP noise) on an in-process grid,
:func:`~collabcausal.analyst.dp_effects.dp_effects_results` as the coordinator (with secure
aggregation when the spec asks for it: simulation identities from a throwaway study CA).
The peers on the same sites:

* :func:`federated_aipw`: the non-private reference, the centralized AIPW with site-level
  nuisances (a logistic propensity fitted per site, linear outcome regressions with site
  intercepts; the sandwich SE of :func:`~collabcausal.estimators.doubly_robust.aipw`), i.e. what
  the parties would get if they pooled their rows;
* :func:`difference_in_means`: the trivial baseline (no adjustment, non-private);
* :func:`oracle_aipw`: AIPW with the true nuisances (simulated sites only), the design's own
  coverage on the same replications;
* :func:`run_adum`: eps-ADUM (paper 001) on a grid of the two first covariates;
* :func:`run_dcqe`: plain DC-QE (paper 003, no guarantee) or DC-QE on DP representations.

:func:`summarize` turns replications into bias, RMSE, coverage, spread and noise share.
A site is a :class:`~collabcausal.simulations.multisite.Site`; :func:`lalonde_sites` splits the
bundled LaLonde data into row groups the same way.
"""

from __future__ import annotations

import logging
import math
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from collabcausal.analyst.dp_effects import DPEffectsSpec, dp_effects_results
from collabcausal.anchor_key import simulation_anchor_key
from collabcausal.attacks.privacy_audit import fast_directory
from collabcausal.errors import CollabCausalError
from collabcausal.estimators.doubly_robust import aipw
from collabcausal.ledger import PrivacyLedger
from collabcausal.party import Party, PartyTable
from collabcausal.party.clipping import log as clipping_log
from collabcausal.protocol.inprocess import InProcessGrid
from collabcausal.simulations.datasets import load_lalonde
from collabcausal.simulations.multisite import Site

STUDY = "bench"
Z95 = 1.959964


@dataclass(frozen=True)
class Design:
    """The public facts of a study: covariate ranges and the outcome range."""

    bounds: tuple[tuple[float, float], ...]
    outcome_range: tuple[float, float]

    @property
    def columns(self) -> tuple[str, ...]:
        """Covariate names ``x0, x1, ...`` in the order of :attr:`bounds`."""
        return tuple(f"x{j}" for j in range(len(self.bounds)))


@dataclass(frozen=True)
class Estimate:
    """One study's point estimate and standard error (``None``: no estimate, e.g. a refused study)."""

    estimate: float | None
    se: float | None
    floor: float = 0.0
    noise_share: float = 0.0


def study_spec(design: Design, epsilon: float, **changes: object) -> DPEffectsSpec:
    """The benchmark's ``dp_effects`` study: the design's public ranges, trimming 0.1, AIPW, ATE."""
    spec = DPEffectsSpec(epsilon=epsilon, delta=1e-6, outcome_range=design.outcome_range, trim=0.1,
                         columns=design.columns, bounds=design.bounds, estimators=("aipw",), estimands=("ate",))
    return replace(spec, **changes)  # type: ignore[arg-type]


def quiet_clipping_log() -> None:
    """Keep each party's clip counts (a warning per release) off a benchmark's output.

    The benchmark designs declare public ranges that clip a few simulated values on purpose, and hundreds of
    in-process parties would print one line each per study; the counts stay on the parties' logs in a deployment.
    """
    clipping_log.setLevel(logging.ERROR)


def site_parties(sites: Sequence[Site], folder: str, epsilon: float, delta: float,
                 column_groups: Sequence[Sequence[int]] | None = None) -> list[Party]:
    """One party per site (per site and column group), each with a fresh ledger holding the study's budget
    and the anchor key; with ``column_groups`` (covariate positions), party ``site{i}-{g}`` holds group
    ``g``'s covariates of site ``i`` (and, as in DC-QE's default, the row's T and Y)."""
    parties = []
    for i, site in enumerate(sites):
        columns = [f"x{j}" for j in range(site.X.shape[1])]
        frame = pd.DataFrame(site.X, columns=columns).assign(t=site.T, y=site.Y)
        split = [list(range(len(columns)))] if column_groups is None else column_groups
        for g, held in enumerate(split):
            table = PartyTable.from_frame(frame, [columns[j] for j in held], treatment="t", outcome="y")
            name = f"site{i}" if column_groups is None else f"site{i}-{g}"
            ledger = PrivacyLedger(f"{folder}/{name}.sqlite", epsilon=epsilon, delta=delta)
            party = Party(name, table, ledger=ledger)
            party.anchor_key = simulation_anchor_key(0)
            parties.append(party)
    return parties


def run_private(sites: Sequence[Site], spec: DPEffectsSpec, estimand: str = "ate") -> Estimate:
    """One ``dp_effects`` study over ``sites``: the pooled AIPW estimate of ``estimand``.

    The floor is the noise SD of the released score sum over its denominator (n for the ATE, the
    number of treated for the ATT, taken exact here).
    """
    with tempfile.TemporaryDirectory(dir=fast_directory()) as folder:
        parties = site_parties(sites, folder, spec.epsilon, spec.delta)
        names = [p.name for p in parties]
        if spec.secure_aggregation:
            from collabcausal.party.secagg import attach_identities
            from collabcausal.secagg import simulation_identities

            attach_identities(parties, simulation_identities(STUDY, names))
        report = dp_effects_results(InProcessGrid(parties), spec, STUDY, names)
    row = report["estimates"][f"aipw-{estimand}"]
    denominator = sum(len(s.T) if estimand == "ate" else int(s.T.sum()) for s in sites)
    floor = report["dp_effects"]["scores_noise_sd"][f"aipw_{estimand}"] / denominator
    return Estimate(row["estimate"], row["se"], floor, row["noise_share"] or 0.0)


def federated_aipw(sites: Sequence[Site], estimand: str = "ate") -> Estimate:
    """Non-private AIPW over the pooled rows with site-level nuisances (module docstring)."""
    propensity = make_pipeline(StandardScaler(), LogisticRegression(C=np.inf, max_iter=1000))
    e = np.concatenate([propensity.fit(s.X, s.T).predict_proba(s.X)[:, 1] for s in sites])
    dummies = np.vstack([np.tile(np.eye(len(sites))[i, 1:], (len(s.T), 1)) for i, s in enumerate(sites)])
    X = np.hstack([np.vstack([s.X for s in sites]), dummies])
    y = np.concatenate([s.Y for s in sites])
    t = np.concatenate([s.T for s in sites])
    result = aipw(y, t, np.clip(e, 0.01, 0.99), X, estimand)
    return Estimate(float(result.estimate), float(result.se))


def oracle_aipw(sites: Sequence[Site]) -> Estimate:
    """The ATE by AIPW with the true propensity and outcome means (simulated sites only).

    Nothing is estimated but the mean of the scores, so its coverage is what the study's sampling
    alone allows (an SE of the mean of i.i.d. scores), a reference for every other row's coverage on
    the same replications.
    """
    cat = {name: np.concatenate([getattr(s, name) for s in sites])
           for name in ("T", "Y", "propensity", "mean_control", "mean_treated")}
    t, y, e, mu0, mu1 = cat["T"], cat["Y"], cat["propensity"], cat["mean_control"], cat["mean_treated"]
    scores = mu1 - mu0 + t * (y - mu1) / e - (1 - t) * (y - mu0) / (1 - e)
    return Estimate(float(scores.mean()), float(scores.std(ddof=1) / math.sqrt(len(scores))))


def difference_in_means(sites: Sequence[Site]) -> Estimate:
    """The trivial baseline: treated mean minus control mean over the pooled rows, Welch SE."""
    y = np.concatenate([s.Y for s in sites])
    t = np.concatenate([s.T for s in sites]).astype(bool)
    y1, y0 = y[t], y[~t]
    return Estimate(float(y1.mean() - y0.mean()), float(math.sqrt(y1.var(ddof=1) / len(y1) + y0.var(ddof=1) / len(y0))))


def run_adum(sites: Sequence[Site], design: Design, epsilon: float, cells: int = 4) -> Estimate:
    """eps-ADUM (paper 001) on a ``cells`` x ``cells`` grid of the first two covariates: the ATE, no SE.

    The floor is ``8 D_y / (n eps)``: the Laplace scale of one party's outcome sum per cell and arm
    (substitution, ``eps/2`` on the sums; :mod:`collabcausal.estimators.dp.adum`) over ``n``.
    """
    from collabcausal.analyst.adum import fit_adum
    from collabcausal.estimators.dp.partitions import GridPartition

    with tempfile.TemporaryDirectory(dir=fast_directory()) as folder:
        parties = site_parties(sites, folder, epsilon, 1e-6)
        partition = GridPartition(list(design.columns[:2]), list(design.bounds[:2]), [cells, cells])
        model = fit_adum(InProcessGrid(parties), partition, epsilon, design.outcome_range, study=STUDY,
                         parties=[p.name for p in parties])
    weights = np.clip(np.asarray(model.aggregates_.counts, dtype=float).sum(axis=1), 0.0, None)
    n = sum(len(s.T) for s in sites)
    d_y = max(abs(v) for v in design.outcome_range)
    return Estimate(float(weights @ model.uplift_ / weights.sum()), None, 8.0 * d_y / (n * epsilon))


def run_dcqe(sites: Sequence[Site], design: Design, epsilon: float | None, n_boot: int = 5,
             column_groups: Sequence[Sequence[int]] | None = None) -> Estimate:
    """DC-QE over the sites (paper 003): plain (``epsilon=None``, AIPW) or on DP representations (IPW, SIMEX).

    With ``column_groups`` each site is a row group of parties holding those covariates (a vertical
    split). A DP study the analyst refuses (its SE floor, :func:`~collabcausal.analyst.dp_release.se_floor`,
    too high for the outcome range) gives ``Estimate(None, None, floor)``.
    """
    from collabcausal.analyst.dcqe import DCQEPlan, describe_parties
    from collabcausal.analyst.dcqe import run_dcqe as run_plain
    from collabcausal.analyst.dp_release import DPRepresentationSpec, run_dp_dcqe, se_floor

    ranges = dict(zip(design.columns, design.bounds, strict=True))
    with tempfile.TemporaryDirectory(dir=fast_directory()) as folder:
        parties = site_parties(sites, folder, epsilon or 1.0, 1e-6, column_groups)
        grid = InProcessGrid(parties)
        width = 1 if column_groups is None else len(column_groups)
        names = [p.name for p in parties]
        held = {p.name: len(p.table.covariate_names) for p in parties}
        plan = DCQEPlan(row_groups=[names[i:i + width] for i in range(0, len(names), width)], anchor_ranges=ranges,
                        n_anchors=2000, party_components={p: k - 1 if epsilon is None else k for p, k in held.items()},
                        estimators=("aipw",) if epsilon is None else ("ipw",), study=STUDY)
        if epsilon is None:
            e = run_plain(grid, plan).effects.estimates["aipw"]
            return Estimate(float(e.estimate), float(e.se))
        spec = DPRepresentationSpec(epsilon, 1e-6, design.outcome_range)
        floor = se_floor(plan, spec, describe_parties(grid, plan))
        try:
            result = run_dp_dcqe(grid, plan, spec, n_boot=n_boot)
        except CollabCausalError:
            return Estimate(None, None, floor)
    return Estimate(float(result.estimate.estimate), float(np.std(result.replicates, ddof=1)), floor)


def lalonde_sites(n_groups: int, seed: int) -> tuple[list[Site], Design]:
    """LaLonde (NSW treated + PSID controls, re78 in $1000) split at random into ``n_groups`` row groups.

    The design declares the covariate ranges of examples/lalonde-2x2 (earnings in $) and the outcome
    range [0, 60] ($1000); the propensity and the outcome means are unknown (NaN).
    """
    data = load_lalonde()
    frame = data.frame
    X = frame[list(data.covariates)].to_numpy(dtype=float)
    T = frame[data.treatment].to_numpy().astype(np.int8)
    Y = frame[data.outcome].to_numpy(dtype=float)
    group = np.random.default_rng(seed).permutation(len(T)) % n_groups
    unknown = [np.full(int((group == g).sum()), np.nan) for g in range(n_groups)]
    sites = [Site(X[group == g], T[group == g], Y[group == g], unknown[g], unknown[g], unknown[g])
             for g in range(n_groups)]
    bounds = {"age": (17.0, 55.0), "education": (0.0, 17.0), "re74": (0.0, 137148.68), "re75": (0.0, 156653.23)}
    return sites, Design(tuple(bounds.get(c, (0.0, 1.0)) for c in data.covariates), (0.0, 60.0))


@dataclass(frozen=True)
class Summary:
    """Replications of one method: bias, RMSE, coverage of the 95% interval, spread and means."""

    n: int
    bias: float
    rmse: float
    coverage: float
    mean_se: float
    spread: float
    floor: float
    noise_share: float
    failed: int

    @property
    def coverage_mcse(self) -> float:
        """Monte Carlo standard error of :attr:`coverage` (binomial, over the :attr:`n` replications)."""
        return math.sqrt(self.coverage * (1.0 - self.coverage) / self.n) if self.n else math.nan


def summarize(estimates: Sequence[Estimate], truth: float) -> Summary:
    """:class:`Summary` of replications; an estimate of ``None`` counts as failed, a ``None`` SE has no coverage.

    ``spread`` is the standard deviation of the estimates over seeds; NaN where undefined.
    """
    done = [e for e in estimates if e.estimate is not None]
    est = np.array([e.estimate for e in done], dtype=float)
    se = np.array([np.nan if e.se is None else e.se for e in done], dtype=float)
    floors = np.array([e.floor for e in estimates], dtype=float)
    if not done:
        return Summary(0, math.nan, math.nan, math.nan, math.nan, math.nan, float(np.mean(floors)), math.nan,
                       len(estimates))
    err = est - truth
    covered = np.abs(err) <= Z95 * se
    return Summary(
        len(done), float(err.mean()), float(np.sqrt(np.mean(err**2))),
        float(covered.mean()) if np.isfinite(se).all() else math.nan,
        float(se.mean()) if np.isfinite(se).all() else math.nan,
        float(est.std(ddof=1)) if len(done) > 1 else math.nan, float(np.mean(floors)),
        float(np.mean([e.noise_share for e in done])), len(estimates) - len(done),
    )


def fmt(v: float | None, digits: int = 4) -> str:
    """``v`` with ``digits`` decimals, ``-`` for none or not finite."""
    return "-" if v is None or not np.isfinite(v) else f"{v:.{digits}f}"


def _coverage(s: Summary) -> str:
    """Coverage with its Monte Carlo SE."""
    return "-" if not np.isfinite(s.coverage) else f"{s.coverage:.3f} ({s.coverage_mcse:.3f})"


def print_summary_table(title: str, table: dict[str, Summary], first: dict[str, Estimate | None]) -> None:
    """A Markdown table of :func:`summarize` rows, each with the full-sample estimate of replication 0."""
    print(f"\n### {title}\n")
    print("| method | rep-0 estimate (SE) | bias | RMSE | coverage (MC SE) | mean SE | spread | DP floor | noise share "
          "| failed |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for label, s in table.items():
        e = first.get(label)
        head = "refused" if e is None or e.estimate is None else f"{e.estimate:.4f} ({fmt(e.se)})"
        print(f"| {label} | {head} | {fmt(s.bias)} | {fmt(s.rmse)} | {_coverage(s)} | {fmt(s.mean_se)} | "
              f"{fmt(s.spread)} | {fmt(s.floor)} | {fmt(s.noise_share, 2)} | {s.failed}/{s.n + s.failed} |")
