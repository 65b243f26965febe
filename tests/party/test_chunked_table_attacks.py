"""Attacks on a party reading its table out of core (collabcausal/party/chunked_table.py).

A hostile coordinator sends any request through ``Party.handle`` and reads every reply and error;
a careless hospital changes files, links them, mixes column types and writes odd row groups. The
out-of-core party must give the in-memory party's guarantee on the same rows: the same sigma,
sensitivity, charges and refusals, and no error after a charge that says anything about the rows.
"""

from __future__ import annotations

import itertools
import os
import threading

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from chunked_tables import COLUMNS, MODEL, effects_request, ledger_party

from collabcausal.errors import CollabCausalError, InputError
from collabcausal.estimators.dp.effects.design import FeatureMap
from collabcausal.estimators.dp.effects.folds import FOLD_CHUNK, assign_folds, fold_labels
from collabcausal.estimators.dp.effects.nuisances import NuisanceModel
from collabcausal.ledger import PrivacyLedger
from collabcausal.messages import Message
from collabcausal.party import PartyTable
from collabcausal.party.chunked_table import ChunkedTable, _file_stamps
from collabcausal.party.dp_effects import SCORES, STATISTICS

REPRESENTATION = Message("dc_representation", {
    "study": "s", "n_anchors": 40, "anchor_ranges": {"a": [-4, 4], "b": [0, 10], "c": [-4, 4]}, "n_components": 2,
})


def frame(n: int, seed: int = 11) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3)) * [1.0, 2.0, 0.5] + [0.0, 5.0, 0.0]
    t = (rng.random(n) < 1 / (1 + np.exp(-X[:, 0]))).astype(np.int64)
    y = X @ [0.5, 0.2, -1.0] + 1.5 * t + rng.normal(size=n)
    return pd.DataFrame({"a": X[:, 0], "b": X[:, 1], "c": X[:, 2], "t": t, "y": y})


def write_uneven(directory, df: pd.DataFrame) -> None:
    """Files of uneven row groups, one empty file, and a covariate typed int32 in one file, float in the others."""
    directory.mkdir(parents=True)
    cuts = [0, 137, 600, 601, len(df)]
    for k, (lo, hi) in enumerate(itertools.pairwise(cuts)):
        part = df.iloc[lo:hi]
        if k == 1:
            part = part.assign(b=part["b"].round().astype(np.int32))
        pq.write_table(pa.Table.from_pandas(part, preserve_index=False), directory / f"p{k}.parquet",
                       row_group_size=[50, 97, 1, 211][k])
    pq.write_table(pa.Table.from_pandas(df.iloc[:0], preserve_index=False), directory / "p9-empty.parquet")


def in_memory_rows(df: pd.DataFrame) -> pd.DataFrame:
    """The rows as the out-of-core table reads them (the int32 file's ``b`` rounded)."""
    b = df["b"].to_numpy().copy()
    b[137:600] = np.round(b[137:600])
    return df.assign(b=b)


@pytest.fixture
def pair(tmp_path):
    """The same 1,500 rows as an out-of-core party and an in-memory party, sharing one fold secret."""
    df = frame(1500)
    write_uneven(tmp_path / "registry", df)
    chunked = ChunkedTable.open(tmp_path / "registry", COLUMNS, treatment="t", outcome="y", workers=2,
                                source="registry")
    memory = PartyTable.from_frame(in_memory_rows(df), COLUMNS, treatment="t", outcome="y", source="registry")
    return ledger_party(tmp_path, chunked, "ooc"), ledger_party(tmp_path, memory, "mem")


def charges(ledger: PrivacyLedger) -> list[tuple]:
    return [(c.operation, c.epsilon, c.delta, c.details) for c in ledger.history()]


@pytest.fixture
def no_noise(monkeypatch):
    """The releases' exact sums: the noise is the one step both parties share verbatim."""
    monkeypatch.setattr("collabcausal.party.dp_effects.perturb", lambda kind, values, sigma: values)


@pytest.mark.parametrize("op", [STATISTICS, SCORES])
def test_a_release_has_the_in_memory_sigma_sensitivity_charge_and_sums(pair, no_noise, op):
    """Attack: a release whose calibration or charge differs from the in-memory party's on the same rows (held)."""
    out_of_core, in_memory = pair
    ours, theirs = out_of_core.handle(effects_request(op)), in_memory.handle(effects_request(op))
    for key in ("sigma", "sensitivity", "rho", "delta", "n_subjects"):
        assert ours.params[key] == theirs.params[key]
    assert charges(out_of_core.ledger) == charges(in_memory.ledger)
    in_memory.ledger = out_of_core.ledger  # one fold secret, so the same folds
    theirs = in_memory.handle(effects_request(op)).arrays["values"]
    np.testing.assert_allclose(ours.arrays["values"], theirs, rtol=1e-11, atol=1e-9)


