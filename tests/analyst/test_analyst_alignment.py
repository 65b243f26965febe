"""Analyst side of subject alignment: intersect keyed hashes, order, report unmatched counts."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import collabcausal.party  # noqa: F401  (registers the operations)
from collabcausal.analyst.alignment import align_row_group
from collabcausal.errors import StudyFailedError
from collabcausal.party import Party, PartyTable
from collabcausal.party.policy import PartyPolicy
from collabcausal.protocol.inprocess import InProcessGrid

KEY = b"k" * 32


def _party(name: str, ids: list[int], key: bytes = KEY) -> Party:
    frame = pd.DataFrame({"id": [f"S{i}" for i in ids], "x": np.array(ids, dtype=float) * 1.5})
    table = PartyTable.from_frame(frame, ["x"], subject_id="id", min_subjects=1)
    return Party(name, table, policy=PartyPolicy(["aligned_ids", "align"], ["x"], min_subjects=1, alignment_key=key))


def test_parties_end_with_the_same_subjects_in_the_same_order_and_unmatched_counts():
    a = _party("a", [4, 1, 9, 7, 3, 8])
    b = _party("b", [3, 9, 2, 4, 7])
    report = align_row_group(InProcessGrid([a, b]), ["a", "b"])
    assert report.n_matched == 4 and report.unmatched == {"a": 2, "b": 1}
    assert a.table.subject_ids.tolist() == b.table.subject_ids.tolist()
    assert sorted(a.table.subject_ids.tolist()) == ["S3", "S4", "S7", "S9"]
    assert np.array_equal(a.table.covariates, b.table.covariates)


def test_different_keys_share_no_subject_and_fail_clearly():
    grid = InProcessGrid([_party("a", [1, 2]), _party("b", [1, 2], key=b"other-key-000000")])
    with pytest.raises(StudyFailedError, match="share no subject"):
        align_row_group(grid, ["a", "b"])
