"""A party lost mid-study in a dp_effects study (issue 38 item 3): dropped under on_missing_party = "continue"
before its first release, fatal after its statistics were used, fatal under "fail".

In process: the lost party is a grid whose transport raises the lost-party error for it (as the gRPC grid
does after ``lost_after`` s of silence). Accuracy check at epsilon 1e4 as in test_analyst_dp_effects.py
(noise sd below 1e-2 of each sum's sensitivity; the 2-SE bound is about 190 sds of the observed difference).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pytest

from collabcausal.analyst.dp_effects import DPEffectsSpec, dp_effects_results
from collabcausal.errors import StudyFailedError
from collabcausal.ledger import PrivacyLedger
from collabcausal.messages import Message
from collabcausal.party.dp_effects import SCORES, STATISTICS
from collabcausal.protocol.inprocess import InProcessGrid
from collabcausal.simulations.dp_effects_benchmark import federated_aipw, site_parties
from collabcausal.simulations.multisite import OUTCOME_RANGE, covariate_bounds, simulate_sites

SITES = simulate_sites(3000, "binary", np.random.default_rng(5))
SPEC = DPEffectsSpec(epsilon=1e4, delta=1e-6, outcome_range=OUTCOME_RANGE["binary"], trim=0.1,
                     columns=tuple(f"x{j}" for j in range(10)), bounds=tuple(covariate_bounds()),
                     secure_aggregation=False)


class LosingGrid(InProcessGrid):
    """Party ``lost`` stops answering at its first request of ``operation``, and stays lost."""

    def __init__(self, parties, lost: str, operation: str) -> None:
        super().__init__(parties)
        self.lost, self.operation, self.gone, self.asked = lost, operation, False, []

    def send_and_receive(self, requests: Mapping[str, Message], *, timeout: float | None = None) -> dict[str, Message]:
        self.asked += [(name, m.operation) for name, m in requests.items()]
        self.gone |= self.lost in requests and next(iter(requests.values())).operation == self.operation
        if self.gone and self.lost in requests:
            raise StudyFailedError(f"party lost: {self.lost} during {self.operation!r}", "restart it")
        return super().send_and_receive(requests, timeout=timeout)


def _study(tmp_path, operation: str, on_missing: str) -> tuple[LosingGrid, dict]:
    parties = site_parties(SITES, str(tmp_path), SPEC.epsilon, SPEC.delta)
    grid = LosingGrid(parties, "site3", operation)
    return grid, dp_effects_results(grid, SPEC, "s", [p.name for p in parties], on_missing=on_missing)


def test_a_party_lost_before_its_statistics_is_dropped_and_the_study_goes_on_without_it(tmp_path):
    grid, report = _study(tmp_path, STATISTICS, "continue")
    ate, peer = report["estimates"]["aipw-ate"], federated_aipw(SITES[:3])
    assert report["dp_effects"]["n_subjects"].keys() == {"site0", "site1", "site2"}
    assert ate["n"] == sum(len(s.T) for s in SITES[:3]) < sum(len(s.T) for s in SITES)
    assert abs(ate["estimate"] - peer.estimate) < 2 * max(ate["se"], peer.se)  # the three sites' AIPW
    assert set(report["privacy"]) == {"site0", "site1", "site2"}
    assert report["lost_parties"].keys() == {"site3"} and report["lost_parties"]["site3"]["during"] == STATISTICS
    (line,) = [w for w in report["warnings"] if "site3" in w]
    assert "lost during dp_effects_statistics at " in line and "may have been charged" in line
    assert "exclude its subjects" in line
    assert ("site3", SCORES) not in grid.asked  # nothing more was asked of it
    assert PrivacyLedger.from_file(tmp_path / "site0.sqlite").history()[-1].operation == SCORES


def test_a_party_lost_after_its_statistics_were_used_fails_the_study(tmp_path):
    with pytest.raises(StudyFailedError, match="site3"):
        _study(tmp_path, SCORES, "continue")


def test_on_missing_party_fail_keeps_failing_on_a_lost_party(tmp_path):
    with pytest.raises(StudyFailedError, match="site3"):
        _study(tmp_path, STATISTICS, "fail")
    for i in range(3):  # nothing more was asked of anyone
        assert SCORES not in {c.operation for c in PrivacyLedger.from_file(tmp_path / f"site{i}.sqlite").history()}