BAD_REQUESTS = [
    {"delta": 1.0 / 1500},
    {"columns": ["a", "b", "zz"]},
    {"columns": ["a", "b", "t"]},
    {"n_folds": 21},
    {"design": FeatureMap(((-4.0, 4.0), (0.0, 10.0)), (-5.0, 5.0), n_sites=1).to_spec()},
    {"design": FeatureMap(((-1e308, 1e308), (0.0, 10.0), (-4.0, 4.0)), (-5.0, 5.0), n_sites=1).to_spec()},
    {"site": 1},
    {"secagg": "yes"},
]


@pytest.mark.parametrize("op", [STATISTICS, SCORES])
@pytest.mark.parametrize("bad", BAD_REQUESTS)
def test_a_malformed_request_is_refused_before_the_charge_with_the_in_memory_message(pair, op, bad):
    """Attack: a request the in-memory party refuses that the out-of-core one charges, or other words (held)."""
    errors = []
    for p in pair:
        with pytest.raises(CollabCausalError) as info:
            p.handle(effects_request(op, **bad))
        errors.append((type(info.value), str(info.value)))
        assert p.ledger.history() == []
    assert errors[0] == errors[1]


def _dp_moments(n: int = 1500, **extra) -> Message:
    params = {"study": "s", "epsilon": 1.0, "delta": 1e-6, "columns": ["a", "b"], "bounds": [[-4, 4], [0, 10]]}
    arrays = {"arms": (np.arange(n) % 2).astype(np.int8), "weights": np.ones(n)}
    arrays |= {k: v for k, v in extra.items() if isinstance(v, np.ndarray)}
    return Message("dp_weighted_moments", params | {k: v for k, v in extra.items() if k not in arrays}, arrays)


@pytest.mark.parametrize("bad", [
    {"delta": 1.0 / 1500}, {"columns": ["a", "zz"]}, {"columns": ["a", "t"]}, {"bounds": [[-4, 4]]},
    {"weights": -np.ones(1500)}, {"rows": np.array([0, 1500])}, {"arms": np.full(1500, 2, np.int8)},
])
def test_dp_balance_refusals_before_the_charge_match(pair, bad):
    """Attack: a dp_weighted_moments request refused in memory but charged out of core, or other words (held)."""
    errors = []
    for p in pair:
        with pytest.raises(CollabCausalError) as info:
            p.handle(_dp_moments(**bad))
        errors.append((type(info.value), str(info.value)))
        assert p.ledger.history() == []
    assert errors[0] == errors[1]


def test_a_resample_piling_weight_on_one_subject_gets_the_in_memory_noise(pair):
    """Attack: rows repeating subject 0 to concentrate weight; read block by block, its total weight must still
    set the sensitivity (held: the same sigma and sensitivity as in memory, 2 sqrt(m) x the total weight)."""
    rows = np.r_[np.zeros(500, np.int64), np.arange(1000)]
    replies = [p.handle(_dp_moments(rows=rows)) for p in pair]
    assert replies[0].params == replies[1].params
    assert replies[0].params["sensitivity"] == pytest.approx(2 * np.sqrt(2) * 501)
    assert charges(pair[0].ledger) == charges(pair[1].ledger)


def test_scores_refusals_before_the_charge_match_too(pair):
    """Attack: overflowing score ranges or nuisance coefficients, refused alike before any charge (held)."""
    huge = NuisanceModel(np.array([1e308, 1e308, 0, 0]), (np.zeros(4), np.zeros(4)))
    for bad in ({"trim": 1e-320}, {"models": [huge.to_spec()] * 3}, {"models": [MODEL.to_spec()] * 2}):
        errors = []
        for p in pair:
            with pytest.raises(CollabCausalError) as info:
                p.handle(effects_request(SCORES, **bad))
            errors.append(str(info.value))
            assert p.ledger.history() == []
        assert errors[0] == errors[1]


def test_repeated_columns_are_answered_as_in_memory(pair, no_noise):
    """Attack: the same column twice in ``columns`` (Arrow reads it once), answered, not charged then failed (held)."""
    design = FeatureMap(((-4.0, 4.0), (-4.0, 4.0), (0.0, 10.0)), (-5.0, 5.0), n_sites=1).to_spec()
    out_of_core, in_memory = pair
    in_memory.ledger = out_of_core.ledger
    request = effects_request(STATISTICS, columns=["a", "a", "b"], design=design)
    np.testing.assert_allclose(out_of_core.handle(request).arrays["values"],
                               in_memory.handle(request).arrays["values"], rtol=1e-11, atol=1e-9)


