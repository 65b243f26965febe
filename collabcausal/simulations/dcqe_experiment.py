"""Run the DC-QE reproduction: every setting on the full sample and on bootstrap replicates.

Paper 003, section 5: each replicate resamples subjects within each row group (the same resample
for every setting, so settings are compared on the same data), re-runs the whole pipeline
(reducers, SVD, propensity, estimators) and records the estimate, MASMD and the propensity
inconsistencies with the truth (eq. 40) and with CA (eq. 41). The table reports the full-sample
estimate with the SE and interval of the configured kind (analytic, bootstrap percentile or BCa)
and the gap from the benchmark (eq. 39); the bootstrap mean (what the paper's tables print) is
kept as ``boot_mean``.

Collaborations run through the parties' own operations (:mod:`collabcausal.party.representation`)
over a :class:`~collabcausal.analyst.grid.Grid`; IA and CA, impossible in a deployment, are
computed directly on the raw slices as the paper's baselines.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from functools import partial

import numpy as np
from numpy.typing import NDArray
from scipy.special import logit
from threadpoolctl import threadpool_limits

from collabcausal.analyst.dcqe import DCQEPlan, describe_parties, resampled_logits, run_dcqe
from collabcausal.analyst.effects import ESTIMATORS, EffectBundle, estimate_effects
from collabcausal.analyst.grid import Grid
from collabcausal.analyst.study_defaults import (
    BOOTSTRAP,
    INTERVAL,
    PARTY_COMPONENTS,
    configuration_line,
    simulation_study_id,
)
from collabcausal.anchor_key import simulation_anchor_key
from collabcausal.errors import CollabCausalError, InputError, NumericalError
from collabcausal.estimators.balance import arm_weights, block_arm_moments, smd, smd_from_moments
from collabcausal.estimators.bootstrap import run_replicates, stratified_resample, summarize
from collabcausal.estimators.intervals import check_interval, interval_estimate
from collabcausal.estimators.results import EffectEstimate
from collabcausal.estimators.validation import check_estimand
from collabcausal.messages import Message
from collabcausal.party.node import Party, request_fingerprint
from collabcausal.protocol.inprocess import InProcessGrid
from collabcausal.randomness import child_rng
from collabcausal.simulations.datasets import CausalDataset
from collabcausal.simulations.partition import GridPartition, build_parties
from collabcausal.simulations.settings import Setting

METRICS = ("estimate", "masmd", "inconsistency_true", "inconsistency_ca")
FAILURE = "failure"  # a failed replicate's entry: why (the error's problem), beside NaN metrics


@dataclass(frozen=True)
class ExperimentConfig:
    """Everything that defines one reproduction run.

    Parameters
    ----------
    dataset : CausalDataset
    partition : GridPartition
    settings : sequence of Setting
    estimators : sequence of {"psm", "ipw", "aipw"}
    estimand : {"ate", "att"}, optional
        Default: the dataset's.
    n_boot : int
        Bootstrap replicates B (paper: 1000).
    seed : int
        Study seed: anchors and bootstrap resamples derive from it.
    party_components : int or float
        m~ for every party (int, or explained-variance fraction); the defaults of this config are
        those of ``analyst serve`` (:mod:`collabcausal.analyst.study_defaults`).
    n_anchors : int, optional
        Anchor rows r; default the number of subjects (paper 003, section 5.1).
    n_jobs : int
        Parallel bootstrap workers (in-process grids only).
    interval : {"analytic", "percentile", "bca"}
        The SE and interval printed around each full-sample estimate
        (:func:`~collabcausal.estimators.intervals.interval_estimate`; ``analyst serve`` takes the
        same choice from study.toml). The bootstrap kinds need ``n_boot > 0``.
    """

    dataset: CausalDataset
    partition: GridPartition
    settings: Sequence[Setting]
    estimators: Sequence[str] = ESTIMATORS
    estimand: str | None = None
    n_boot: int = BOOTSTRAP
    seed: int = 0
    party_components: int | float = PARTY_COMPONENTS
    n_anchors: int | None = None
    n_jobs: int = 1
    anchor_ranges: dict[str, tuple[float, float]] = field(default_factory=dict)
    interval: str = INTERVAL

    def __post_init__(self) -> None:
        object.__setattr__(self, "estimand", check_estimand(self.estimand or self.dataset.estimand))
        object.__setattr__(self, "interval", check_interval(self.interval))
        if int(self.n_boot) < 0:
            raise InputError(f"n_boot must be >= 0, got {self.n_boot}", "pass a bootstrap count such as 1000")
        if int(self.n_boot) == 0 and self.interval != "analytic":
            raise InputError(
                f"the {self.interval} interval needs bootstrap replicates (n_boot = 0)",
                "draw some (--bootstrap 200) or use the analytic interval (--interval analytic)",
            )
        if not self.anchor_ranges:
            object.__setattr__(self, "anchor_ranges", self.dataset.covariate_ranges())

    @property
    def study(self) -> str:
        """The study id of every setting (:func:`~collabcausal.analyst.study_defaults.simulation_study_id`)."""
        return simulation_study_id(self.dataset.name, self.partition.shape)

    def configuration_line(self) -> str:
        """What decides the collaborations' numbers, as ``analyst serve`` prints it for a study."""
        return configuration_line(
            study=self.study,
            anchor_key=f"simulation key of seed {self.seed}",
            n_anchors=self.n_anchors or self.dataset.n_subjects,
            ranges=self.anchor_ranges,
            party_components=self.party_components,
            n_components=next((s.n_components for s in self.settings if s.name == "W-clb"), None),
            seed=self.seed,
        )


