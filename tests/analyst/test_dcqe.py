"""The analyst's DC-QE study over a grid of in-process parties."""

from __future__ import annotations

import dataclasses
import weakref
from collections.abc import Mapping

import numpy as np
import pandas as pd
import pytest

from collabcausal.analyst.dcqe import DCQEPlan, describe_parties, run_dcqe
from collabcausal.analyst.effects import estimate_effects
from collabcausal.anchor_key import simulation_anchor_key
from collabcausal.errors import InputError, StudyFailedError
from collabcausal.estimators.balance import smd
from collabcausal.messages import Message
from collabcausal.party import Party, PartyTable
from collabcausal.protocol.inprocess import InProcessGrid
from collabcausal.simulations.datasets import load_lalonde, make_dcqe_synthetic
from collabcausal.simulations.partition import build_parties, partition_grid


def lalonde_grid() -> tuple[InProcessGrid, DCQEPlan, object]:
    data = load_lalonde()
    part = partition_grid(data, 2, seed=0)
    ranges = data.covariate_ranges()
    plan = DCQEPlan(part.names(), ranges, n_anchors=data.n_subjects, party_components=4, estimand="att")
    return InProcessGrid(build_parties(data, part, anchor_key=simulation_anchor_key(0))), plan, (data, part)


def test_full_rank_single_party_dcqe_propensities_equal_centralized() -> None:
    data = load_lalonde()
    table = PartyTable.from_frame(data.frame, data.covariates, treatment="treat", outcome="re78")
    party = Party("solo", table, anchor_key=simulation_anchor_key(0))
    ranges = data.covariate_ranges()
    plan = DCQEPlan([["solo"]], ranges, n_anchors=data.n_subjects, party_components=8, n_components=8)
    result = run_dcqe(InProcessGrid([party]), plan)
    X = data.frame[list(data.covariates)].to_numpy(float)
    central = estimate_effects(X, data.frame["treat"].to_numpy(), data.frame["re78"].to_numpy(), estimators=["ipw"])
    assert np.max(np.abs(result.effects.propensity - central.propensity)) < 1e-6


def test_federated_smd_equals_smd_on_pooled_raw_covariates() -> None:
    grid, plan, (data, part) = lalonde_grid()
    rows = [np.arange(len(g))[::-1].copy() for g in part.row_groups]  # any resample order
    result = run_dcqe(grid, plan, rows)
    subjects = np.concatenate([g[r] for g, r in zip(part.row_groups, rows, strict=True)])
    cols = [c for g in part.column_groups for c in g]
    X = data.frame[cols].to_numpy(float)[subjects]
    for name in ("psm", "ipw"):
        expected = smd(X, result.treatment, result.effects.balance_weights(name))
        np.testing.assert_allclose(result.smd[name], expected, rtol=1e-9, atol=1e-12)
    assert result.covariates[:2] == ("p11:age", "p11:married")
    assert result.masmd("aipw") is None
    # the unweighted "before" of the Love plot, from the same federated moments with unit weights
    np.testing.assert_allclose(result.smd_unweighted, smd(X, result.treatment), rtol=1e-9, atol=1e-12)
    assert run_dcqe(grid, plan, rows, unweighted_smd=False).smd_unweighted is None


def test_w_collaboration_recovers_the_centralized_att_closely() -> None:
    grid, plan, _ = lalonde_grid()
    result = run_dcqe(grid, plan)
    assert result.representation.X_hat.shape == (2675, 8)
    assert abs(result.effects.estimates["ipw"].estimate - 1.7) < 0.6