def test_one_or_two_workers_give_the_same_bits(tmp_path, no_noise):
    """Attack: results combined in completion order, so workers change the released numbers (held)."""
    write_uneven(tmp_path / "d", frame(1500))
    values = []
    for workers in (1, 2, 3):
        table = ChunkedTable.open(tmp_path / "d", COLUMNS, treatment="t", outcome="y", workers=workers)
        p = ledger_party(tmp_path, table, "p")  # one ledger file: one fold secret
        values.append([p.handle(effects_request(op)).arrays["values"] for op in (STATISTICS, SCORES)])
        values[-1].append(p.handle(REPRESENTATION).arrays["x_tilde"])
    for other in values[1:]:
        for mine, theirs in zip(values[0], other, strict=True):
            np.testing.assert_array_equal(mine, theirs)


def test_the_ledger_is_touched_only_from_the_requests_thread(pair):
    """Attack: Dask worker threads reading the ledger's sqlite (fold secret, charges) (held)."""
    out_of_core = pair[0]
    calls = set()

    class Spy:
        def __getattr__(self, name):
            attribute = getattr(ledger, name)
            if not callable(attribute):
                return attribute

            def call(*args, **kwargs):
                calls.add((name, threading.current_thread() is threading.main_thread()))
                return attribute(*args, **kwargs)

            return call

    ledger, out_of_core.ledger = out_of_core.ledger, Spy()
    for op in (STATISTICS, SCORES):
        out_of_core.handle(effects_request(op))
    assert {name for name, _ in calls} >= {"secret", "charge_zcdp"}
    assert all(main for _, main in calls)


def test_folds_by_batch_are_the_in_memory_folds():
    """Attack: fold labels of batches that straddle the secret shuffle's chunks differ from the whole table's (held)."""
    n, seed = 3 * FOLD_CHUNK + 77, 2**100 + 3
    whole = assign_folds(n, 5, seed)
    edges = [0, 1, FOLD_CHUNK - 3, FOLD_CHUNK + 9, 2 * FOLD_CHUNK, 3 * FOLD_CHUNK + 1, n]
    parts = [fold_labels(slice(lo, hi), n, 5, seed) for lo, hi in itertools.pairwise(edges)]
    np.testing.assert_array_equal(np.concatenate(parts), whole)


def _rewrite_keeping_stamps(path, change) -> None:
    """Change a file's bytes but keep its size and modification time (a copy tool preserving times)."""
    info = path.stat()
    data = bytearray(path.read_bytes())
    change(data)
    path.write_bytes(bytes(data))
    os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns))
    assert path.stat().st_size == info.st_size


@pytest.mark.parametrize("request_", [effects_request(STATISTICS), effects_request(SCORES), REPRESENTATION])
def test_an_unreadable_file_with_unchanged_stamps_fails_with_the_one_message(pair, request_):
    """Attack: a file damaged after opening but with the validated size and time; Arrow's own error (naming the
    file or the bytes) must not leave the party, after a charge or not (broke: an OSError went out; fixed)."""
    out_of_core = pair[0]
    victim = sorted(b.path for b in out_of_core.table.blocks)[1]
    _rewrite_keeping_stamps(victim, lambda data: data.__setitem__(slice(4, 36), bytes(32)))  # a page header
    with pytest.raises(InputError, match="changed since the party opened and validated it") as info:
        out_of_core.handle(request_)
    assert victim.name not in str(info.value) and "thrift" not in str(info.value)
    assert len(out_of_core.ledger.history()) == (request_.operation != "dc_representation")


def test_integers_beyond_2_53_are_read_as_in_memory(tmp_path, no_noise):
    """Attack: an int64 column with a value above 2**53, taken by the in-memory party from a frame and refused by
    the out-of-core one with Arrow's message naming the value (broke; fixed: both round it as numpy does)."""
    b = frame(400)["b"].round().to_numpy(dtype=np.int64, copy=True)
    b[3] = 2**53 + 1
    df = frame(400).assign(b=b)
    (tmp_path / "d").mkdir()
    pq.write_table(pa.Table.from_pandas(df, preserve_index=False), tmp_path / "d" / "x.parquet")
    chunked = ChunkedTable.open(tmp_path / "d", COLUMNS, treatment="t", outcome="y")
    memory = PartyTable.from_frame(df, COLUMNS, treatment="t", outcome="y")
    column = chunked.reduce_rows(lambda _, X, t, y: X[:, 0], ["b"], lambda u, v: np.concatenate([u, v]))
    np.testing.assert_array_equal(column, memory.column("b"))


@pytest.mark.parametrize("link", [os.symlink, os.link])
def test_a_file_linked_twice_is_refused_at_opening(tmp_path, link):
    """Attack: one file reachable by two paths, so each of its subjects counts twice and the release's
    sensitivity to one subject doubles (broke: read twice; fixed: refused at opening)."""
    (tmp_path / "d").mkdir()
    pq.write_table(pa.Table.from_pandas(frame(300), preserve_index=False), tmp_path / "d" / "a.parquet")
    link(tmp_path / "d" / "a.parquet", tmp_path / "d" / "b.parquet")
    with pytest.raises(InputError, match="are the same file, so each of its rows would be read twice"):
        ChunkedTable.open(tmp_path / "d", COLUMNS, treatment="t", outcome="y")