@dataclass(frozen=True, eq=False)
class BalanceDiagnostics:
    """One setting's full-sample balance and propensities, for the report's Love and overlap plots.

    Attributes
    ----------
    covariates : tuple of str
        Covariate (column) names, in the order of the SMD arrays.
    unweighted : ndarray
        SMD per covariate before weighting (paper 003, eq. 42).
    weighted : dict of str to ndarray
        SMD per covariate of each estimator's balanced sample (eqs. 43-44).
    propensity : ndarray
        Estimated propensity score of every subject the setting uses.
    treatment : ndarray
        Their treatment (0/1).
    """

    covariates: tuple[str, ...]
    unweighted: NDArray[np.float64]
    weighted: dict[str, NDArray[np.float64]]
    propensity: NDArray[np.float64]
    treatment: NDArray[np.int8]


@dataclass(frozen=True, eq=False)
class ExperimentResult:
    """Per setting and estimator: the full-sample values and the bootstrap replicates.

    ``diagnostics`` holds each setting's full-sample :class:`BalanceDiagnostics`, ``estimates``
    each setting and estimator's full-sample :class:`EffectEstimate` (analytic SE, influence),
    ``failures`` why replicates failed: per setting and estimator, each reason with its count.
    """

    config: ExperimentConfig
    point: dict[tuple[str, str], dict[str, float]]
    replicates: dict[tuple[str, str], dict[str, NDArray[np.float64]]]
    diagnostics: dict[str, BalanceDiagnostics] = field(default_factory=dict)
    estimates: dict[tuple[str, str], EffectEstimate] = field(default_factory=dict)
    failures: dict[tuple[str, str], dict[str, int]] = field(default_factory=dict)

    def rows(self) -> list[dict[str, object]]:
        """Table rows (paper 003 Tables 2-3 layout), estimator blocks in order.

        ``estimate`` is the full-sample estimate; ``se``, ``ci_low``/``ci_high`` are those of
        ``config.interval`` (:func:`~collabcausal.estimators.intervals.interval_estimate`, as
        ``analyst serve`` prints them); ``gap`` (eq. 39) comes from the bootstrap replicates, and
        ``boot_mean`` is their mean, the number paper 003's tables report (use it only to compare
        with them like for like). ``n_failed`` counts replicates that failed and were left out.
        """
        out = []
        benchmark = self.config.dataset.benchmark
        for estimator in self.config.estimators:
            for setting in self.config.settings:
                key = (setting.name, estimator)
                reps = self.replicates[key]
                boot = reps["estimate"] if len(reps["estimate"]) else None
                try:
                    shown = interval_estimate(self.estimates[key], boot, self.config.interval).to_dict()
                except NumericalError:  # e.g. BCa with every replicate on one side, or all failed
                    shown = {"se": None, "ci_low": None, "ci_high": None}
                est = summarize(boot, benchmark=benchmark) if boot is not None and benchmark is not None else None
                row: dict[str, object] = {
                    "setting": setting.name,
                    "estimator": setting.estimator_label(estimator),
                    "estimand": self.config.estimand,
                    "estimate": _clean(self.point[key]["estimate"]),
                    "boot_mean": None if boot is None else _clean(float(np.nanmean(boot))),
                    "se": _clean(shown["se"]),
                    "ci_low": _clean(shown["ci_low"]),
                    "ci_high": _clean(shown["ci_high"]),
                    "interval": self.config.interval,
                    "gap": _clean(est.gap) if est else None,
                    "n_boot": len(reps["estimate"]),
                    "n_failed": int(np.isnan(reps["estimate"]).sum()),
                }
                for metric in METRICS[1:]:
                    values = reps[metric] if len(reps[metric]) else np.array([self.point[key][metric]])
                    ok = values[~np.isnan(values)]
                    row[metric] = _clean(ok.mean()) if ok.size else None
                    row[f"{metric}_se"] = _clean(ok.std(ddof=1)) if ok.size > 1 else None
                out.append(row)
        return out


