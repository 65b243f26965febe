"""An evil party against the analyst's checks of stacked ``weighted_moments`` replies (federated_smds).

Two row groups, one party each (p1: rows resampled, p2: its whole table); the analyst asks for the
moments of three samples in one round. Each tampering of p2's reply must fail the study naming p2,
before any of its numbers enter an SMD; the honest round passes the same checks.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

from collabcausal.analyst.balance import DPBalance, federated_smds
from collabcausal.errors import StudyFailedError
from collabcausal.ledger import PrivacyLedger
from collabcausal.messages import Message
from collabcausal.party import Party, PartyTable
from collabcausal.protocol.inprocess import InProcessGrid

N = 200
HALF = N // 2


class TamperingGrid(InProcessGrid):
    """Honest parties, except that p2's replies go through ``tamper``."""

    def __init__(self, parties, tamper) -> None:
        super().__init__(parties)
        self.tamper = tamper

    def send_and_receive(self, requests, *, timeout=None):
        replies = super().send_and_receive(requests, timeout=timeout)
        replies["p2"] = self.tamper(replies["p2"])
        return replies


def _study(tmp_path, tamper=lambda reply: reply):
    rng = np.random.default_rng(8)
    frame = pd.DataFrame({"a": rng.normal(size=N), "b": rng.uniform(0, 10, N)})
    parties = []
    for name, part in (("p1", frame.iloc[:HALF]), ("p2", frame.iloc[HALF:])):
        ledger = PrivacyLedger(tmp_path / f"{name}.sqlite", epsilon=1e7, delta=1e-3, dataset="d")
        parties.append(Party(name, PartyTable.from_frame(part.reset_index(drop=True), ["a", "b"]), ledger=ledger))
    t = (rng.random(N) < 0.4).astype(np.int8)
    samples = [rng.uniform(0.5, 2.0, N), np.ones(N), rng.integers(0, 3, N).astype(float) + (t == 1)]
    rows = [rng.integers(0, HALF, HALF), HALF]
    return TamperingGrid(parties, tamper), rows, t, samples


def _with(reply: Message, **arrays) -> Message:
    return dataclasses.replace(reply, arrays={**reply.arrays, **arrays})


def _each(reply: Message, change) -> Message:
    return _with(reply, **{name: change(name, value) for name, value in reply.arrays.items()})


def _in_sample(s: int, factor: float):
    def change(name, value):
        value = np.array(value, dtype=np.float64)
        value[s] *= factor
        return value

    return change


TAMPERINGS = {
    # the samples' replies in another order: each is well formed, none is the one asked for
    "samples 0 and 1 swapped": (lambda r: _each(r, lambda n, v: v[[1, 0, 2]]), "sum_w is not the sum of the weights"),
    "samples reversed": (lambda r: _each(r, lambda n, v: v[::-1]), "sum_w is not the sum of the weights"),
    # the arms of one sample swapped (control's sums given as the treated's)
    "arms of sample 2 swapped": (
        lambda r: _each(r, lambda n, v: np.concatenate([v[:2], v[2:, ::-1]])), "sum_w is not the sum"
    ),
    # sum_w kept, sum_w2 of another sample: the squares are checked too
    "sum_w2 of another sample": (lambda r: _with(r, sum_w2=r.array("sum_w2")[[2, 1, 0]]), "sum_w2 is not the sum"),
    "sum_w of sample 1 doubled": (lambda r: _each(r, lambda n, v: _in_sample(1, 2.0)(n, v) if n == "sum_w" else v),
                                  "sum_w is not the sum"),
    # the reply to another request: the unstacked reply to the first sample alone
    "the first sample's unstacked reply": (lambda r: _each(r, lambda n, v: v[0]), r"sum_w has shape \(2,\)"),
    "a fourth sample": (lambda r: _each(r, lambda n, v: np.concatenate([v, v[:1]])), r"sum_w has shape \(4, 2\)"),
    "NaN in sample 1 only": (lambda r: _each(r, _in_sample(1, np.nan)), "sum_w holds NaN, infinite or negative"),
    "inf sum_wx in sample 2 only": (
        lambda r: _with(r, sum_wx=_in_sample(2, np.inf)("sum_wx", r.array("sum_wx"))), "sum_wx holds NaN"
    ),
    "negative sum_w2 in sample 0 only": (
        lambda r: _with(r, sum_w2=_in_sample(0, -1.0)("sum_w2", r.array("sum_w2"))), "sum_w2 holds NaN"
    ),
    "complex sums": (lambda r: _with(r, sum_wx=r.array("sum_wx").astype(complex)), "dtype complex128"),
    "boolean sums": (lambda r: _with(r, sum_w=r.array("sum_w") > 0), "dtype bool"),
    "a covariate short in sample 1 only": (
        lambda r: _with(r, sum_wx=r.array("sum_wx")[:, :, :1]), r"sum_wx has shape \(3, 2, 1\)"
    ),
}


@pytest.mark.parametrize("case", sorted(TAMPERINGS))
def test_a_tampered_stacked_reply_fails_the_study_naming_the_party(tmp_path, case):
    tamper, match = TAMPERINGS[case]
    grid, rows, t, samples = _study(tmp_path, tamper)
    with pytest.raises(StudyFailedError, match=rf"party 'p2' sent a weighted_moments reply .*{match}") as info:
        federated_smds(grid, [["p1"], ["p2"]], rows, t, samples)
    assert "\n" not in str(info.value)


def test_an_honest_stacked_round_passes_every_check_and_matches_one_round_per_sample(tmp_path):
    grid, rows, t, samples = _study(tmp_path)
    together = federated_smds(grid, [["p1"], ["p2"]], rows, t, samples)
    alone = [federated_smds(grid, [["p1"], ["p2"]], rows, t, [w])[0] for w in samples]
    for one, many in zip(alone, together, strict=True):
        np.testing.assert_allclose(many.smd, one.smd, rtol=1e-12)


def test_a_stacked_reply_to_a_single_sample_request_is_refused(tmp_path):
    grid, rows, t, samples = _study(tmp_path, lambda r: _each(r, lambda n, v: v[None]))
    expected = r"party 'p2' .* sum_w has shape \(1, 2\) and dtype float64, expected \(2,\)"
    with pytest.raises(StudyFailedError, match=expected):
        federated_smds(grid, [["p1"], ["p2"]], rows, t, samples[:1])


def test_a_dp_reply_whose_exact_sums_are_not_the_requests_is_refused(tmp_path):
    """sum_w and sum_w2 of dp_weighted_moments are exact (public): the same check applies."""
    swapped = lambda r: _with(r, sum_w=r.array("sum_w")[::-1])  # noqa: E731
    grid, rows, t, samples = _study(tmp_path, swapped)
    dp = DPBalance(1e6, 1e-6, {"a": (-4.0, 4.0), "b": (0.0, 10.0)}, {"p1": ["a", "b"], "p2": ["a", "b"]})
    with pytest.raises(StudyFailedError, match=r"party 'p2' sent a weighted_moments reply .*sum_w is not the sum"):
        federated_smds(grid, [["p1"], ["p2"]], rows, t, samples[:1], dp=dp)
