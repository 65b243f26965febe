"""Study kinds adum, cate and discovery through ``run_study``: in process and over gRPC, four parties."""

from __future__ import annotations

from functools import partial

import numpy as np
import pandas as pd
import pytest

from collabcausal.analyst.config import load_study_config
from collabcausal.anchor_key import simulation_anchor_key
from collabcausal.commands.analyst import run_study
from collabcausal.errors import BudgetExceededError, StudyFailedError
from collabcausal.estimators.discovery.decision import gaussian_probability
from collabcausal.estimators.discovery.subsample_vote import group_votes
from collabcausal.ledger import PrivacyLedger
from collabcausal.messages import Message
from collabcausal.party import Party, discovery_vote
from collabcausal.protocol.inprocess import InProcessGrid
from collabcausal.simulations.datasets import CausalDataset
from collabcausal.simulations.partition import build_parties, partition_grid

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

RANGES = {"x": (-1.0, 1.0), "z": (-1.0, 1.0), "w": (-1.2, 1.2)}
OUTCOME = (-1.5, 2.5)
DCQE = "n_anchors = 500\nparty_components = 2\n"
BIG = 1e4  # epsilon at which the DP noise is far below the tolerances (computed in each test)
SECTIONS = {
    "adum": f"epsilon = {BIG}\noutcome_range = [-1.5, 2.5]\ncolumns = [\"x\"]\ncells = [5]",
    "discovery": f"epsilon = {BIG}\npairs = [[\"x\", \"w\"]]",
    "cate": f'epsilon = {BIG}\ndelta = 1e-3\noutcome_range = [-1.5, 2.5]\nfeature_bound = 0.2\nledger = "study.sqlite"',
}


def rct(n: int = 2000, seed: int = 0) -> CausalDataset:
    """A randomized trial: effect 1 + x, and w = x^3 + noise (x causes w, an additive noise model)."""
    rng = np.random.default_rng(seed)
    x, z = rng.uniform(-1, 1, n), rng.uniform(-1, 1, n)
    t = rng.binomial(1, 0.5, n)
    frame = pd.DataFrame({"x": x, "z": z, "w": x**3 + 0.1 * rng.uniform(-1, 1, n), "t": t,
                          "y": t * (1 + x) + 0.5 * z + rng.normal(0, 0.1, n)})
    return CausalDataset("rct", frame, ("x", "z", "w"), "t", "y")


@pytest.fixture(scope="module")
def data() -> CausalDataset:
    return rct()


def four_parties(data: CausalDataset, folder, budget: float) -> list:
    """Four parties holding different subjects (a horizontal split), each with its own ledger."""
    parties = build_parties(data, partition_grid(data, 4, column_groups=[data.covariates], seed=0),
                            anchor_key=simulation_anchor_key(0))
    for party in parties:
        party.ledger = PrivacyLedger(folder / f"{party.name}.sqlite", epsilon=budget, dataset=party.name)
    return parties


def study_toml(
    folder, kind: str, parties, section: str | None = None, *, groups: list | None = None, study: str | None = None
):
    """A study.toml of ``kind`` (id ``study``, default ``<kind>-study``), one row group per party (or ``groups``)."""
    ranges = "\n".join(f"{k} = [{lo}, {hi}]" for k, (lo, hi) in RANGES.items())
    names = groups or [[p.name] for p in parties]
    groups = "\n".join(f"[[row_groups]]\nparties = {g}".replace("'", '"') for g in names)
    path = folder / f"{kind}.toml"
    path.write_text(
        f'[study]\nid = "{study or kind + "-study"}"\nkind = "{kind}"\nseed = 0\n{DCQE if kind == "cate" else ""}'
        f'[server]\naddress = "127.0.0.1:0"\ninsecure = true\n[anchor_ranges]\n{ranges}\n{groups}\n'
        f"[{kind}]\n{SECTIONS[kind] if section is None else section}\n"
    )
    return load_study_config(path)