def test_a_symlinked_directory_loop_does_not_read_a_file_twice(tmp_path):
    """Attack: a subdirectory linking back to its parent (the walk must not loop or read the files again) (held)."""
    (tmp_path / "d").mkdir()
    pq.write_table(pa.Table.from_pandas(frame(300), preserve_index=False), tmp_path / "d" / "a.parquet")
    os.symlink(tmp_path / "d", tmp_path / "d" / "loop")
    assert ChunkedTable.open(tmp_path / "d", COLUMNS, treatment="t", outcome="y").n_subjects == 300


def _longer(df: pd.DataFrame) -> pd.DataFrame:
    return pd.concat([df, df.iloc[:100]], ignore_index=True)


@pytest.mark.parametrize("rewrite", [lambda df: df.drop(columns="c"), _longer], ids=["column dropped", "rows added"])
@pytest.mark.parametrize("request_", [effects_request(STATISTICS), REPRESENTATION], ids=["dp", "representation"])
def test_a_change_the_stamps_miss_fails_with_the_one_message(pair, rewrite, request_):
    """Attack: the last file rewritten without a column, or with a longer last row group, and its size and time
    what the opening pass saw; a KeyError or a shape error must not leave the party (broke; fixed: the footer read
    at opening locates the rows, and Arrow's errors become the one message)."""
    out_of_core = pair[0]
    table = out_of_core.table
    victim = table.blocks[-1].path
    pq.write_table(pa.Table.from_pandas(rewrite(pq.read_table(victim).to_pandas()), preserve_index=False), victim,
                   row_group_size=211)
    table._stamps = _file_stamps(table.blocks)
    with pytest.raises(InputError, match="changed since the party opened and validated it"):
        out_of_core.handle(request_)


def test_a_file_of_many_row_groups_has_its_footer_parsed_once(tmp_path, monkeypatch):
    """Attack: one file of 500 row groups of 3 rows; every block's read parsed the file's footer again (all 500
    row groups' metadata), so each request cost the square of the row groups (broke; fixed: read at opening)."""
    (tmp_path / "d").mkdir()
    pq.write_table(pa.Table.from_pandas(frame(1500), preserve_index=False), tmp_path / "d" / "a.parquet",
                   row_group_size=3)
    table = ChunkedTable.open(tmp_path / "d", COLUMNS, treatment="t", outcome="y")
    opened = []
    original = pq.ParquetFile

    def spy(*args, metadata=None, **kwargs):
        opened.append(metadata)
        return original(*args, metadata=metadata, **kwargs)

    monkeypatch.setattr(pq, "ParquetFile", spy)
    assert table.reduce_rows(lambda rows, X, t, y: len(X), COLUMNS, int.__add__) == 1500
    assert len(opened) == 500 and all(meta is table.blocks[0].metadata for meta in opened)


def test_differencing_exact_balance_moments_is_refused_out_of_core_as_in_memory(tmp_path):
    """Attack: two exact weighted_moments requests differing in one subject (all rows, then all but subject 7), and
    the same through two resamples, against a policed out-of-core party: refused before the second reply as in memory
    (held), the first reply the in-memory one."""
    from collabcausal.errors import PolicyError
    from collabcausal.party import Party
    from collabcausal.party.policy import PartyPolicy

    df = frame(600)
    write_uneven(tmp_path / "registry", df)
    tables = [
        ChunkedTable.open(tmp_path / "registry", COLUMNS, workers=2, source="registry"),
        PartyTable.from_frame(in_memory_rows(df), COLUMNS, source="registry"),
    ]
    arms = (np.arange(600) % 2).astype(np.int8)
    without = np.ones(600)
    without[7] = 0.0
    rows = np.arange(600)
    for attack in ({}, {"rows": rows}):
        replies, refusals = [], []
        for table in tables:
            party = Party("h", table, policy=PartyPolicy(("weighted_moments",), COLUMNS, min_subjects=10))
            ask = [Message("weighted_moments", {"study": "s"}, {"arms": arms, "weights": w, **attack})
                   for w in (np.ones(600), without)]
            replies.append(party.handle(ask[0]))
            with pytest.raises(PolicyError, match="below its min_subjects of 10") as info:
                party.handle(ask[1])
            refusals.append(str(info.value))
        assert refusals[0] == refusals[1]
        for name in ("sum_w", "sum_w2", "sum_wx", "sum_wx2"):
            np.testing.assert_allclose(replies[0].arrays[name], replies[1].arrays[name], rtol=1e-12)