def test_a_study_whose_parties_read_their_tables_out_of_core_gives_the_in_memory_numbers(tmp_path) -> None:
    """Every LaLonde party as a directory of Parquet files: representations and balance moments from blocks."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from collabcausal.party.chunked_table import ChunkedTable

    grid, plan, (data, part) = lalonde_grid()
    expected = run_dcqe(grid, plan)
    parties = build_parties(data, part, anchor_key=simulation_anchor_key(0))
    for party in parties:
        table, folder = party.table, tmp_path / party.name
        folder.mkdir()
        columns = dict(zip(table.covariate_names, table.covariates.T, strict=True))
        labels = {"treat": table.treatment, "re78": table.outcome} if table.has_labels else {}
        pq.write_table(pa.table(columns | labels), folder / "part-0.parquet", row_group_size=500)
        names = {"treatment": "treat", "outcome": "re78"} if labels else {}
        party.table = ChunkedTable.open(folder, table.covariate_names, **names)
    got = run_dcqe(InProcessGrid(parties), plan)
    assert all(len(p.table.blocks) == 3 for p in parties)  # 1,337 or 1,338 rows in row groups of 500
    for name in plan.estimators:
        assert got.effects.estimates[name].estimate == pytest.approx(expected.effects.estimates[name].estimate, 1e-9)
    for name, values in expected.smd.items():
        np.testing.assert_allclose(got.smd[name], values, rtol=1e-8, atol=1e-11)
    np.testing.assert_allclose(got.smd_unweighted, expected.smd_unweighted, rtol=1e-9, atol=1e-12)


def test_parties_of_a_row_group_with_different_counts_fail_the_study() -> None:
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"a": rng.normal(size=30), "b": rng.normal(size=30), "t": np.arange(30) % 2, "y": 0.0})
    p1 = Party("p11", PartyTable.from_frame(df, ["a"], treatment="t", outcome="y"))
    p2 = Party("p12", PartyTable.from_frame(df.iloc[:25], ["b"]))
    plan = DCQEPlan([["p11", "p12"]], {"a": (-3, 3), "b": (-3, 3)}, n_anchors=20)
    with pytest.raises(StudyFailedError, match="disagree on subject count \\(p11: 30, p12: 25\\)"):
        describe_parties(InProcessGrid([p1, p2]), plan)


def test_parties_of_a_row_group_with_different_ids_fail_the_study() -> None:
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"a": rng.normal(size=30), "t": np.arange(30) % 2, "y": 0.0, "id": [f"s{i}" for i in range(30)]})
    p1 = Party("p11", PartyTable.from_frame(df, ["a"], treatment="t", outcome="y", subject_id="id"))
    shuffled = df.assign(id=df["id"][::-1].to_numpy())
    p2 = Party("p12", PartyTable.from_frame(shuffled.rename(columns={"a": "b"}), ["b"], subject_id="id"))
    plan = DCQEPlan([["p11", "p12"]], {"a": (-3, 3), "b": (-3, 3)}, n_anchors=20)
    with pytest.raises(StudyFailedError, match="different subject ids or orders"):
        describe_parties(InProcessGrid([p1, p2]), plan)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"row_groups": []}, "at least one row group"),
        ({"row_groups": [["a", "b"], ["a"]]}, "appears twice"),
        ({"label_holders": ["zz"]}, "label holder"),
        ({"estimand": "atc"}, "unknown estimand"),
        ({"estimators": ["psm", "tmle"]}, "unknown estimator 'tmle'"),
    ],
)
def test_invalid_plans_are_refused(kwargs, message) -> None:
    args = {"row_groups": [["a", "b"]], "anchor_ranges": {}, "n_anchors": 10} | kwargs
    with pytest.raises(InputError, match=message):
        DCQEPlan(**args)


def test_w_collaboration_numbers_are_pinned() -> None:
    """Estimates and SEs of a seeded study, over more rows than a block and an anchor too large to cache.

    Speed-ups of the pipeline may change the rounding only: these are the figures of the code before them.
    """
    data = make_dcqe_synthetic(140_000, 3, n_covariates=10)
    part = partition_grid(data, 2, seed=3)
    grid = InProcessGrid(build_parties(data, part, anchor_key=simulation_anchor_key(3)))
    plan = DCQEPlan(
        part.names(), data.covariate_ranges(), n_anchors=220_000, party_components=4, estimators=("psm", "ipw", "aipw")
    )
    result = run_dcqe(grid, plan)
    pinned = {
        "psm": (1.0052709795459365, 0.011474876770521062),
        "ipw": (1.0500072104782567, 0.051484424937003705),
        "aipw": (1.006831710093586, 0.009468847134945316),
    }
    for name, (estimate, se) in pinned.items():
        got = result.effects.estimates[name]
        np.testing.assert_allclose([got.estimate, got.se], [estimate, se], rtol=1e-10)
    psm_smd = [-0.0010816533174688439, 0.0068795030156109825, 0.008534543824932359]
    np.testing.assert_allclose(result.smd["psm"][:3], psm_smd, rtol=1e-9)
    before = [0.7640896443398731, 0.7592275131992451, 0.7581703273181603]
    np.testing.assert_allclose(result.smd_unweighted[:3], before, rtol=1e-10)


class AnchorBlockGrid(InProcessGrid):
    """An in-process grid that records each ``dc_representation`` round's anchor rows and the A~ blocks it returned."""

    def __init__(self, grid: InProcessGrid) -> None:
        super().__init__(grid._parties.values())
        self.blocks: list[tuple[int, int]] = []
        self.alive_when_asked: list[int] = []
        self._returned: list[weakref.ref] = []

    def alive(self) -> int:
        """Anchor image blocks returned so far that someone still holds."""
        return sum(ref() is not None for ref in self._returned)

    def send_and_receive(self, requests: Mapping[str, Message], *, timeout: float | None = None) -> dict[str, Message]:
        if next(iter(requests.values())).operation == "dc_representation":
            self.alive_when_asked.append(self.alive())
            spans = {tuple(m.params["anchor_rows"]) for m in requests.values()}
            assert len(spans) == 1 and set(requests) == set(self.party_names())
            self.blocks.append(spans.pop())
        replies = super().send_and_receive(requests, timeout=timeout)
        self._returned += [weakref.ref(r.arrays["a_tilde"]) for r in replies.values() if "a_tilde" in r.arrays]
        return replies