def exact_adum_ate(data: CausalDataset, cells: int = 5) -> float:
    """eps-ADUM's estimate without noise: per-cell arm means of the clipped outcome, count-weighted."""
    frame = data.frame
    cell = np.clip(np.floor((frame.x + 1) / 2 * cells), 0, cells - 1)
    y = frame.y.clip(*OUTCOME)
    means = y.groupby([cell, frame.t]).mean().unstack()
    return float(((means[1] - means[0]) * cell.value_counts().sort_index()).sum() / len(frame))


def test_an_adum_study_is_the_exact_stratified_estimate_up_to_its_noise_and_charges_each_party_once(data, tmp_path):
    # Noise at epsilon 1e4 per party: counts discrete Laplace of scale 4/eps = 4e-4 (P(any nonzero) < 1e-400);
    # outcome sums Laplace of scale 2 * 2.5 / (eps/2) = 1e-3 per party and cell, so the summed noise of a cell
    # exceeds 4 * 30e-3 with probability < 4 e^-30 ~ 4e-13; a cell holds > 100 subjects per arm, so each arm
    # mean moves by < 1.2e-3 and the ATE by < 2.4e-3.
    parties = four_parties(data, tmp_path, BIG)
    report = run_study(InProcessGrid(parties), study_toml(tmp_path, "adum", parties))
    assert report["estimates"]["eps-adum"]["estimate"] == pytest.approx(exact_adum_ate(data), abs=2.4e-3)
    assert report["estimates"]["eps-adum"]["estimate"] == pytest.approx(1.0, abs=0.05)  # the true ATE
    assert report["privacy"] == {p.name: {"epsilon": BIG, "delta": 0.0} for p in parties}
    for party in parties:
        assert [(c.operation, c.epsilon, c.study) for c in party.ledger.history()] == [("dp_histogram", BIG,
                                                                                       "adum-study")]
    assert report["partition"]["n_cells"] == [5] and len(report["cells"]) == 5


def test_an_adum_study_gives_its_estimate_an_interval_and_says_what_the_cells_adjust_for(data, tmp_path):
    """Issue 38 item 6: an interval from the release (DP noise negligible here: the conservative sampling part,
    from the outcome range), covering the true ATE 1; the partition's columns and those it leaves out named."""
    parties = four_parties(data, tmp_path, BIG)
    report = run_study(InProcessGrid(parties), study_toml(tmp_path, "adum", parties))
    row = report["estimates"]["eps-adum"]
    counts = np.array([[c["noisy_n_control"], c["noisy_n_treated"]] for c in report["cells"]])
    assert row["interval"] == "analytic" and row["no_interval"] is None
    assert row["ci_low"] < 1.0 < row["ci_high"] and row["ci_high"] - row["ci_low"] < 0.5
    # every cell-arm mean's sampling variance bounded by (2.5 + 1.5)^2 / 4 = 4: the SE from the counts alone
    cell_weights = counts.sum(axis=1) / counts.sum()
    bound = np.sqrt((cell_weights**2 * 4.0 * (1 / counts[:, 0] + 1 / counts[:, 1])).sum())
    assert row["se"] == pytest.approx(bound, rel=1e-3)
    assert "cell-adjusted for x only" in row["adjustment"] and "z, w (not in the partition)" in row["adjustment"]
    assert row["unadjusted"]["ci_low"] < row["unadjusted"]["estimate"] < row["unadjusted"]["ci_high"]
    assert report["notes"] and "the ATE are post-processing" in report["notes"][0]
    assert not any("post-processing" in w for w in report["warnings"])  # information is not a warning


