"""The analyst's line for lost parties says who, during what, and what was and was not charged."""

from __future__ import annotations

from collabcausal.protocol.lost_parties import lost_error


def test_a_party_lost_during_a_dp_request_may_have_paid_for_nothing_and_received_releases_were_charged():
    error = lost_error(
        {"b": "dp_effects_statistics"},
        {"b": 21.4},
        {"a": {"describe": 1, "dp_effects_statistics": 2}, "b": {"describe": 1}},
        heartbeat=2.0,
    )
    assert error.exit_code == 9
    assert error.problem == (
        "party lost: b during 'dp_effects_statistics' (no contact for 21 s; a live party calls every 2 s); "
        "charged and received: a 2x dp_effects_statistics; b's 'dp_effects_statistics' may have been charged to "
        "its ledger with nothing released (`collabcausal party budget` at b shows it); "
        "nothing more was asked of any party"
    )


def test_two_lost_parties_are_named_together():
    error = lost_error({"c": "describe", "b": "describe"}, {"b": 3.0, "c": 4.0}, {}, heartbeat=2.0)
    assert error.problem.startswith("parties lost: b during 'describe' (no contact for 3 s")
    assert "c during 'describe' (no contact for 4 s" in error.problem
    assert "no differentially private release was received" in error.problem
