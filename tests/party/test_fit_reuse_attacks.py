"""Red team of the party's reuse of its latest fit (dc_representation differing only in labels or anchor_rows).

Every reply must be, bit for bit, the one a fresh party gives the same request; the labels leave
only with ``labels=True``; every request is counted by the policy and written to the audit log.
"""

from __future__ import annotations

import os

import numpy as np
import pandas as pd
import pytest
from chunked_tables import ledger_party
from sklearn.decomposition import PCA
from test_chunked_table import RANGES as CHUNKED_RANGES
from test_chunked_table import frame as chunked_frame
from test_chunked_table import write_directory

from collabcausal.errors import CollabCausalError, PolicyError
from collabcausal.messages import Message
from collabcausal.party import Party, PartyTable
from collabcausal.party.audit import JsonlAuditLog
from collabcausal.party.chunked_table import ChunkedTable
from collabcausal.party.policy import PartyPolicy
from collabcausal.party.reducer import StandardizedPCA

RANGES = {"a": [-4.0, 4.0], "b": [-4.0, 4.0], "c": [-4.0, 4.0]}
KEY = bytes(range(32))
ROWS = np.array([0, 0, 3, 7, 9, 9, 9, 20, 31, 49, 12, 13])


def table(seed: int = 3) -> PartyTable:
    rng = np.random.default_rng(seed)
    df = pd.DataFrame(rng.normal(size=(50, 3)), columns=["a", "b", "c"])
    df["t"], df["y"], df["id"] = np.arange(50) % 2, rng.normal(size=50), [f"u{i}" for i in range(50)]
    return PartyTable.from_frame(df, ["a", "b", "c"], treatment="t", outcome="y", subject_id="id")


def party(**kw) -> Party:
    return Party("p", table(), anchor_key=KEY, **kw)


def request(arrays=None, **params) -> Message:
    base = {"study": "s", "n_anchors": 40, "anchor_ranges": RANGES, "n_components": 2, "labels": True}
    return Message("dc_representation", base | params, arrays or {})


def assert_same(ours: Message, theirs: Message) -> None:
    assert set(ours.arrays) == set(theirs.arrays)
    for name in theirs.arrays:
        np.testing.assert_array_equal(ours.arrays[name], theirs.arrays[name], strict=True)
    assert ours.params == theirs.params


@pytest.mark.parametrize("rows", [None, ROWS])
@pytest.mark.parametrize("first", [True, False])
def test_labels_leave_only_with_labels_true_whatever_the_fit_reused(rows, first):
    arrays = {} if rows is None else {"rows": rows}
    p = party()
    replies = [p.handle(request(arrays, labels=first)), p.handle(request(arrays, labels=not first))]
    for labels, reply in zip((first, not first), replies, strict=True):
        assert ("treatment" in reply.arrays) is labels and ("outcome" in reply.arrays) is labels
        assert_same(reply, party().handle(request(arrays, labels=labels)))
    omitted = p.handle(Message("dc_representation", {k: v for k, v in request(arrays).params.items()
                                                     if k != "labels"}, arrays))
    assert set(omitted.arrays) == {"x_tilde", "a_tilde"}  # no labels key: none released


@pytest.mark.parametrize(
    "changed",
    [
        {"arrays": {"rows": ROWS[::-1].copy()}},
        {"arrays": {"rows": ROWS[:-1].copy()}},
        {"arrays": {"rows": ROWS.astype(np.int32)}},
        {"study": "t"},
        {"n_components": 1},
        {"n_components": 0.9},
        {"n_anchors": 30},
        {"anchor_ranges": {**RANGES, "a": [-3.0, 3.0]}},
        {"labels": False, "n_components": 3},
        {"labels": False, "arrays": {}},
    ],
)
def test_a_request_changing_anything_fitted_gets_a_fresh_partys_reply(changed):
    changed = dict(changed)
    arrays = changed.pop("arrays", {"rows": ROWS})
    p = party()
    p.handle(request({"rows": ROWS}))
    assert_same(p.handle(request(arrays, **changed)), party().handle(request(arrays, **changed)))


def test_a_changed_anchor_key_is_applied_to_the_reused_fit():
    p, other = party(), party()
    p.handle(request())
    p.anchor_key = other.anchor_key = bytes(range(1, 33))
    assert_same(p.handle(request(labels=False)), other.handle(request(labels=False)))