def test_a_discovery_study_asks_every_party_holding_the_pair_and_charges_it_per_pair(data, tmp_path):
    parties = four_parties(data, tmp_path, 2 * BIG)
    section = f'epsilon = {BIG}\npairs = [["x", "w"], ["w", "z"]]'
    report = run_study(InProcessGrid(parties), study_toml(tmp_path, "discovery", parties, section))
    assert report["privacy"] == {p.name: {"epsilon": 2 * BIG, "delta": 0.0} for p in parties}
    row = report["estimates"]["x~w"]
    assert set(row["parties"]) == {p.name for p in parties} and row["favoured"] in ("x -> w", "w -> x")
    # named only when right with probability >= 0.95 given the DP noise, else undecided
    assert row["probability"] == pytest.approx(gaussian_probability(row["estimate"], row["noise_sd"]))
    assert row["direction"] == (row["favoured"] if row["probability"] >= 0.95 else "undecided")
    assert np.isfinite(row["estimate"]) and row["noise_sd"] > 0
    for party in parties:
        assert [c.operation for c in party.ledger.history()] == ["dp_discover", "dp_discover"]


def test_the_margin_release_combines_with_sqrt_2_less_noise_than_the_scores_at_the_same_budget(data, tmp_path):
    """release = "margin" (the default) and "scores" on the same parties: the same Laplace scale b_j, once on each
    party's margin instead of on each score, so the combined margin's noise sd is sqrt(sum_j w_j^2 2 b_j^2) instead
    of sqrt(sum_j w_j^2 4 b_j^2); b_j from the public n, the request and split_sensitivity."""
    from collabcausal.estimators.discovery.private_scores import split_sensitivity

    parties = four_parties(data, tmp_path, 2 * BIG)
    rows = {}
    for release in ("margin", "scores"):
        section = f'epsilon = {BIG}\npairs = [["x", "w"]]\nrelease = "{release}"'
        rows[release] = run_study(InProcessGrid(parties), study_toml(tmp_path, "discovery", parties, section))
    margin, scores = (rows[r]["estimates"]["x~w"] for r in ("margin", "scores"))
    assert margin["method"] == "dp-anm-hsic-margin" and scores["method"] == "dp-anm-hsic"
    m = np.array([r["m_test"] for r in margin["parties"].values()], dtype=float)
    n = np.array([p.table.n_subjects for p in parties])
    b = np.array([2 * split_sensitivity("hsic", "both", int(mj), int(nj - mj), 1.0, 0.1) / BIG
                  for mj, nj in zip(m, n, strict=True)])
    w = m / m.sum()
    assert margin["noise_sd"] == pytest.approx(np.sqrt(np.sum(w**2 * 2 * b**2)), rel=1e-12)
    assert scores["noise_sd"] == pytest.approx(np.sqrt(2) * margin["noise_sd"], rel=1e-12)
    assert np.isfinite(margin["estimate"]) and margin["direction"] in ("x -> w", "w -> x", "undecided")
    assert margin["probability"] == pytest.approx(gaussian_probability(margin["estimate"], margin["noise_sd"]))
    assert "released only its HSIC margin" in rows["margin"]["notes"][0]
    for party in parties:
        assert [c.details["release"] for c in party.ledger.history()] == ["margin", "scores"]


def test_a_discovery_pair_no_party_holds_is_refused_before_any_charge(data, tmp_path):
    vertical = build_parties(data, partition_grid(data, 1, column_groups=[("x", "z"), ("w",)], seed=0),
                             anchor_key=simulation_anchor_key(0))
    for party in vertical:
        party.ledger = PrivacyLedger(tmp_path / f"v{party.name}.sqlite", epsilon=BIG, dataset=party.name)
    config = study_toml(tmp_path, "discovery", vertical, f'epsilon = {BIG}\npairs = [["x", "z"], ["x", "w"]]',
                        groups=[["p11", "p12"]])
    with pytest.raises(StudyFailedError, match="no joined party holds both 'x' and 'w'"):
        run_study(InProcessGrid(vertical), config)
    assert all(p.ledger.history() == [] for p in vertical)


