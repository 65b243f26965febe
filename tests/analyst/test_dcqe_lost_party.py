"""A party lost during a DC-QE bootstrap (issue 38 item 3): under on_missing_party = "continue" the bootstrap
stops and keeps the replicates done (the same numbers an uninterrupted bootstrap gives for them); under
"fail", or before two replicates are done, the study fails."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pytest

from collabcausal.analyst.dcqe import bootstrap_dcqe, describe_parties
from collabcausal.errors import StudyFailedError
from collabcausal.messages import Message
from collabcausal.protocol.inprocess import InProcessGrid
from tests.analyst.test_dcqe import lalonde_grid

N_BOOT = 6


class LosingGrid(InProcessGrid):
    """Party ``lost`` stops answering after ``answers`` requests (then the transport raises, as gRPC's does)."""

    def __init__(self, grid: InProcessGrid, lost: str, answers: int) -> None:
        self.__dict__.update(grid.__dict__)
        self.lost, self.answers = lost, answers

    def send_and_receive(self, requests: Mapping[str, Message], *, timeout: float | None = None) -> dict[str, Message]:
        if self.lost in requests:
            if self.answers <= 0:
                raise StudyFailedError(f"party lost: {self.lost} during {next(iter(requests.values())).operation!r}",
                                       "restart it")
            self.answers -= 1
        return super().send_and_receive(requests, timeout=timeout)


def _requests_per_replicate(grid, plan, described, lost: str) -> int:
    counting = LosingGrid(grid, lost, 10**9)
    bootstrap_dcqe(counting, plan, 1, described=described)
    return 10**9 - counting.answers


@pytest.fixture(scope="module")
def study():
    grid, plan, _ = lalonde_grid()
    described = describe_parties(grid, plan)
    lost = plan.row_groups[0][0]
    return grid, plan, described, lost, _requests_per_replicate(grid, plan, described, lost)


def test_a_party_lost_mid_bootstrap_stops_it_and_keeps_the_replicates_done(study):
    grid, plan, described, lost, per_replicate = study
    whole, stopped = bootstrap_dcqe(grid, plan, N_BOOT, described=described)
    assert stopped is None
    cut, stopped = bootstrap_dcqe(LosingGrid(grid, lost, 3 * per_replicate), plan, N_BOOT, described=described,
                                  on_missing="continue")
    assert stopped.startswith(f"the bootstrap stopped at replicate 3 of {N_BOOT} at ") and lost in stopped
    for name, values in cut.items():
        assert values.shape == (3,) and np.isfinite(values).all()
        np.testing.assert_array_equal(values, whole[name][:3])


@pytest.mark.parametrize(("on_missing", "answers"), [("fail", 3), ("continue", 1)],
                         ids=["on_missing fail", "fewer than two replicates done"])
def test_a_party_lost_mid_bootstrap_fails_the_study(study, on_missing, answers):
    grid, plan, described, lost, per_replicate = study
    with pytest.raises(StudyFailedError, match=f"party lost: {lost}"):
        bootstrap_dcqe(LosingGrid(grid, lost, answers * per_replicate), plan, N_BOOT, described=described,
                       on_missing=on_missing)
