"""What the coordinator can reconstruct from DC-QE representations, and what each setting costs (issue 9, item 4).

For every data set (LaLonde 2x2 as in examples/lalonde-2x2; the paper-003 synthetic Experiment I
data) and every **setting** (a representation mode and its level: plain DC-QE at m~ = 1..m_j, DP
representations at eps in {0.5, 1, 2, 4, 8, 32, 128}), one study is run as the analyst would run it
(:func:`collabcausal.analyst.dcqe.run_dcqe` / :func:`collabcausal.analyst.dp_release.run_dp_dcqe`
on an in-process grid whose replies are recorded), and the reconstruction attacks of
``collabcausal/attacks`` are run on exactly what the analyst received:

  a  known anchor: least squares with the true anchor (the threat the secret anchor removes) and
     with the anchor the analyst could compute before (the seed derivation: "a: seed-guessed");
  b  secret anchor, public law: ICA on A~, and cumulant moment matching on A~;
  c  ICA on X~ alone;
  d  K requests of the same subjects combined (plain: resampled rows; DP: repeated releases, each
     charged);
  e  analyst colluding with the target's row partner (anchor key, hence X_anc; binary columns
     enumerated).

The attacked parties are p11 and p12 (row group 1). Public information: the ranges and, worst
case for the parties, each column's exact marginal distribution. Each cell of the leak table is
``median |corr| / RMSE ratio`` over the attacked columns: the |correlation| of each true column
with its best-assigned reconstructed column, and the mean relative RMSE divided by that of the
public mean (below 1: better than knowing the published mean). ``null`` is the |corr| random
guesses stay under with probability 1 - 1e-4 (:func:`collabcausal.attacks.metrics.null_correlation`).
The utility table gives, per setting, the W-clb effect (Hajek IPW, the only estimator DP
representations support; SIMEX-corrected for DP) beside the centralized analysis (CA) of the same
subjects and its gap. ``--csv`` writes every column's scores. Plain DC-QE rows are deterministic
(seed 0); DP rows are one draw of the OpenDP noise, which is not seedable, and vary between runs.

A new representation mode is one function ``mode(scenario, level, n_requests) -> View`` added to
``MODES`` with its levels in ``LEVELS``.

Run: ``python benchmarks/bench_reconstruction.py`` (``--quick``: fewer settings and requests;
``--figure docs/privacy-utility.png``: the privacy-utility curve).
"""

from __future__ import annotations

import csv
import math
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from _run_mode import BenchmarkParser
from numpy.typing import NDArray

from collabcausal.analyst.dcqe import DCQEPlan, describe_parties, run_dcqe
from collabcausal.analyst.dp_release import DPRepresentationSpec, run_dp_dcqe, se_floor
from collabcausal.analyst.effects import estimate_effects
from collabcausal.anchor_key import simulation_anchor_key
from collabcausal.attacks.calibration import PublicInfo
from collabcausal.attacks.collusion import colluding_reconstruction
from collabcausal.attacks.dp_bound import correlation_bound
from collabcausal.attacks.known_anchor import known_anchor_attack
from collabcausal.attacks.many_requests import ica_on_requests
from collabcausal.attacks.metrics import AttackResult, null_correlation
from collabcausal.attacks.representation_ica import ica_on_representation
from collabcausal.attacks.secret_anchor import secret_anchor_attack
from collabcausal.errors import CollabCausalError
from collabcausal.ledger import PrivacyLedger
from collabcausal.messages import Message
from collabcausal.party.anchor import anchor_columns
from collabcausal.party.dp_representation import release_order
from collabcausal.party.node import Party
from collabcausal.protocol.inprocess import InProcessGrid
from collabcausal.randomness import child_rng
from collabcausal.simulations.datasets import CausalDataset, load_lalonde, make_dcqe_synthetic
from collabcausal.simulations.partition import GridPartition, build_parties, partition_grid

SEED = 0
TARGETS = ("p11", "p12")
DELTA = 1e-5
NULL_RATE = 1e-4
DP_BOOT = 20  # the analyst's bootstrap of the released rows (no new requests) for the DP rows' SE


