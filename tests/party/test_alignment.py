"""Party side of subject alignment: keyed hashes only, and rows kept in the analyst's order."""

from __future__ import annotations

import hashlib
import hmac

import numpy as np
import pandas as pd
import pytest

import collabcausal.party  # noqa: F401  (registers the operations)
from collabcausal.errors import ConfigError, PolicyError, ProtocolError
from collabcausal.messages import Message
from collabcausal.party import Party, PartyTable
from collabcausal.party.alignment import hmac_ids, new_alignment_key, read_alignment_key
from collabcausal.party.policy import PartyPolicy

KEY = bytes(range(32))
OPS = ("aligned_ids", "align", "describe")


def _party(key=KEY, ids=True) -> Party:
    frame = pd.DataFrame(
        {"id": [f"s{i}" for i in range(12)], "x": np.arange(12.0), "t": np.arange(12) % 2, "y": np.arange(12.0) * 10}
    )
    table = PartyTable.from_frame(frame, ["x"], treatment="t", outcome="y", subject_id="id" if ids else None)
    return Party("h", table, policy=PartyPolicy(OPS, ["x"], min_subjects=2, alignment_key=key))


def test_hmac_ids_is_hmac_sha256_of_the_utf8_id():
    assert bytes(hmac_ids(["s1"], KEY)[0]) == hmac.new(KEY, b"s1", hashlib.sha256).digest()


def test_party_releases_keyed_hashes_never_the_ids():
    reply = _party().handle(Message("aligned_ids"))
    ids = reply.array("ids")
    assert ids.shape == (12, 32) and ids.dtype == np.uint8
    assert np.array_equal(ids, hmac_ids([f"s{i}" for i in range(12)], KEY))
    assert b"s1" not in ids.tobytes()


def test_without_a_key_or_ids_alignment_is_refused():
    with pytest.raises(PolicyError, match="no alignment key"):
        _party(key=None).handle(Message("aligned_ids"))
    with pytest.raises(PolicyError, match="no subject id column"):
        _party(ids=False).handle(Message("aligned_ids"))


def test_align_keeps_the_named_rows_in_order_with_labels():
    party = _party()
    reply = party.handle(Message("align", {}, {"order": np.array([5, 0, 7], dtype=np.int64)}))
    assert reply.params == {"n_before": 12, "n_after": 3}
    assert party.table.covariates[:, 0].tolist() == [5.0, 0.0, 7.0]
    assert party.table.outcome.tolist() == [50.0, 0.0, 70.0] and party.table.treatment.tolist() == [1, 0, 1]
    assert party.table.subject_ids.tolist() == ["s5", "s0", "s7"]


@pytest.mark.parametrize("order", [np.array([0, 12]), np.array([1, 1]), np.array([0.5])])
def test_bad_order_is_refused(order):
    with pytest.raises(ProtocolError):
        _party().handle(Message("align", {}, {"order": order}))


def test_key_file_round_trip_and_bad_keys(tmp_path):
    path = new_alignment_key(tmp_path / "k")
    assert len(read_alignment_key(path)) == 32 and oct(path.stat().st_mode)[-3:] == "600"
    (tmp_path / "short").write_text("abcd")
    with pytest.raises(ConfigError, match="fewer than 16"):
        read_alignment_key(tmp_path / "short")
    (tmp_path / "nothex").write_text("zz")
    with pytest.raises(ConfigError, match="not a hex"):
        read_alignment_key(tmp_path / "nothex")