def run_experiment(
    config: ExperimentConfig,
    *,
    grid_factory: Callable[[list[Party]], AbstractContextManager[Grid]] | None = None,
    progress: bool = False,
) -> ExperimentResult:
    """Run every setting on the full sample and on ``config.n_boot`` bootstrap replicates.

    Parameters
    ----------
    config : ExperimentConfig
    grid_factory : callable, optional
        ``grid_factory(parties)`` returns a context manager yielding the Grid over the simulated
        parties: in-process by default; :func:`collabcausal.protocol.launcher.local_grpc_grid`
        starts each party as its own OS process behind mutual TLS.
    progress : bool
        Show a progress bar on stderr.
    """
    parties = build_parties(config.dataset, config.partition, anchor_key=simulation_anchor_key(config.seed))
    context = nullcontext(InProcessGrid(parties)) if grid_factory is None else grid_factory(parties)
    with context as grid:
        diagnostics: dict[str, BalanceDiagnostics] = {}
        estimates: dict[tuple[str, str], EffectEstimate] = {}
        described: dict[str, dict[str, Message]] = {}
        point = _replicate(config, grid, -1, diagnostics, estimates, described=described)
        full = {name: logit(d.propensity) for name, d in diagnostics.items()}  # once, for every replicate
        in_process = isinstance(grid, InProcessGrid)
        fn = (
            partial(_replicate_in_process, config, parties, full, described)
            if in_process
            else partial(_replicate, config, grid, full_logits=full, described=described)
        )
        n_jobs = config.n_jobs if in_process else 1
        # Replicates are small linear-algebra problems: multithreaded BLAS only adds overhead
        # there (up to 40x on 2 busy cores); parallelism comes from n_jobs worker processes.
        with threadpool_limits(limits=1):
            reps = run_replicates(fn, config.n_boot, n_jobs=n_jobs, progress=progress) if config.n_boot else []
    keys = list(point)
    replicates = {key: {m: np.array([r[key][m] for r in reps], dtype=np.float64) for m in METRICS} for key in keys}
    failures = {key: dict(Counter(r[key][FAILURE] for r in reps if FAILURE in r[key])) for key in keys}
    return ExperimentResult(config, point, replicates, diagnostics, estimates, failures)


def _replicate_in_process(
    config: ExperimentConfig,
    parties: list[Party],
    full_logits: Mapping[str, NDArray[np.float64]],
    described: dict[str, dict[str, Message]],
    b: int,
) -> dict:
    return _replicate(config, InProcessGrid(parties), b, full_logits=full_logits, described=described)


