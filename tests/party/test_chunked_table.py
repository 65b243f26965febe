"""A party's table read out of core (collabcausal/party/chunked_table.py): same numbers as in memory, same checks.

The table is written as three Parquet files of several row groups; the second file is sorted by
treatment, so some blocks hold one arm only (a registry sorted by exposure).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from chunked_tables import COLUMNS, FM, MODEL, effects_request, ledger_party

from collabcausal.errors import ConfigError, InputError, PolicyError
from collabcausal.estimators.blocks import ColumnMoments
from collabcausal.messages import Message
from collabcausal.party import PartyTable
from collabcausal.party.chunked_table import ChunkedTable
from collabcausal.party.config import load_party_config
from collabcausal.party.dp_effects import SCORES, STATISTICS, parse_request, row_sums
from collabcausal.party.sources import DataSource, read_table

RANGES = {"a": [-4.0, 4.0], "b": [0.0, 10.0], "c": [-4.0, 4.0]}


def frame(n: int = 2400, seed: int = 5) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3)) * [1.0, 2.0, 0.5] + [0.0, 5.0, 0.0]
    t = (rng.random(n) < 1 / (1 + np.exp(-X[:, 0]))).astype(np.int64)
    y = X @ [0.5, 0.2, -1.0] + 1.5 * t + rng.normal(size=n)
    return pd.DataFrame({"a": X[:, 0], "b": X[:, 1], "c": X[:, 2], "t": t, "y": y})


def write_directory(path, df: pd.DataFrame, row_group: int = 300):
    """Three files in two subdirectories, the second sorted by treatment; returns the rows in table order."""
    parts = np.array_split(np.arange(len(df)), 3)
    ordered = [df.iloc[parts[0]], df.iloc[parts[1]].sort_values("t", kind="stable"), df.iloc[parts[2]]]
    for k, part in enumerate(ordered):
        folder = path / f"year={2020 + k // 2}"
        folder.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.Table.from_pandas(part, preserve_index=False), folder / f"part-{k}.parquet",
                       row_group_size=row_group)
    return pd.concat(ordered, ignore_index=True)


@pytest.fixture
def tables(tmp_path):
    ordered = write_directory(tmp_path / "registry", frame())
    chunked = ChunkedTable.open(tmp_path / "registry", COLUMNS, treatment="t", outcome="y", workers=2)
    memory = PartyTable.from_frame(ordered, COLUMNS, treatment="t", outcome="y")
    return chunked, memory


def test_blocks_follow_the_files_sorted_path_order_and_their_row_groups(tables):
    chunked, memory = tables
    assert chunked.n_subjects == memory.n_subjects == 2400
    assert len(chunked.blocks) == 9  # 800 rows per file in row groups of 300, 300, 200
    assert [b.start for b in chunked.blocks] == [0, 300, 600, 800, 1100, 1400, 1600, 1900, 2200]
    np.testing.assert_array_equal(chunked.arm_counts, memory.arm_counts)
    assert chunked.has_labels and chunked.covariate_names == tuple(COLUMNS)


def test_the_moments_of_the_blocks_merge_into_the_tables(tables):
    chunked, memory = tables
    merged = chunked.reduce_rows(lambda _, X, t, y: ColumnMoments.of(X), COLUMNS, ColumnMoments.merge)
    whole = ColumnMoments.of(memory.covariates)
    assert merged.n == whole.n
    np.testing.assert_allclose(merged.mean, whole.mean, rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(merged.gram, whole.gram, rtol=1e-11)


@pytest.mark.parametrize("op", [STATISTICS, SCORES])
def test_the_exact_dp_effects_sums_equal_the_in_memory_ones(tmp_path, tables, op):
    """The sums the noise is added to; the second file's single-arm blocks included. Folds: same secret."""
    chunked, memory = tables
    out_of_core, in_memory = ledger_party(tmp_path, chunked), ledger_party(tmp_path, memory, "q")
    in_memory.ledger = out_of_core.ledger  # one fold secret
    request = effects_request(op)
    if op == STATISTICS:
        from collabcausal.estimators.dp.effects.release import party_statistics

        def per_rows(X, t, y, folds):
            return party_statistics(X, t, y, FM, 0, folds, 3)
    else:
        from collabcausal.estimators.dp.effects.release import party_score_sums
        from collabcausal.estimators.dp.effects.scores import components

        parts = components(["aipw", "ipw"], ["ate", "att"], FM.outcome_width, 0.05)

        def per_rows(X, t, y, folds):
            return party_score_sums(X, t, y, FM, 0, folds, [MODEL] * 3, parts, 0.05)

    ours = row_sums(out_of_core, parse_request(out_of_core, request), per_rows).sums
    theirs = row_sums(in_memory, parse_request(in_memory, request), per_rows).sums
    np.testing.assert_allclose(ours, theirs, rtol=1e-11, atol=1e-9)
    assert np.abs(theirs).max() > 10