def test_a_cate_study_charges_the_analysts_study_ledger_and_no_party(data, tmp_path):
    parties = four_parties(data, tmp_path, BIG)
    config = study_toml(tmp_path, "cate", parties)
    report = run_study(InProcessGrid(parties), config)
    ledger = PrivacyLedger.from_file(tmp_path / "study.sqlite", dataset="study cate-study: rows of X^")
    assert ledger.spent() == pytest.approx((BIG, 1e-3))
    assert all(p.ledger.history() == [] for p in parties)
    assert report["privacy"]["analyst study ledger (rows of X^)"] == {"epsilon": BIG, "delta": 1e-3}
    # red team: the parties' DC-QE rows are not DP; "epsilon 0" (the strongest guarantee) claimed the opposite
    assert all(report["privacy"][p.name] == {"epsilon": None, "delta": None} for p in parties)
    from collabcausal.reporting.document import study_document

    assert "not DP" in study_document(report, {}, seed=0)["privacy_note"]
    assert {"dp-cate-r", "ipw (DC-QE)"} <= set(report["estimates"])
    assert any("NOT subject-level DP" in w for w in report["warnings"])
    with pytest.raises(BudgetExceededError):  # the study ledger holds one release: a re-run is refused
        run_study(InProcessGrid(parties), config)


def test_every_kind_runs_over_grpc_with_four_party_processes_under_mutual_tls_as_in_process(data, tmp_path):
    """One local deployment (four `party join` processes, mutual TLS) serves the three kinds in turn.

    Seeded non-DP parts agree bit for bit (DC-QE's estimates, from the same X^); DP parts draw OS-entropy
    OpenDP noise, never seeded, so they agree within the noise: adum within the computed 2.4e-3 of its
    exact value (first test); DP-CATE's mean within 0.02 (its DP-EBM nuisance noise at eps 1e4: sd 7.4e-4
    over 20 in-process runs, so a difference of two runs has sd 1.0e-3 and 0.02 is 19 of them).
    """
    from collabcausal.protocol.launcher import local_grpc_grid

    local_parties = four_parties(data, tmp_path, 2 * BIG)
    folders = {"local": tmp_path / "local", "grpc": tmp_path / "grpc"}
    for folder in folders.values():
        folder.mkdir()
    # Every party process joined the one study "kinds" (it refuses a request naming another); the
    # study id seeds the anchor, so the in-process run uses it too.
    configs = {w: {k: study_toml(f, k, local_parties, study="kinds") for k in SECTIONS} for w, f in folders.items()}
    local = {k: run_study(InProcessGrid(local_parties), c) for k, c in configs["local"].items()}
    with local_grpc_grid(four_parties(data, tmp_path / "grpc", 2 * BIG), workdir=tmp_path / "work", tls=True,
                         study="kinds") as grid:
        served = {k: run_study(grid, c) for k, c in configs["grpc"].items()}
    for report in (local, served):
        assert report["adum"]["estimates"]["eps-adum"]["estimate"] == pytest.approx(exact_adum_ate(data), abs=2.4e-3)
        assert report["discovery"]["privacy"] == {p.name: {"epsilon": BIG, "delta": 0.0} for p in local_parties}
    for name in ("psm (DC-QE)", "ipw (DC-QE)", "aipw (DC-QE)"):
        assert served["cate"]["estimates"][name] == local["cate"]["estimates"][name]
    cate = [r["cate"]["estimates"]["dp-cate-r"]["estimate"] for r in (local, served)]
    assert cate[0] == pytest.approx(cate[1], abs=0.02)
    for party in local_parties:
        ledger = PrivacyLedger.from_file(tmp_path / "work" / party.name / "ledger.sqlite")
        charges = [(c.operation, c.study) for c in ledger.history()]
        assert charges == [("dp_histogram", "kinds"), ("dp_discover", "kinds")]