def _replicate(
    config: ExperimentConfig,
    grid: Grid,
    b: int,
    diagnostics: dict[str, BalanceDiagnostics] | None = None,
    estimates: dict[tuple[str, str], EffectEstimate] | None = None,
    *,
    full_logits: Mapping[str, NDArray[np.float64]] | None = None,
    described: dict[str, dict[str, Message]] | None = None,
) -> dict[tuple[str, str], dict[str, float]]:
    """All settings on replicate ``b`` (``b = -1``: the full sample).

    Fills ``diagnostics`` and ``estimates`` (the full-sample EffectEstimates) when given. With
    ``full_logits`` (each setting's full-sample propensity logits, by name) every propensity fit of
    a replicate starts from its subjects' full-sample logits, as ``analyst serve``'s bootstrap does
    (:func:`~collabcausal.analyst.dcqe.resampled_logits`). ``described`` holds each collaboration's
    checked ``describe`` replies by setting name: a setting missing from it is described (and
    added), one in it is not asked again. The replies do not depend on the resample, so the full
    sample's serve every replicate, as ``analyst serve``'s bootstrap reuses its study's.
    """
    described = {} if described is None else described
    grid = SharedReplies(grid)
    part, data = config.partition, config.dataset
    sizes = [len(r) for r in part.row_groups]
    rows = (
        [np.arange(n) for n in sizes] if b < 0 else stratified_resample(sizes, child_rng(config.seed, "bootstrap", b))
    )
    subjects = [part.row_groups[i][rows[i]] for i in range(len(sizes))]
    X_all, t_all, y_all = data.arrays
    everyone, covariates, names = list(range(len(sizes))), list(data.covariates), part.names()
    drawn = _arms_drawn(t_all, subjects)

    def start(setting: str | None, groups: list[int]) -> NDArray[np.float64] | None:
        if full_logits is None or setting not in full_logits:
            return None
        return resampled_logits(full_logits[setting], [rows[i] for i in groups])

    central = next((s.name for s in config.settings if s.kind == "central"), None)
    try:
        _check_arms(drawn, everyone)
        ca: EffectBundle | None = _raw_effects(
            config, X_all, t_all, y_all, np.concatenate(subjects), covariates, b < 0, start(central, everyone)
        )
    except CollabCausalError:
        if b < 0:
            raise
        ca = None  # the CA setting fails below with the reason; the others lose inconsistency_ca
    ca_e = dict(
        zip(everyone, np.split(np.full(sum(sizes), np.nan) if ca is None else ca.propensity, np.cumsum(sizes)[:-1]),
            strict=True)
    )
    out: dict[tuple[str, str], dict[str, float | str]] = {}
    n_anchors, study = config.n_anchors or data.n_subjects, config.study
    for setting in config.settings:
        groups = [i for i, row in enumerate(names) if any(p in setting.parties for p in row)]
        idx = np.concatenate([subjects[i] for i in groups])
        try:
            _check_arms(drawn, groups)
            if setting.kind == "collaboration":
                plan = DCQEPlan(
                    row_groups=[[p for p in names[i] if p in setting.parties] for i in groups],
                    anchor_ranges=config.anchor_ranges,
                    n_anchors=n_anchors,
                    party_components=config.party_components,
                    n_components=setting.n_components,
                    seed=config.seed,
                    estimand=config.estimand,
                    estimators=config.estimators,
                    study=study,
                    balance_parties=[names[i] for i in groups],
                )
                if setting.name not in described:
                    described[setting.name] = describe_parties(grid, plan)
                result = run_dcqe(
                    grid,
                    plan,
                    [rows[i] for i in groups],
                    described=described[setting.name],
                    analytic_se=b < 0,
                    unweighted_smd=diagnostics is not None,
                    start_logit=start(setting.name, groups),
                )
                bundle, masmd = result.effects, {k: result.masmd(k) for k in config.estimators}
                if diagnostics is not None:
                    diagnostics[setting.name] = BalanceDiagnostics(
                        tuple(name.partition(":")[2] for name in result.covariates),
                        result.smd_unweighted,
                        result.smd,
                        bundle.propensity,
                        result.treatment,
                    )
            else:
                cols = covariates if setting.kind == "central" else _columns_of(config, setting.parties[0])
                bundle = (
                    _raw_effects(config, X_all, t_all, y_all, idx, cols, b < 0, start(setting.name, groups))
                    if setting.kind != "central" or ca is None
                    else ca
                )
                X_balance = X_all.take(idx, axis=0)  # every covariate, in the data set's order
                weighted = _local_smd(bundle, X_balance, t_all[idx])
                masmd = {k: None if v is None else float(np.max(np.abs(v))) for k, v in weighted.items()}
                if diagnostics is not None:
                    diagnostics[setting.name] = BalanceDiagnostics(
                        tuple(covariates),
                        smd(X_balance, t_all[idx]),
                        {k: v for k, v in weighted.items() if v is not None},
                        bundle.propensity,
                        t_all[idx].astype(np.int8),
                    )
        except CollabCausalError as exc:
            if b < 0:
                raise
            failed = {**dict.fromkeys(METRICS, np.nan), FAILURE: exc.problem}
            out.update({(setting.name, k): dict(failed) for k in config.estimators})
            continue
        e_ca = np.concatenate([ca_e[i] for i in groups])
        inconsistency = {  # one propensity per setting: the same for every estimator
            "inconsistency_true": np.nan
            if data.true_propensity is None
            else float(np.mean(np.abs(bundle.propensity - data.true_propensity[idx]))),
            "inconsistency_ca": float(np.mean(np.abs(bundle.propensity - e_ca))),
        }
        for k in config.estimators:
            if estimates is not None:
                estimates[(setting.name, k)] = bundle.estimates[k]
            out[(setting.name, k)] = {
                "estimate": bundle.estimates[k].estimate,
                "masmd": np.nan if masmd[k] is None else masmd[k],
                **inconsistency,
            }
    return out