@pytest.mark.parametrize("op", [STATISTICS, SCORES])
def test_a_dp_effects_release_from_an_out_of_core_table_is_charged_and_calibrated(tmp_path, tables, op):
    party = ledger_party(tmp_path, tables[0])
    reply = party.handle(effects_request(op))
    assert reply.params["n_subjects"] == 2400 and np.isfinite(reply.arrays["values"]).all()
    assert len(party.ledger.history()) == 1


def test_the_representation_is_the_in_memory_one(tmp_path, tables):
    """Also without the labels: that request projects with the out-of-core fit of the first."""
    chunked, memory = tables
    request = Message("dc_representation", {"study": "s", "n_anchors": 60, "anchor_ranges": RANGES,
                                            "n_components": 2, "labels": True})
    party = ledger_party(tmp_path, chunked)
    ours, theirs = party.handle(request), ledger_party(tmp_path, memory, "q").handle(request)
    for name in ("x_tilde", "a_tilde", "outcome"):
        np.testing.assert_allclose(ours.arrays[name], theirs.arrays[name], rtol=1e-9, atol=1e-11)
    np.testing.assert_array_equal(ours.arrays["treatment"], theirs.arrays["treatment"])
    unlabelled = party.handle(Message("dc_representation", {**request.params, "labels": False}))
    assert set(unlabelled.arrays) == {"x_tilde", "a_tilde"}
    for name in ("x_tilde", "a_tilde"):
        np.testing.assert_array_equal(unlabelled.arrays[name], ours.arrays[name])


def _moments_request(op: str, rows: np.ndarray | None, n: int, seed: int = 3) -> Message:
    """Arms and weights for ``n`` request rows (``rows``: a resample, repeats included); DP on ``op`` dp_..."""
    rng = np.random.default_rng(seed)
    arrays = {"arms": (rng.random(n) < 0.4).astype(np.int8), "weights": rng.uniform(0.2, 3.0, n)}
    if rows is not None:
        arrays["rows"] = rows
    params = {"study": "s"}
    if op == "dp_weighted_moments":
        params |= {"epsilon": 1.0, "delta": 1e-6, "columns": ["c", "a"], "bounds": [[-1.0, 1.0], [-4.0, 4.0]]}
    return Message(op, params, arrays)


@pytest.mark.parametrize("op", ["weighted_moments", "dp_weighted_moments"])
@pytest.mark.parametrize("resample", [False, True])
def test_balance_moments_are_the_in_memory_ones_whole_or_resampled(tmp_path, tables, monkeypatch, op, resample):
    """One pass over the blocks, a resample's repeats weighted per row: the in-memory sums (DP: before the noise)."""
    monkeypatch.setattr("collabcausal.party.dp_balance.gaussian", lambda values, sensitivity, eps, delta: values)
    chunked, memory = tables
    rows = np.random.default_rng(1).integers(0, 2400, 2400) if resample else None
    request = _moments_request(op, rows, 2400)
    out_of_core, in_memory = ledger_party(tmp_path, chunked), ledger_party(tmp_path, memory, "q")
    ours, theirs = out_of_core.handle(request), in_memory.handle(request)
    for name in ("sum_w", "sum_w2", "sum_wx", "sum_wx2"):
        np.testing.assert_allclose(ours.arrays[name], theirs.arrays[name], rtol=1e-12)
    assert ours.params == theirs.params
    assert [(c.operation, c.details) for c in out_of_core.ledger.history()] == [
        (c.operation, c.details) for c in in_memory.ledger.history()
    ]
    X = memory.covariates[:, [2, 0]] if op == "dp_weighted_moments" else memory.covariates
    if op == "dp_weighted_moments":  # clipped to the bounds and standardised to [-1, 1]
        X = np.clip(X, [-1.0, -4.0], [1.0, 4.0]) / [1.0, 4.0]
    gathered = X if rows is None else X[rows]
    arms, weights = request.arrays["arms"], request.arrays["weights"]
    for arm in (0, 1):
        w = weights * (arms == arm)
        np.testing.assert_allclose(ours.arrays["sum_wx"][arm], w @ gathered, rtol=1e-12)
        np.testing.assert_allclose(ours.arrays["sum_wx2"][arm], w @ gathered**2, rtol=1e-12)
        assert ours.arrays["sum_w2"][arm] == pytest.approx(np.sum(w * w), rel=1e-14)


