"""Anchor columns: uniform on public ranges, the same for every party holding the study's anchor key."""

from __future__ import annotations

import numpy as np
import pytest

from collabcausal.anchor_key import anchor_fingerprint, simulation_anchor_key
from collabcausal.errors import ConfigError, InputError
from collabcausal.estimators.blocks import ROW_BLOCK
from collabcausal.party.anchor import anchor_blocks, anchor_columns, keyed_stream, new_anchor_key, read_anchor_key
from collabcausal.randomness import child_rng

RANGES = {"age": (18.0, 80.0), "bmi": (15.0, 40.0), "sbp": (90.0, 200.0)}
KEY = bytes(range(32))


def test_a_party_builds_exactly_its_slice_of_the_shared_anchor() -> None:
    full = anchor_columns(KEY, "s", ["age", "bmi", "sbp"], RANGES, 500)
    right = anchor_columns(KEY, "s", ["sbp"], RANGES, 500)
    np.testing.assert_array_equal(full[:, [2]], right)


@pytest.mark.parametrize("rows", [slice(0, 7), slice(5, ROW_BLOCK + 9), slice(ROW_BLOCK + 3, 2 * ROW_BLOCK + 11)])
def test_a_block_of_anchor_rows_asked_for_alone_has_its_numbers_in_the_whole_anchor(rows: slice) -> None:
    n = 2 * ROW_BLOCK + 11
    full = anchor_columns(KEY, "s", ["age", "sbp"], RANGES, n)
    block = np.vstack(list(anchor_blocks(KEY, "s", ["age", "sbp"], RANGES, n, rows=rows)))
    np.testing.assert_array_equal(block, full[rows])


@pytest.mark.parametrize("rows", [slice(3, 3), slice(0, 11), slice(-1, 4)])
def test_anchor_rows_outside_the_anchor_are_refused(rows: slice) -> None:
    with pytest.raises(InputError, match="not a non-empty part of the 10 anchor rows"):
        anchor_blocks(KEY, "s", ["age"], RANGES, 10, rows=rows)


def test_columns_are_uniform_on_their_ranges() -> None:
    a = anchor_columns(KEY, "s", ["age", "bmi"], RANGES, 20000)
    assert a[:, 0].min() >= 18 and a[:, 0].max() <= 80
    assert abs(a[:, 1].mean() - 27.5) < 0.2  # sd of the mean 0.05: 4 sd


def test_each_column_is_generator_uniform_of_its_keyed_stream() -> None:
    n = ROW_BLOCK + 5
    a = anchor_columns(KEY, "s", ["age", "sbp"], RANGES, n)
    for k, name in enumerate(("age", "sbp")):
        np.testing.assert_array_equal(a[:, k], keyed_stream(KEY, f"anchor/s/{name}").uniform(*RANGES[name], n))


def test_other_key_or_study_gives_other_anchor() -> None:
    base = anchor_columns(KEY, "s", ["age"], RANGES, 10)
    assert not np.array_equal(base, anchor_columns(bytes(32), "s", ["age"], RANGES, 10))
    assert not np.array_equal(base, anchor_columns(KEY, "t", ["age"], RANGES, 10))


def test_the_anchor_no_longer_follows_from_the_study_seed() -> None:
    # the old derivation (public seed -> child_rng per column) is what an analyst knowing the seed could rebuild
    study_seed = 0
    old = child_rng(study_seed, "anchor", "age").uniform(18.0, 80.0, 10)
    new = anchor_columns(simulation_anchor_key(study_seed), "s", ["age"], RANGES, 10)[:, 0]
    assert not np.allclose(old, new)


def test_key_files_round_trip_and_bad_ones_are_refused(tmp_path) -> None:
    path = new_anchor_key(tmp_path / "anchor.key")
    assert len(read_anchor_key(path)) == 32 and (path.stat().st_mode & 0o777) == 0o600
    (tmp_path / "bad.key").write_text("not hex\n")
    with pytest.raises(ConfigError, match="is not a hex anchor key"):
        read_anchor_key(tmp_path / "bad.key")
    with pytest.raises(ConfigError, match="no such anchor key file"):
        read_anchor_key(tmp_path / "missing.key")
    (tmp_path / "short.key").write_text("abcd\n")
    with pytest.raises(ConfigError, match="fewer than 16"):
        read_anchor_key(tmp_path / "short.key")


@pytest.mark.parametrize(
    ("columns", "ranges", "n", "message"),
    [
        (["weight"], RANGES, 10, "no anchor range for covariate 'weight'"),
        (["age"], {"age": (5.0, 5.0)}, 10, "low < high"),
        (["age"], RANGES, 0, "n_anchors must be at least 1"),
    ],
)
def test_bad_anchor_specifications_are_refused(columns, ranges, n, message) -> None:
    with pytest.raises(InputError, match=message):
        anchor_columns(KEY, "s", columns, ranges, n)


def test_fingerprint_is_no_output_of_the_anchor_streams() -> None:
    import hashlib
    import hmac

    # the analyst chooses the study id it asks about: even then no fingerprint is an anchor stream's digest
    study = "x/age"
    fingerprint = anchor_fingerprint(KEY, study)
    for label in (f"anchor/{study}", f"dp-anchor/{study}", "anchor/x/age"):
        assert not hmac.new(KEY, label.encode(), hashlib.sha256).hexdigest().startswith(fingerprint)


def test_anchor_blocks_are_the_rows_of_the_whole_anchor() -> None:
    from collabcausal.estimators.blocks import ROW_BLOCK
    from collabcausal.party.anchor import anchor_blocks

    r = 2 * ROW_BLOCK + 3
    blocks = list(anchor_blocks(KEY, "s", ["age", "sbp"], RANGES, r))
    assert [b.shape[0] for b in blocks] == [ROW_BLOCK, ROW_BLOCK, 3]
    np.testing.assert_array_equal(np.vstack(blocks), anchor_columns(KEY, "s", ["age", "sbp"], RANGES, r))
    with pytest.raises(InputError, match="n_anchors must be at least 1"):
        anchor_blocks(KEY, "s", ["age"], RANGES, 0)  # checked before any block is asked for