@dataclass(eq=False)
class Scenario:
    """A data set split into the 2x2 grid, its public facts, and the truth (for scoring only)."""

    name: str
    data: CausalDataset
    partition: GridPartition
    study: str
    ranges: dict[str, list[float]] = field(init=False)

    def __post_init__(self) -> None:
        self.ranges = {k: [float(a), float(b)] for k, (a, b) in self.data.covariate_ranges().items()}

    def table_order(self, released: NDArray[np.float64]) -> NDArray[np.float64]:
        """A DP release's rows put back in table order with the key (what a colluding key holder can
        do; the analyst alone does not know which subject a row describes): the worst case scored."""
        out = np.empty_like(released)
        out[release_order(simulation_anchor_key(SEED), self.study, released.shape[0])] = released
        return out

    def parties(self, ledgers: Path | None = None) -> dict[str, Party]:
        """Fresh simulated parties (with ledgers in ``ledgers`` for DP releases)."""
        built = build_parties(self.data, self.partition, anchor_key=simulation_anchor_key(SEED))
        for party in built if ledgers is not None else ():
            party.ledger = PrivacyLedger(ledgers / f"{party.name}.sqlite", epsilon=1e6, delta=0.5, dataset=party.name)
        return {p.name: p for p in built}

    def columns(self, party: str) -> list[str]:
        names = self.partition.names()
        for row in names:
            if party in row:
                return list(self.partition.column_groups[row.index(party)])
        raise KeyError(party)

    def truth(self, party: str) -> NDArray[np.float64]:
        row = next(i for i, names in enumerate(self.partition.names()) if party in names)
        X = self.data.arrays[0][self.partition.row_groups[row]]
        return X[:, [self.data.covariates.index(c) for c in self.columns(party)]]

    def public(self, party: str) -> PublicInfo:
        return PublicInfo.from_sample(self.truth(party), [self.ranges[c] for c in self.columns(party)])

    def anchor(self, party: str) -> NDArray[np.float64]:
        """The party's anchor columns, as a key holder computes them."""
        return anchor_columns(simulation_anchor_key(SEED), self.study, self.columns(party), self.ranges, self.n_anchors)

    def seed_guessed_anchor(self, party: str) -> NDArray[np.float64]:
        """The anchor the analyst could compute before the anchor became secret (derived from the seed)."""
        cols = self.columns(party)
        return np.column_stack([child_rng(SEED, "anchor", c).uniform(*self.ranges[c], self.n_anchors) for c in cols])

    @property
    def n_anchors(self) -> int:
        return self.data.n_subjects

    @property
    def m_j(self) -> int:
        return min(len(g) for g in self.partition.column_groups)

    def plan(self, components: int, estimators=("ipw",)) -> DCQEPlan:
        return DCQEPlan(
            self.partition.names(),
            self.ranges,
            self.n_anchors,
            party_components=int(components),
            seed=SEED,
            estimand=self.data.estimand,
            estimators=estimators,
            study=self.study,
        )

    def central_effect(self) -> float:
        X, t, y = self.data.arrays
        idx = self.partition.subjects()
        bundle = estimate_effects(X[idx], t[idx], y[idx], estimand=self.data.estimand, estimators=("ipw",))
        return bundle.estimates["ipw"].estimate


@dataclass(eq=False)
class View:
    """What the analyst holds after one study in a mode.

    ``releases[party] = (x_tilde, a_tilde)``; ``requests[party]`` lists ``(rows, x_tilde)`` of the
    study's request and the further ones attack (d) makes; ``effect`` is the W-clb estimate (None
    when the study failed); ``bound`` the largest |corr| the mode guarantees against any attack on
    one release per party (None: no guarantee).
    """

    releases: dict[str, tuple[NDArray[np.float64], NDArray[np.float64]]]
    requests: dict[str, list[tuple[NDArray[np.int64] | None, NDArray[np.float64]]]]
    effect: float | None
    bound: float | None = None
    se_floor: float | None = None
    se: float | None = None


class RecordingGrid(InProcessGrid):
    """An in-process grid that keeps every representation reply the analyst receives."""

    def __init__(self, parties, operation: str) -> None:
        super().__init__(parties)
        self.operation, self.replies = operation, {}

    def send_and_receive(self, requests, *, timeout=None):
        replies = super().send_and_receive(requests, timeout=timeout)
        self.replies.update({p: r for p, r in replies.items() if requests[p].operation == self.operation})
        return replies


