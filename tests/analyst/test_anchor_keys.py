"""Parties holding different anchor keys: the study stops at ``describe``, naming them, before any representation."""

from __future__ import annotations

import dataclasses

import pytest

from collabcausal.analyst.dcqe import DCQEPlan, run_dcqe
from collabcausal.analyst.replies import check_anchor_keys, check_description
from collabcausal.anchor_key import simulation_anchor_key
from collabcausal.errors import StudyFailedError
from collabcausal.messages import Message
from collabcausal.protocol.inprocess import InProcessGrid
from collabcausal.simulations.datasets import load_lalonde
from collabcausal.simulations.partition import build_parties, partition_grid


class SpyGrid(InProcessGrid):
    """An in-process grid recording the operation of every request it sends."""

    def __init__(self, parties) -> None:
        super().__init__(parties)
        self.sent: list[str] = []

    def send_and_receive(self, messages, timeout=None):
        self.sent.extend(m.operation for m in messages.values())
        return super().send_and_receive(messages, timeout=timeout)


def _study(keys: dict[str, bytes]):
    dataset = load_lalonde()
    partition = partition_grid(dataset, 2, seed=0)
    parties = build_parties(dataset, partition, anchor_key=simulation_anchor_key(0))
    for party in parties:
        party.anchor_key = keys.get(party.name, party.anchor_key)
    plan = DCQEPlan(
        row_groups=partition.names(),
        anchor_ranges=dataset.covariate_ranges(),
        n_anchors=200,
        party_components=3,
        seed=0,
        estimand="att",
        estimators=("psm",),
        study="lalonde-2x2",
    )
    return parties, plan


def test_a_party_with_another_key_stops_the_study_naming_it_before_any_representation() -> None:
    parties, plan = _study({"p22": bytes(32)})
    grid = SpyGrid(parties)
    with pytest.raises(StudyFailedError) as caught:
        run_dcqe(grid, plan)
    assert str(caught.value) == (
        "p22 holds a different anchor key from p11, p12, p21; fix: give every party the same [anchor] key_file"
    )
    assert grid.sent == ["describe"] * 4


def test_two_keys_two_against_two_and_a_keyless_party_are_all_named() -> None:
    parties, plan = _study({"p21": bytes(32), "p22": bytes(32)})
    with pytest.raises(StudyFailedError, match=r"^p21, p22 hold a different anchor key from p11, p12; fix"):
        run_dcqe(SpyGrid(parties), plan)
    parties, plan = _study({"p12": None})
    grid = SpyGrid(parties)
    with pytest.raises(StudyFailedError, match=r"^p12 holds no anchor key; fix: give every party the same"):
        run_dcqe(grid, plan)
    assert "dc_representation" not in grid.sent


def test_parties_with_one_key_pass() -> None:
    parties, plan = _study({})
    grid = SpyGrid(parties)
    run_dcqe(grid, plan, balance=False)
    assert grid.sent.count("dc_representation") == 4


def test_a_malformed_fingerprint_is_refused_naming_the_party() -> None:
    reply = Message("describe", {"n_subjects": 3, "covariates": ["a"], "has_labels": True})
    check_description("p1", reply)  # an older party without a fingerprint still describes itself
    for bad in ("XYZ", 7, "0" * 31, "G" * 32):
        tampered = dataclasses.replace(reply, params={**reply.params, "anchor_fingerprint": bad})
        with pytest.raises(StudyFailedError, match=r"'p1'.*anchor_fingerprint"):
            check_description("p1", tampered)


def test_fingerprint_grouping_takes_the_largest_group_as_the_reference() -> None:
    replies = {p: Message("describe", {"anchor_fingerprint": f}) for p, f in
               {"a": "1" * 32, "b": "2" * 32, "c": "2" * 32, "d": "3" * 32}.items()}
    with pytest.raises(StudyFailedError, match=r"^a holds a different anchor key from b, c; d holds a different"):
        check_anchor_keys(replies, ["a", "b", "c", "d"])
    check_anchor_keys(replies, ["b", "c"])