class Tampering(Party):
    """An evil party: answers honestly, then rewrites its reply with ``tamper``."""

    def __init__(self, honest: Party, tamper) -> None:
        super().__init__(honest.name, honest.table, ledger=honest.ledger, anchor_key=honest.anchor_key)
        self.tamper = tamper

    def handle(self, request: Message) -> Message:
        reply = super().handle(request)
        return self.tamper(reply) if request.operation in ("dp_histogram", "dp_discover") else reply


def _swap(reply: Message, params: dict | None = None, arrays: dict | None = None) -> Message:
    return Message(reply.operation, {**reply.params, **(params or {})}, {**reply.arrays, **(arrays or {})})


SCORES = SECTIONS["discovery"] + '\nrelease = "scores"'
ATTACKS = {  # (kind, the evil party's rewrite of its reply[, the kind's section])
    "NaN counts": ("adum", lambda r: _swap(r, arrays={"counts": np.full_like(r.array("counts"), np.nan)})),
    "an extra cell": ("adum", lambda r: _swap(r, arrays={"sums": np.zeros((6, 2, 1))})),
    "no sums": ("adum", lambda r: Message(r.operation, r.params, {"counts": r.array("counts")})),
    # red team: a count no party of its size can release (beyond 40 noise scales of [0, n]) made its cell's
    # uplift the whole ATE; so did an outcome sum beyond n max|bound|
    "an outweighing count": ("adum", lambda r: _swap(r, arrays={"counts": r.array("counts") + 1e12})),
    "a negative count": ("adum", lambda r: _swap(r, arrays={"counts": r.array("counts") - 1e6})),
    "an impossible outcome sum": ("adum", lambda r: _swap(r, arrays={"sums": r.array("sums") + 1e9})),
    # claiming a larger test split would weigh its scores above every honest party's in the combined margin
    "an inflated test split": ("discovery", lambda r: _swap(r, {"m_test": 10**6})),
    "a NaN score": ("discovery", lambda r: _swap(r, {"score_xy": float("nan")}), SCORES),
    "no noise scale": ("discovery", lambda r: _swap(r, {"noise_scale": None})),
    "a missing score": ("discovery", lambda r: Message(r.operation, {k: v for k, v in r.params.items()
                                                                     if k != "score_yx"}), SCORES),
    "a NaN margin": ("discovery", lambda r: _swap(r, {"margin": float("nan")})),
    "a missing margin": ("discovery", lambda r: Message(r.operation, {k: v for k, v in r.params.items()
                                                                      if k != "margin"})),
    # a margin lies in [-m^2/(m-1)^2, m^2/(m-1)^2]; 1e300 would outweigh every honest party
    "an impossible margin": ("discovery", lambda r: _swap(r, {"margin": -1e300})),
    "scores where the margin was asked": ("discovery", lambda r: _swap(r, {"form": "scores"})),
    # red team: a party claiming less noise than its release carries made the report's noise_sd (and so the
    # direction's apparent significance) wrong; the scale is a function of public n and the request
    "an understated noise scale": ("discovery", lambda r: _swap(r, {"noise_scale": r.params["noise_scale"] / 100})),
    "a direction its margin contradicts": ("discovery", lambda r: _swap(r, {
        "direction": "y->x" if r.params["direction"] == "x->y" else "x->y"})),
    "a direction its scores contradict": ("discovery", lambda r: _swap(r, {
        "direction": "y->x" if r.params["direction"] == "x->y" else "x->y"}), SCORES),
    "markup for a direction": ("discovery", lambda r: _swap(r, {"direction": "<script>alert(1)</script>"})),
    "an agreement above 1": ("discovery", lambda r: _swap(r, {"agreement": 7.0})),
    # an HSIC score lies in [0, m^2/(m-1)^2]; 1e300 outweighed every honest party (the margin became 2.5e299)
    "an impossible score": ("discovery", lambda r: _swap(r, {"score_yx": 1e300}), SCORES),
}