def plain_mode(scenario: Scenario, m_tilde: float, n_requests: int) -> View:
    """Plain DC-QE with every party at m~; attack (d)'s extra requests resample rows (all subjects + a half)."""
    parties = scenario.parties()
    grid = RecordingGrid(parties.values(), "dc_representation")
    effect = _effect(lambda: run_dcqe(grid, scenario.plan(int(m_tilde)), analytic_se=False, unweighted_smd=False)
                     .effects.estimates["ipw"].estimate)
    releases = {p: (r.arrays["x_tilde"], r.arrays["a_tilde"]) for p, r in grid.replies.items()}
    requests = {}
    for target in TARGETS:
        n = scenario.truth(target).shape[0]
        requests[target] = [(None, releases[target][0])]
        for k in range(1, n_requests):
            rows = np.concatenate([np.arange(n), child_rng(SEED, "bench", "rows", k).choice(n, n // 2)])
            params = {"study": scenario.study, "n_anchors": scenario.n_anchors, "anchor_ranges": scenario.ranges,
                      "n_components": int(m_tilde)}
            reply = parties[target].handle(Message("dc_representation", params, {"rows": rows}))
            requests[target].append((rows, reply.arrays["x_tilde"]))
    return View(releases, requests, effect)


def dp_mode(scenario: Scenario, epsilon: float, n_requests: int) -> View:
    """DP representations at m~ = m_j and (epsilon, DELTA) per party; attack (d) asks for repeated releases."""
    with tempfile.TemporaryDirectory() as folder:
        parties = scenario.parties(Path(folder))
        grid = RecordingGrid(parties.values(), "dp_representation")
        y = scenario.data.arrays[2]
        # max_se_floor = inf: measure the settings a default study would refuse (se_floor, printed)
        spec = DPRepresentationSpec(epsilon, DELTA, (float(y.min()), float(y.max())), max_se_floor=math.inf)
        estimate = _effect(lambda: run_dp_dcqe(grid, scenario.plan(scenario.m_j), spec, n_boot=DP_BOOT).estimate)
        effect, se = (None, None) if estimate is None else (estimate.estimate, estimate.se)
        releases = {p: (scenario.table_order(r.arrays["x_tilde"]), r.arrays["a_tilde"])
                    for p, r in grid.replies.items()}
        row = next(names for names in scenario.partition.names() if TARGETS[0] in names)
        bound = correlation_bound([grid.replies[p].params["sensitivity"] / grid.replies[p].params["sigma"]
                                   for p in row])
        requests = {}
        for target in TARGETS:
            requests[target] = [(None, releases[target][0])]
            for _ in range(1, n_requests):
                params = {"study": scenario.study, "epsilon": epsilon, "delta": DELTA, "n_components": scenario.m_j,
                          "n_anchors": scenario.n_anchors, "anchor_ranges": scenario.ranges}
                requests[target].append((None, scenario.table_order(
                    parties[target].handle(Message("dp_representation", params)).arrays["x_tilde"])))
        plan = scenario.plan(scenario.m_j)
        floor = se_floor(plan, spec, describe_parties(InProcessGrid(parties.values()), plan))
    return View(releases, requests, effect, bound, floor, se)


Mode = Callable[[Scenario, float, int], View]
MODES: dict[str, Mode] = {"plain": plain_mode, "dp": dp_mode}
LEVELS: dict[str, Callable[[Scenario, bool], list[float]]] = {
    "plain": lambda sc, quick: list(range(1, sc.m_j + 1)) if not quick else [sc.m_j - 1, sc.m_j],
    "dp": lambda sc, quick: [1.0, 8.0] if quick else [0.5, 1.0, 2.0, 4.0, 8.0, 32.0, 128.0],
}
LEVEL_LABEL = {"plain": "m~={:g}", "dp": "eps={:g}"}


def partner(scenario: Scenario, party: str) -> str:
    """The other party of the target's row group (the colluder)."""
    row = next(names for names in scenario.partition.names() if party in names)
    return next(p for p in row if p != party)


Attack = Callable[[Scenario, View, str], AttackResult]
ATTACKS: dict[str, Attack] = {
    "a: known anchor": lambda sc, v, p: known_anchor_attack(
        sc.anchor(p), v.releases[p][1], v.releases[p][0], sc.public(p).ranges, sc.truth(p)),
    "a: seed-guessed anchor": lambda sc, v, p: known_anchor_attack(
        sc.seed_guessed_anchor(p), v.releases[p][1], v.releases[p][0], sc.public(p).ranges, sc.truth(p)),
    "b: ICA on A~": lambda sc, v, p: secret_anchor_attack(
        *v.releases[p][::-1], sc.public(p), method="ica", seed=SEED, truth=sc.truth(p)),
    "b: moment matching": lambda sc, v, p: secret_anchor_attack(
        *v.releases[p][::-1], sc.public(p), method="moments", seed=SEED, truth=sc.truth(p)),
    "c: ICA on X~": lambda sc, v, p: ica_on_representation(v.releases[p][0], sc.public(p), seed=SEED,
                                                            truth=sc.truth(p)),
    "d: ICA on K requests": lambda sc, v, p: ica_on_requests(v.requests[p], sc.public(p), seed=SEED,
                                                             truth=sc.truth(p)),
    "e: collusion (partner's key)": lambda sc, v, p: colluding_reconstruction(
        sc.anchor(p), v.releases[p][1], v.releases[p][0], sc.public(p), truth=sc.truth(p)),
}


def scenarios() -> list[Scenario]:
    lalonde = load_lalonde()
    synthetic = make_dcqe_synthetic(1000, SEED)
    return [
        Scenario("LaLonde 2x2", lalonde, partition_grid(lalonde, 2, seed=SEED), "lalonde-2x2"),
        Scenario("paper-003 synthetic 2x2", synthetic, partition_grid(synthetic, 2, seed=SEED), "synthetic-2x2"),
    ]


def run(scenario: Scenario, quick: bool, n_requests: int) -> tuple[list[dict], list[dict]]:
    """Per-column attack scores and per-setting utility rows of one data set."""
    scores, utility = [], []
    central = scenario.central_effect()
    for mode, fn in MODES.items():
        for level in LEVELS[mode](scenario, quick):
            setting = LEVEL_LABEL[mode].format(level)
            view = fn(scenario, level, n_requests)
            utility.append({"mode": mode, "setting": setting, "w_clb": view.effect, "ca": central, "bound": view.bound,
                            "se_floor": view.se_floor, "se": view.se})
            for attack, run_attack in ATTACKS.items():
                for party in TARGETS:
                    error = run_attack(scenario, view, party).error
                    for k, column in enumerate(scenario.columns(party)):
                        scores.append({
                            "dataset": scenario.name, "mode": mode, "setting": setting, "attack": attack,
                            "party": party, "column": column,
                            "corr": float(error.correlation[k]),
                            "rmse": float(error.relative_rmse[k]),
                            "mean_baseline_rmse": float(error.mean_baseline_rmse[k]),
                            "midpoint_baseline_rmse": float(error.baseline_rmse[k]),
                            "within_1pct": float(error.within_one_percent[k]),
                            "binary_accuracy": float(error.binary_accuracy[k]),
                            "majority_rate": float(error.majority_rate[k]),
                        })
    return scores, utility


def print_tables(scenario: Scenario, scores: list[dict], utility: list[dict], n_requests: int) -> None:
    n = scenario.truth(TARGETS[0]).shape[0]
    m = len(scenario.columns(TARGETS[0]))
    settings = [u["setting"] for u in utility]
    print(f"\n### {scenario.name}: n = {scenario.data.n_subjects}, attacked {' + '.join(TARGETS)}, "
          f"null |corr| {null_correlation(n, m * m, NULL_RATE):.2f}, K = {n_requests} requests in (d)\n")
    print("median |corr| / RMSE ratio to the public mean (ratio < 1: better than the published mean)\n")
    print("| attack | " + " | ".join(settings) + " |")
    print("|---|" + "---|" * len(settings))
    for attack in ATTACKS:
        cells = []
        for setting in settings:
            rows = [r for r in scores if r["attack"] == attack and r["setting"] == setting]
            corr = np.median([r["corr"] for r in rows])
            ratio = np.mean([r["rmse"] for r in rows]) / np.mean([r["mean_baseline_rmse"] for r in rows])
            cells.append(f"{corr:.2f} / {ratio:.2f}")
        print(f"| {attack} | " + " | ".join(cells) + " |")
    print("| public mean (baseline) | " + " | ".join("0 / 1.00" for _ in settings) + " |")
    bounds = ["" if u["bound"] is None else f"{u['bound']:.2f}" for u in utility]
    print("| DP guarantee: any attack's \\|corr\\| <= | " + " | ".join(bounds) + " |")
    binary = [r for r in scores if not np.isnan(r["majority_rate"])]
    if binary:
        print("\nbinary columns: best attack's accuracy beside the majority rate\n")
        majority = np.mean([r["majority_rate"] for r in binary if r["setting"] == settings[0]
                            and r["attack"] == next(iter(ATTACKS))])
        print("| | " + " | ".join(settings) + " |")
        print("|---|" + "---|" * len(settings))
        best = [max(np.mean([r["binary_accuracy"] for r in binary if r["setting"] == s and r["attack"] == a])
                    for a in ATTACKS) for s in settings]
        print("| best attack | " + " | ".join(f"{b:.2f}" for b in best) + " |")
        print("| majority rate | " + " | ".join(f"{majority:.2f}" for _ in settings) + " |")
    print(f"\nW-clb {scenario.data.estimand.upper()} beside CA on the same subjects (plain: Hajek IPW; DP: "
          "SIMEX-corrected Horvitz-Thompson IPW; failed: no finite propensity fit on the noisy treatment)\n")
    print("SE floor: the SE the DP outcome noise alone gives the effect (analyst.dp_release.se_floor); a default")
    print("study refuses above a quarter of the outcome range\n")
    print("| setting | W-clb | CA | gap | W-clb bootstrap SE | SE floor |")
    print("|---|---|---|---|---|---|")
    for u in utility:
        w = "failed" if u["w_clb"] is None else f"{u['w_clb']:.3f}"
        gap = "" if u["w_clb"] is None else f"{u['w_clb'] - u['ca']:+.3f}"
        se = "" if u["se"] is None else f"{u['se']:.2f}"
        floor = "" if u["se_floor"] is None else f"{u['se_floor']:.2f}"
        print(f"| {u['mode']} {u['setting']} | {w} | {u['ca']:.3f} | {gap} | {se} | {floor} |")


def plot_privacy_utility(results: list[tuple[Scenario, list[dict], list[dict]]], path: Path) -> None:
    """The privacy-utility curve: best attack's |corr| and the W-clb gap to CA, per setting and data set."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(results), 2, figsize=(11, 3.6 * len(results)), squeeze=False)
    for (scenario, scores, utility), (leak, cost) in zip(results, axes, strict=True):
        settings = [f"{u['mode']} {u['setting']}" for u in utility]
        x = np.arange(len(settings))
        best = [max(np.median([r["corr"] for r in scores if r["setting"] == u["setting"] and r["mode"] == u["mode"]
                               and r["attack"] == a]) for a in ATTACKS) for u in utility]
        leak.plot(x, best, "o-", label="best attack (median over columns)")
        dp = [i for i, u in enumerate(utility) if u["bound"] is not None]
        leak.plot(x[dp], [utility[i]["bound"] for i in dp], "s--", label="DP bound, any attack")
        leak.set(title=f"{scenario.name}: what the coordinator learns", ylabel="|correlation| with the true column",
                 ylim=(0, 1.05), xticks=x)
        leak.set_xticklabels(settings, rotation=30, ha="right")
        leak.legend(loc="lower left", bbox_to_anchor=(0.0, 0.45), fontsize=8)
        floor = 1e-3  # gaps below are drawn at the floor (full rank: equal to CA up to rounding)
        gaps = [np.nan if u["w_clb"] is None else max(floor, abs(u["w_clb"] - u["ca"])) for u in utility]
        ses = [np.nan if u["se"] is None else u["se"] for u in utility]
        cost.semilogy(x, gaps, "o-", color="tab:red", label="|W-clb - CA| (drawn at 0.001 when smaller)")
        cost.semilogy(x, ses, "^:", color="tab:purple", label="W-clb bootstrap SE (DP)")
        failed = [i for i, u in enumerate(utility) if u["w_clb"] is None]
        top = np.nanmax([*gaps, *ses])
        cost.plot(x[failed], [top] * len(failed), "kx", markersize=9, label="failed: no finite fit")
        cost.set(title=f"{scenario.name}: what it costs", ylim=(floor / 2, top * 3),
                 ylabel=f"{scenario.data.estimand.upper()} ({scenario.data.outcome_unit})", xticks=x)
        cost.set_xticklabels(settings, rotation=30, ha="right")
        cost.legend(loc="lower right", fontsize=8)
    fig.suptitle("Privacy-utility of DC-QE representations: plain (m~ components) vs DP (eps per party)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _effect(compute: Callable[[], Any]) -> Any:
    try:
        return compute()
    except CollabCausalError:
        return None


def main(argv: list[str] | None = None) -> int:
    parser = BenchmarkParser(__doc__)
    parser.add_argument("--csv", type=Path, help="write every attacked column's scores to this CSV file")
    parser.add_argument("--figure", type=Path, help="write the privacy-utility curve to this PNG file")
    args = parser.parse_args(argv)
    n_requests = 2 if args.quick else 5
    all_scores: list[Mapping] = []
    results = []
    for scenario in scenarios():
        scores, utility = run(scenario, args.quick, n_requests)
        print_tables(scenario, scores, utility, n_requests)
        all_scores += scores
        results.append((scenario, scores, utility))
    if args.figure:
        plot_privacy_utility(results, args.figure)
    if args.csv:
        with args.csv.open("w", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=list(all_scores[0]))
            writer.writeheader()
            writer.writerows(all_scores)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
