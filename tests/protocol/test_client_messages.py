"""What the party prints: the coordinator's fixes (study.toml, the analyst's log) stay with the analyst."""

from __future__ import annotations

import pytest
from protocol_helpers import PartyThread, small_party, tls_of, wait_until_joined

from collabcausal.errors import PolicyError, StudyFailedError
from collabcausal.messages import Message
from collabcausal.protocol.server import GrpcGrid


def test_a_party_is_told_the_problem_without_the_fix_meant_for_the_coordinator(study_ca):
    grid = GrpcGrid(["a"], tls=tls_of(study_ca, "analyst"), study="s", task_timeout=20)
    lines: list[str] = []
    party = PartyThread(small_party("a"), grid.address, tls_of(study_ca, "a"), study="s", progress=lines.append)
    try:
        wait_until_joined(grid, ["a"])
        with pytest.raises(PolicyError, match="fix: do not ask"):  # the analyst gets the party's fix
            grid.request("a", Message("test_refuse"))
        grid.finish(failed=StudyFailedError("no reply from b", "raise task_timeout in study.toml"))
        party.join()
    finally:
        grid.stop(0)
    assert isinstance(party.error, StudyFailedError)
    assert str(party.error) == (
        "the analyst stopped the study: no reply from b; fix: nothing more is asked of this party; "
        "the study coordinator has the analyst's log"
    )
    (refusal,) = [line for line in lines if line.startswith("test_refuse")]
    assert "refused (party 'a' refuses the test; its fix went to the analyst)" in refusal