@pytest.mark.parametrize("resample", [False, True])
def test_stacked_samples_are_answered_as_the_requests_of_each_in_memory_and_out_of_core(tmp_path, tables, resample):
    """(k, rows) weights: one pass, each sample's moments those of its own request (stacked on a leading axis)."""
    rows = np.random.default_rng(2).integers(0, 2400, 2400) if resample else None
    requests = [_moments_request("weighted_moments", rows, 2400, seed) for seed in (3, 4, 5)]
    arms = requests[0].arrays["arms"]
    requests = [Message(r.operation, r.params, {**r.arrays, "arms": arms}) for r in requests]  # one arm per row
    weights = np.stack([r.arrays["weights"] for r in requests])
    stacked = Message("weighted_moments", {"study": "s"}, {**requests[0].arrays, "weights": weights})
    for table, name in zip(tables, "pq", strict=True):
        party = ledger_party(tmp_path, table, name)
        reply = party.handle(stacked)
        for k, request in enumerate(requests):
            alone = party.handle(request)
            for name in ("sum_w", "sum_w2", "sum_wx", "sum_wx2"):
                np.testing.assert_allclose(reply.arrays[name][k], alone.arrays[name], rtol=1e-12)


def test_a_dp_moments_request_refuses_stacked_samples_before_any_charge(tmp_path, tables):
    request = _moments_request("dp_weighted_moments", None, 2400)
    weights = np.stack([request.arrays["weights"]] * 2)
    party = ledger_party(tmp_path, tables[1])
    with pytest.raises(InputError, match=r"weights must be one-dimensional, got shape \(2, 2400\)"):
        party.handle(Message(request.operation, request.params, {**request.arrays, "weights": weights}))
    assert party.ledger.history() == []


def test_operations_that_need_the_rows_in_memory_and_resamples_are_refused(tmp_path, tables):
    party = ledger_party(tmp_path, tables[0])
    dp_mean = Message("dp_mean", {"epsilon": 1.0, "columns": ["a"], "sums": [{"column": "a", "bounds": [-4, 4]}]})
    with pytest.raises(PolicyError, match="out of core, and dp_mean needs it in memory"):
        party.handle(dp_mean)
    resample = Message("dc_representation", {"study": "s", "n_anchors": 60, "anchor_ranges": RANGES,
                                             "n_components": 2}, {"rows": np.arange(10)})
    with pytest.raises(PolicyError, match="does not answer a resample"):
        party.handle(resample)
    assert party.ledger.history() == []
    assert party.handle(Message("describe", {"study": "s"})).params["n_subjects"] == 2400


def _write(path, df: pd.DataFrame, name: str = "part-0.parquet", row_group: int = 100) -> None:
    path.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pandas(df, preserve_index=False), path / name, row_group_size=row_group)