@pytest.mark.parametrize("attack", list(ATTACKS))
def test_an_evil_party_cannot_slip_a_malformed_or_outweighing_release_into_a_study(data, tmp_path, attack):
    kind, tamper, *section = ATTACKS[attack]  # discovery: release = "margin" (the default) unless SCORES
    parties = four_parties(data, tmp_path, BIG)
    parties[2] = Tampering(parties[2], tamper)
    operation = {"adum": "dp_histogram", "discovery": "dp_discover"}[kind]
    with pytest.raises(StudyFailedError, match=f"party '{parties[2].name}' sent a {operation} reply"):
        run_study(InProcessGrid(parties), study_toml(tmp_path, kind, parties, *section))


def test_an_adum_study_whose_noisy_counts_are_all_non_positive_reports_no_estimate_and_publishes(data, tmp_path):
    # Red team: clip(noisy counts, 0) summing to 0 (every cell's noisy count <= 0: a tiny eps, or a party's
    # reply) made the ATE NaN, and publishing the report then crashed (format of None). Here one party's
    # reply is rewritten to hold the counts of a release with no subjects in any cell at a tiny epsilon.
    from collabcausal.commands.analyst import publish_report

    parties = four_parties(data, tmp_path, BIG)
    for k in range(4):
        parties[k] = Tampering(parties[k], lambda r: _swap(r, arrays={"counts": -np.ones_like(r.array("counts"))}))
    section = SECTIONS["adum"].replace(f"epsilon = {BIG}", "epsilon = 1.0")  # -1 is within the noise at eps 1
    report = run_study(InProcessGrid(parties), study_toml(tmp_path, "adum", parties, section))
    assert report["estimates"]["eps-adum"]["estimate"] is None
    assert any("no noisy count above 0" in w for w in report["warnings"])
    json_path, html_path = publish_report(report, {}, tmp_path / "out")
    assert json_path.is_file() and html_path.is_file()


@pytest.fixture
def seeded_votes(monkeypatch):
    """The parties' random groups (and each group's ANM) of dp_discover_vote, seeded: the votes become reproducible,
    so the share is checked at one seed (18 of 20 groups right). Fresh groups miss the share's bound by chance:
    over 150 fresh permutations (3,000 groups) a group was right with probability 0.949, and one had only 15 of 20
    right (share 0.25, not > 0.25); Binomial(20, 0.051) puts 5 or more wrong at 2.8e-3. Seeded groups are not what
    a party draws; the Laplace noise (OpenDP, unseeded, sd 1.4e-5 on the share at eps 1e4) and the charge are
    unchanged."""
    monkeypatch.setattr(discovery_vote, "group_votes", partial(group_votes, random_state=0))


def test_a_discovery_study_with_the_vote_release_names_the_cause_and_charges_each_party_once_per_pair(
        data, tmp_path, seeded_votes):
    """release = "vote" (dp_discover_vote: every row protected, no public bounds): 4 parties x 5 groups of 100 each
    vote with the reference ANM on w = x^3 + noise; at eps 1e4 the combined share of groups names x -> w (each group
    right with probability about 0.95 on this pair: a wrong majority of 20 is below 1e-8; the share of the seeded
    groups is 18 of 20 right, 0.4 above 1/2)."""
    parties = four_parties(data, tmp_path, BIG)
    section = f'epsilon = {BIG}\npairs = [["x", "w"]]\nrelease = "vote"\ngroup_size = 100'
    report = run_study(InProcessGrid(parties), study_toml(tmp_path, "discovery", parties, section))
    row = report["estimates"]["x~w"]
    assert row["method"] == "dp-anm-vote-gp" and row["direction"] == "x -> w" and row["estimate"] > 0.25
    assert {p: r["n_groups"] for p, r in row["parties"].items()} == {p.name: 5 for p in parties}
    assert row["noise_sd"] == pytest.approx(np.sqrt(4 * 2.0 / BIG**2) / 20)
    assert "subsample and aggregate" in report["notes"][0]
    for party in parties:
        assert [c.operation for c in party.ledger.history()] == ["dp_discover_vote"]