def test_anchor_images_in_blocks_give_the_numbers_of_one_request_and_are_held_one_block_at_a_time() -> None:
    """Anchor rows asked for in blocks: every party sends each block once, the analyst drops it before asking
    for the next (its memory does not grow with the parties), and the results are those of one request."""
    grid, plan, _ = lalonde_grid()
    whole = run_dcqe(grid, plan)
    recording = AnchorBlockGrid(grid)
    width = sum(len(p.table.covariate_names) for p in grid._parties.values())
    blocked = run_dcqe(recording, dataclasses.replace(plan, anchor_block_values=width * 100))
    r = plan.n_anchors
    assert recording.blocks == [(lo, min(lo + 100, r)) for lo in range(0, r, 100)]
    assert recording.alive_when_asked == [0] * len(recording.blocks) and recording.alive() == 0
    np.testing.assert_allclose(blocked.representation.X_hat, whole.representation.X_hat, rtol=1e-9, atol=1e-12)
    for name, estimate in whole.effects.estimates.items():
        np.testing.assert_allclose(blocked.effects.estimates[name].estimate, estimate.estimate, rtol=1e-10)


def test_parties_asked_concurrently_give_the_numbers_of_parties_asked_in_turn() -> None:
    """``workers`` changes when the parties work, not what they compute: the same numbers, bit for bit."""
    data = make_dcqe_synthetic(20_000, 5, n_covariates=10)
    part = partition_grid(data, 2, seed=5)
    plan = DCQEPlan(
        part.names(), data.covariate_ranges(), n_anchors=30_000, party_components=4, anchor_block_values=20 * 4_000
    )
    results = [
        run_dcqe(InProcessGrid(build_parties(data, part, anchor_key=simulation_anchor_key(5)), workers=w), plan)
        for w in (1, 4)
    ]
    in_turn, concurrent = results
    np.testing.assert_array_equal(concurrent.representation.X_hat, in_turn.representation.X_hat)
    for name, estimate in in_turn.effects.estimates.items():
        assert (concurrent.effects.estimates[name].estimate, concurrent.effects.estimates[name].se) == (
            estimate.estimate,
            estimate.se,
        )
    for name, smd_values in in_turn.smd.items():
        np.testing.assert_array_equal(concurrent.smd[name], smd_values)


def test_resampled_logits_are_the_full_sample_logits_of_each_row_groups_drawn_subjects():
    from scipy.special import logit

    from collabcausal.analyst.dcqe import resampled_logits

    e = np.array([0.1, 0.2, 0.3, 0.4, 0.5])  # row groups of 2 and 3 subjects, stacked
    rows = [np.array([1, 1]), np.array([2, 0, 0])]
    np.testing.assert_array_equal(resampled_logits(logit(e), rows), logit(np.array([0.2, 0.2, 0.5, 0.3, 0.3])))
    with pytest.raises(InputError, match="full-sample logits cover 5 subjects, the resample's row groups 4"):
        resampled_logits(logit(e), [np.array([0, 1]), np.array([0, 1])])