class SharedReplies(Grid):
    """One replicate's grid: a request another setting of the replicate already made of a party gets the first reply.

    The settings of a replicate send some parties the same ``describe`` and ``dc_representation``
    requests (p11's representation on the resample serves L, T and W of a 2x2 grid); both replies
    are exact functions of the request, so the first serves the repeats. Every other operation
    (balance moments, any DP release) is sent each time. The replies are held until the replicate
    ends (each party's X~ and A~ once, beside the settings' own arrays).

    Parameters
    ----------
    grid : Grid
        The transport to the parties.
    """

    SHARED = frozenset({"describe", "dc_representation"})

    def __init__(self, grid: Grid) -> None:
        self._grid = grid
        self._replies: dict[tuple[str, str], Message] = {}

    def party_names(self) -> list[str]:
        return self._grid.party_names()

    def send_and_receive(self, requests: Mapping[str, Message], *, timeout: float | None = None) -> dict[str, Message]:
        keys = {name: (name, request_fingerprint(m)) for name, m in requests.items() if m.operation in self.SHARED}
        new = {name: m for name, m in requests.items() if keys.get(name) not in self._replies}
        replies = self._grid.send_and_receive(new, timeout=timeout) if new else {}
        self._replies.update((keys[name], reply) for name, reply in replies.items() if name in keys)
        return {name: replies[name] if name in replies else self._replies[keys[name]] for name in requests}


def _arms_drawn(t: NDArray, subjects: list[NDArray]) -> list[tuple[bool, bool]]:
    """Per row group of a resample (its ``subjects``): whether it draws a treated and a control subject."""
    return [(bool(np.any(arms == 1)), bool(np.any(arms == 0))) for arms in (t[s] for s in subjects)]


def _check_arms(drawn: list[tuple[bool, bool]], groups: list[int]) -> None:
    """Refuse a resample whose row groups ``groups`` together draw no subject of an arm, naming it.

    ``drawn`` is the resample's :func:`_arms_drawn`. A resample is a legal data set, but one without
    a treated (or a control) subject has no effect to estimate: the replicate fails with this reason
    rather than with an estimator's error.
    """
    for arm, name in enumerate(("treated", "control")):
        if not any(drawn[i][arm] for i in groups):
            where = ", ".join(str(i + 1) for i in groups)
            raise InputError(
                f"the resample draws no {name} subject in row group{'s' if len(groups) > 1 else ''} {where}",
                "none for this replicate: it is left out (more subjects of that arm make it rarer)",
            )


def _columns_of(config: ExperimentConfig, party: str) -> list[str]:
    for row in config.partition.names():
        if party in row:
            return list(config.partition.column_groups[row.index(party)])
    raise InputError(f"unknown party {party!r}", "name a party of the grid")


def _raw_effects(
    config: ExperimentConfig,
    X: NDArray,
    t: NDArray,
    y: NDArray,
    idx: NDArray,
    columns: list[str],
    analytic_se: bool,
    start_logit: NDArray[np.float64] | None,
) -> EffectBundle:
    cols = [config.dataset.covariates.index(c) for c in columns]
    return estimate_effects(
        X[idx][:, cols],
        t[idx],
        y[idx],
        estimand=config.estimand,
        estimators=config.estimators,
        analytic_se=analytic_se,
        start_logit=start_logit,
    )


def _local_smd(bundle: EffectBundle, X: NDArray, t: NDArray) -> dict[str, NDArray[np.float64] | None]:
    """SMD per covariate of each estimator's balanced sample (None: no balance weights), in one pass over X.

    ``X`` (the data set's validated covariates) and ``t`` (0/1) are the setting's rows; every
    weighted sample's arm moments come from one stacked :func:`block_arm_moments` (paper 003, eqs. 42-44).
    """
    weights = {k: bundle.balance_weights(k) for k in bundle.estimates}
    sampled = [k for k, w in weights.items() if w is not None]
    out: dict[str, NDArray[np.float64] | None] = dict.fromkeys(weights)
    if sampled:
        W = np.stack([weights[k] for k in sampled])
        moments = block_arm_moments(X, lambda rows: arm_weights(W[:, rows], t[rows]), len(sampled))
        out.update(zip(sampled, smd_from_moments(moments.by_sample()), strict=True))
    return out


def _clean(value: float | None) -> float | None:
    if value is None or not np.isfinite(value):
        return None
    return float(value)