@pytest.mark.parametrize(("damage", "whole", "match"), [
    (lambda df: df.assign(b=np.where(np.arange(len(df)) == 550, np.inf, df["b"])), False,
     r"part-1.parquet\): column 'b' has a NaN or infinite value \(row 551\)"),
    (lambda df: df.assign(y=np.where(np.arange(len(df)) == 420, np.nan, df["y"])), False,
     r"part-1.parquet\): column 'y' has a NULL \(row 421\)"),
    (lambda df: df.assign(t=np.where(np.arange(len(df)) == 307, 2, df["t"])), False, "must be coded 0/1, found 2"),
    (lambda df: df.drop(columns="c"), False, "part-1.parquet: unknown column 'c'"),
    (lambda df: df.assign(a=df["a"].astype(str)), False, "column 'a' is not numeric"),
    (lambda df: df.assign(c=1.0), True, "covariate 'c' is constant"),
    (lambda df: df.assign(t=1), True, "only one arm among 600 subjects"),
])
def test_bad_data_in_any_block_is_a_one_line_error_naming_the_file_and_row(tmp_path, damage, whole, match):
    df = frame(600)
    _write(tmp_path / "d", damage(df).iloc[:300] if whole else df.iloc[:300])
    _write(tmp_path / "d", damage(df).iloc[300:], "part-1.parquet")
    with pytest.raises(InputError, match=match) as info:
        ChunkedTable.open(tmp_path / "d", COLUMNS, treatment="t", outcome="y")
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(("setup", "kwargs", "match"), [
    (lambda d: d.mkdir(), {}, "no .parquet files in the directory"),
    (lambda d: None, {}, "no such directory"),
    (lambda d: _write(d, frame(50)), {"subject_id": "b"}, "subject id column cannot be read out of core"),
    (lambda d: _write(d, frame(50)), {"workers": 0}, "workers must be an int >= 1"),
    (lambda d: _write(d, frame(5)), {}, "5 subjects, fewer than the minimum 10"),
    (lambda d: (d.mkdir(), (d / "x.parquet").write_bytes(b"not parquet")), {}, "not a readable parquet table"),
])
def test_a_bad_directory_is_a_one_line_error(tmp_path, setup, kwargs, match):
    setup(tmp_path / "d")
    with pytest.raises(InputError, match=match):
        ChunkedTable.open(tmp_path / "d", ["a", "c"] if "subject_id" in kwargs else COLUMNS,
                          **({"treatment": "t", "outcome": "y"} | kwargs))


def test_a_constant_covariate_can_be_dropped_with_a_warning(tmp_path):
    _write(tmp_path / "d", frame(200).assign(c=3.0))
    with pytest.warns(UserWarning, match="dropping constant covariates"):
        table = ChunkedTable.open(tmp_path / "d", COLUMNS, treatment="t", outcome="y", on_constant="drop")
    assert table.covariate_names == ("a", "b")


CONFIG = """
[party]
name = "h1"
study = "s"
[analyst]
address = "127.0.0.1:50051"
ca = "ca.pem"
cert = "h1.pem"
key = "h1.key"
[data]
path = "{path}"
treatment = "t"
outcome = "y"
{extra}
[policy]
columns = ["c", "a"]
operations = ["describe", "dp_effects_statistics"]
"""


def test_a_party_config_naming_a_directory_reads_it_out_of_core(tmp_path):
    write_directory(tmp_path / "registry", frame(600))
    (tmp_path / "party.toml").write_text(CONFIG.format(path="registry", extra="workers = 1"))
    party = load_party_config(tmp_path / "party.toml").build_party()
    assert isinstance(party.table, ChunkedTable) and party.table.workers == 1
    assert party.table.covariate_names == ("c", "a") and party.table.n_subjects == 600
    direct = read_table(DataSource(path=tmp_path / "registry"), ["a"], treatment="t", outcome="y")
    assert isinstance(direct, ChunkedTable) and direct.workers >= 1


def test_workers_with_a_single_file_is_a_config_error(tmp_path):
    frame(20).to_csv(tmp_path / "t.csv", index=False)
    (tmp_path / "party.toml").write_text(CONFIG.format(path="t.csv", extra="workers = 2"))
    with pytest.raises(ConfigError, match="workers goes with a path naming a directory"):
        load_party_config(tmp_path / "party.toml")


def test_a_file_changed_after_opening_fails_a_release_without_describing_the_rows(tmp_path, tables):
    """A hostile or careless rewrite between opening and a charged release: the error names no file, row or value."""
    party = ledger_party(tmp_path, tables[0])
    victim = sorted((tmp_path / "registry").rglob("*.parquet"))[1]
    damaged = pq.read_table(victim).to_pandas()
    damaged.loc[5, "b"] = np.inf
    pq.write_table(pa.Table.from_pandas(damaged, preserve_index=False), victim, row_group_size=300)
    with pytest.raises(InputError, match="changed since the party opened and validated it") as info:
        party.handle(effects_request(STATISTICS))
    assert "row" not in str(info.value) and victim.name not in str(info.value) and "inf" not in str(info.value)