def test_an_aligned_table_is_refitted_not_projected_with_the_fit_of_the_rows_before():
    """Red team: align replaces the party's table; the same request then reused the fit of the old rows."""
    p = party()
    before = p.handle(request(labels=False))
    order = np.arange(49, 9, -1)
    p.handle(Message("align", {}, {"order": order}))
    fresh = Party("p", p.table, anchor_key=KEY)
    after = p.handle(request())
    assert_same(after, fresh.handle(request()))
    assert not np.array_equal(after.arrays["a_tilde"], before.arrays["a_tilde"])
    # a later anchor block is not answered from the fit of the table before either
    p.handle(Message("align", {}, {"order": np.arange(20)}))
    with pytest.raises(Exception, match="holds no reducer"):
        p.handle(request(labels=False, anchor_rows=[20, 40]))


def test_a_changed_reducer_factory_is_used_not_the_reducer_of_the_old_one():
    p = party()
    p.handle(request())
    p.reducer_factory = fresh_factory = lambda k: StandardizedPCA(1)
    assert_same(p.handle(request(labels=False)), party(reducer_factory=fresh_factory).handle(request(labels=False)))


def test_a_custom_reducers_reused_reply_is_a_fresh_partys_bit_for_bit():
    """Red team: scikit-learn's PCA rounds fit_transform otherwise than transform, so a reused fit's X~ was not
    the fresh party's (1e-16 apart): the party now fits, then transforms, either way."""
    factory = lambda k: PCA(k, whiten=True, svd_solver="full")  # noqa: E731
    p = party(reducer_factory=factory)
    p.handle(request({"rows": ROWS}))
    assert_same(p.handle(request({"rows": ROWS}, labels=False)),
                party(reducer_factory=factory).handle(request({"rows": ROWS}, labels=False)))


def test_each_reused_request_is_counted_and_audited(tmp_path):
    audit = JsonlAuditLog(tmp_path / "audit.jsonl")
    p = party(policy=PartyPolicy(["dc_representation"], ["a", "b", "c"], max_representation_requests=2), audit=audit)
    p.handle(request())
    p.handle(request(labels=False))
    with pytest.raises(PolicyError):
        p.handle(request(labels=True))  # a third fit-reusing request from row 0 is refused
    lines = (tmp_path / "audit.jsonl").read_text().splitlines()
    assert sum('"released"' in line for line in lines) == 2
    assert sum('"refused"' in line for line in lines) == 1


def test_out_of_core_labels_after_and_before_and_a_fresh_partys_reply(tmp_path):
    write_directory(tmp_path / "registry", chunked_frame())
    chunked = ChunkedTable.open(tmp_path / "registry", ["a", "b", "c"], treatment="t", outcome="y")
    base = {"study": "s", "n_anchors": 60, "anchor_ranges": CHUNKED_RANGES, "n_components": 2}
    p = ledger_party(tmp_path, chunked)
    for labels in (False, True, False):
        ours = p.handle(Message("dc_representation", base | {"labels": labels}))
        theirs = ledger_party(tmp_path, chunked, f"q{labels}").handle(
            Message("dc_representation", base | {"labels": labels}))
        assert ("treatment" in ours.arrays) is labels
        assert_same(ours, theirs)
    changed = base | {"n_components": 1, "labels": False}
    assert_same(p.handle(Message("dc_representation", changed)),
                ledger_party(tmp_path, chunked, "r").handle(Message("dc_representation", changed)))


def test_out_of_core_files_changed_after_the_fit_are_refused_not_projected_with_it(tmp_path):
    write_directory(tmp_path / "registry", chunked_frame())
    chunked = ChunkedTable.open(tmp_path / "registry", ["a", "b", "c"], treatment="t", outcome="y")
    base = {"study": "s", "n_anchors": 60, "anchor_ranges": CHUNKED_RANGES, "n_components": 2, "labels": True}
    p = ledger_party(tmp_path, chunked)
    p.handle(Message("dc_representation", base))
    changed = next((tmp_path / "registry").rglob("*.parquet"))
    os.utime(changed, ns=(changed.stat().st_atime_ns, changed.stat().st_mtime_ns + 10**9))
    with pytest.raises(CollabCausalError, match="changed since the party opened"):
        p.handle(Message("dc_representation", base | {"labels": False}))
