"""Party operations of DC-QE: describe and dc_representation, through Party.handle."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from collabcausal.errors import InputError, PolicyError, ProtocolError
from collabcausal.messages import Message
from collabcausal.party import Party, PartyTable
from collabcausal.party.anchor import anchor_columns
from collabcausal.party.reducer import StandardizedPCA

RANGES = {"a": [-4.0, 4.0], "b": [-4.0, 4.0], "c": [-4.0, 4.0]}
KEY = bytes(range(32))


def party(labels: bool = True, ids: bool = False) -> Party:
    rng = np.random.default_rng(3)
    df = pd.DataFrame(rng.normal(size=(50, 3)), columns=["a", "b", "c"])
    df["t"], df["y"], df["id"] = np.arange(50) % 2, rng.normal(size=50), [f"u{i}" for i in range(50)]
    kw = {"treatment": "t", "outcome": "y"} if labels else {}
    table = PartyTable.from_frame(df, ["a", "b", "c"], subject_id="id" if ids else None, **kw)
    return Party("p11", table, anchor_key=KEY)


def request(**params: object) -> Message:
    base = {"study": "s", "n_anchors": 40, "anchor_ranges": RANGES, "n_components": 2, "labels": True}
    arrays = params.pop("arrays", {})
    return Message("dc_representation", base | params, arrays)


def test_representation_is_the_private_reducer_applied_to_rows_and_anchor() -> None:
    p = party()
    reply = p.handle(request())
    reducer = StandardizedPCA(2).fit(p.table.covariates)
    np.testing.assert_allclose(reply.arrays["x_tilde"], reducer.transform(p.table.covariates))
    anchor = anchor_columns(KEY, "s", ["a", "b", "c"], RANGES, 40)
    np.testing.assert_allclose(reply.arrays["a_tilde"], reducer.transform(anchor))
    np.testing.assert_array_equal(reply.arrays["treatment"], p.table.treatment)
    assert set(reply.arrays) == {"x_tilde", "a_tilde", "treatment", "outcome"}


def test_a_party_without_the_anchor_key_refuses() -> None:
    p = party()
    p.anchor_key = None
    with pytest.raises(PolicyError, match="has no anchor key"):
        p.handle(request())


def test_rows_refit_the_reducer_on_the_resample() -> None:
    p = party()
    rows = np.array([0, 0, 3, 7, 9, 9, 9, 20, 31, 49])
    reply = p.handle(request(arrays={"rows": rows}))
    expected = StandardizedPCA(2).fit_transform(p.table.covariates[rows])
    np.testing.assert_allclose(reply.arrays["x_tilde"], expected)
    np.testing.assert_array_equal(reply.arrays["outcome"], p.table.outcome[rows])


def test_integer_components_are_capped_at_the_party_covariates() -> None:
    assert party().handle(request(n_components=10)).arrays["x_tilde"].shape == (50, 3)


def test_reducer_factory_is_pluggable() -> None:
    p = party()
    p.reducer_factory = lambda k: StandardizedPCA(1)
    assert p.handle(request()).arrays["x_tilde"].shape == (50, 1)


def test_anchor_blocks_of_one_request_make_up_its_whole_image() -> None:
    """The block from row 0 fits the reducer and carries X~; later blocks carry their rows of A~ only."""
    p = party()
    rows = np.array([0, 0, 3, 7, 9, 9, 9, 20, 31, 49, 12, 13])
    whole = p.handle(request(arrays={"rows": rows}))
    first = p.handle(request(anchor_rows=[0, 15], arrays={"rows": rows}))
    later = p.handle(request(anchor_rows=[15, 40], arrays={"rows": rows}))
    assert set(first.arrays) == {"x_tilde", "a_tilde", "treatment", "outcome"} and set(later.arrays) == {"a_tilde"}
    np.testing.assert_array_equal(first.arrays["x_tilde"], whole.arrays["x_tilde"])
    blocks = np.vstack([first.arrays["a_tilde"], later.arrays["a_tilde"]])
    np.testing.assert_array_equal(blocks, whole.arrays["a_tilde"])


def test_a_request_differing_only_in_labels_reuses_the_fit_and_releases_labels_only_when_asked() -> None:
    """The settings of a simulation ask one party with and without its labels for the same resample."""
    fitted = []

    def counting(k: int | float) -> StandardizedPCA:
        fitted.append(k)
        return StandardizedPCA(k)

    p, fresh = party(), party()
    p.reducer_factory = counting
    rows = {"rows": np.array([0, 0, 3, 7, 9, 9, 9, 20, 31, 49, 12, 13])}
    with_labels = p.handle(request(arrays=rows))
    without = p.handle(request(labels=False, arrays=rows))
    assert set(without.arrays) == {"x_tilde", "a_tilde"} and len(fitted) == 1
    for reply in (without, p.handle(request(labels=True, arrays=rows)), fresh.handle(request(arrays=rows))):
        for name in reply.arrays:
            np.testing.assert_array_equal(reply.arrays[name], with_labels.arrays[name])
    p.handle(request(labels=False, n_components=1, arrays=rows))
    assert fitted == [2, 1]


@pytest.mark.parametrize(
    "changed",
    [{}, {"n_components": 1}, {"arrays": {"rows": np.arange(10)}}, {"study": "t"}],
    ids=["no fit yet", "other components", "other rows", "other study"],
)
def test_a_later_anchor_block_needs_the_fit_of_the_same_request(changed: dict) -> None:
    p = party()
    if changed:
        p.handle(request(anchor_rows=[0, 10]))
    with pytest.raises(ProtocolError, match="holds no reducer fitted by the same request"):
        p.handle(request(anchor_rows=[10, 40], **changed))


@pytest.mark.parametrize(
    ("req", "error", "message"),
    [
        (Message("dc_representation", {"study": "s"}), ProtocolError, "lacks 'n_anchors'"),
        (Message("dc_representation", {"seed": 1}), InputError, "does not apply: seed;"),
        (request(anchor_rows=[5]), ProtocolError, "two integers"),
        (request(anchor_rows=[True, 5]), ProtocolError, "two integers"),
        (request(anchor_rows=[0, 41]), ProtocolError, "not a block of the 40 anchor rows"),
        (request(anchor_rows=[20, 20]), ProtocolError, "not a block of the 40 anchor rows"),
        (request(arrays={"rows": np.array([0, 50])}), ProtocolError, "outside the party's 50 subjects"),
        (request(arrays={"rows": np.array([0.5])}), ProtocolError, "integer array"),
        (Message("steal_rows"), ProtocolError, "unknown party operation 'steal_rows'"),
    ],
)
def test_malformed_requests_are_refused(req, error, message) -> None:
    with pytest.raises(error, match=message):
        party().handle(req)


def test_labels_requested_from_a_party_without_them_is_an_error() -> None:
    with pytest.raises(InputError, match="holds no treatment/outcome"):
        party(labels=False).handle(request())


def test_describe_reveals_metadata_and_an_id_digest_only() -> None:
    reply = party(ids=True).handle(Message("describe"))
    assert reply.params["n_subjects"] == 50 and reply.params["covariates"] == ["a", "b", "c"]
    assert len(reply.params["ids_sha256"]) == 64 and not reply.arrays


def test_distinct_anchors_asked_by_the_analyst_do_not_pile_up_in_the_party() -> None:
    # Issue 10: up to 8 anchor matrices (each up to max_anchors x m floats) stayed cached, so a
    # hostile analyst varying n_anchors, the block or the study pinned 8 of them. The party keeps at
    # most the latest block for its columns (the repeated bootstrap requests of a study reuse it).
    from collabcausal.party.representation import _ANCHORS

    p = party()
    _ANCHORS.clear()
    for r in range(40, 52):
        p.handle(request(n_anchors=r))
        p.handle(request(n_anchors=r, anchor_rows=[0, 30]))
        p.handle(request(n_anchors=r, anchor_rows=[30, 40]))
    assert [(request[3], request[4], request[5]) for request, _ in _ANCHORS.values()] == [(51, 30, 40)]
    first = p.handle(request(n_anchors=51)).arrays["a_tilde"]
    np.testing.assert_array_equal(p.handle(request(n_anchors=51)).arrays["a_tilde"], first)


def test_a_large_anchor_is_reduced_block_by_block_to_the_same_image() -> None:
    # r x m above CACHED_ANCHOR_VALUES: generated and reduced in blocks of rows, never held whole
    # and never cached, with the numbers of the whole anchor.
    from collabcausal.estimators.blocks import ROW_BLOCK
    from collabcausal.party.representation import _ANCHORS, CACHED_ANCHOR_VALUES

    p = party()
    r = max(CACHED_ANCHOR_VALUES // 3 + 1, 2 * ROW_BLOCK + 7)
    _ANCHORS.clear()
    reply = p.handle(request(n_anchors=r))
    assert not _ANCHORS
    reducer = StandardizedPCA(2).fit(p.table.covariates)
    whole = reducer.transform(anchor_columns(KEY, "s", ["a", "b", "c"], RANGES, r))
    np.testing.assert_array_equal(reply.arrays["a_tilde"], whole)
