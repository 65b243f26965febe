"""An evil party whose replies differ from what the analyst asked: the study fails naming it.

Each tampering below is applied to the reply of one LaLonde party (p12: 4 covariates, not a label
holder; p11: the label holder of row group 0) in an otherwise honest 2x2 DC-QE study.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from collabcausal.analyst.dcqe import DCQEPlan, run_dcqe
from collabcausal.anchor_key import simulation_anchor_key
from collabcausal.errors import StudyFailedError
from collabcausal.messages import Message
from collabcausal.protocol.inprocess import InProcessGrid
from collabcausal.simulations.datasets import load_lalonde
from collabcausal.simulations.partition import build_parties, partition_grid


def _with(reply: Message, **arrays) -> Message:
    return dataclasses.replace(reply, arrays={**reply.arrays, **arrays})


def _noise(reply: Message) -> Message:
    rng = np.random.default_rng(0)
    x, a = reply.array("x_tilde"), reply.array("a_tilde")
    return _with(reply, x_tilde=rng.normal(size=(x.shape[0], 50)), a_tilde=rng.normal(size=(a.shape[0], 50)))


TAMPERINGS = {
    "a_tilde one row short": ("p12", lambda r: _with(r, a_tilde=r.array("a_tilde")[:-1])),
    "x_tilde one row short": ("p12", lambda r: _with(r, x_tilde=r.array("x_tilde")[:-1])),
    "50 columns of noise": ("p12", _noise),
    "a_tilde columns differ": ("p12", lambda r: _with(r, a_tilde=r.array("a_tilde")[:, :1])),
    "x_tilde 3-d": ("p12", lambda r: _with(r, x_tilde=r.array("x_tilde")[..., None])),
    "NaN in x_tilde": ("p12", lambda r: _with(r, x_tilde=r.array("x_tilde") * np.nan)),
    "inf in a_tilde": ("p12", lambda r: _with(r, a_tilde=r.array("a_tilde") * np.inf)),
    "no x_tilde": ("p12", lambda r: dataclasses.replace(r, arrays={"a_tilde": r.array("a_tilde")})),
    "treatment 2": ("p11", lambda r: _with(r, treatment=r.array("treatment") * 2)),
    "treatment one short": ("p11", lambda r: _with(r, treatment=r.array("treatment")[1:])),
    "NaN outcome": ("p11", lambda r: _with(r, outcome=r.array("outcome") * np.nan)),
}


class EvilGrid(InProcessGrid):
    """Honest parties, except that ``party``'s ``operation`` replies go through ``tamper``."""

    def __init__(self, parties, party: str, tamper, operation: str = "dc_representation") -> None:
        super().__init__(parties)
        self.evil, self.tamper, self.operation = party, tamper, operation

    def send_and_receive(self, requests, *, timeout=None):
        replies = super().send_and_receive(requests, timeout=timeout)
        if self.evil in replies and replies[self.evil].operation == self.operation:
            replies[self.evil] = self.tamper(replies[self.evil])
        return replies


def _study() -> tuple[list, DCQEPlan]:
    data = load_lalonde()
    part = partition_grid(data, 2, seed=0)
    plan = DCQEPlan(part.names(), data.covariate_ranges(), n_anchors=500, party_components=4, estimand="att",
                    estimators=("ipw",))
    return build_parties(data, part, anchor_key=simulation_anchor_key(0)), plan


@pytest.mark.parametrize("case", sorted(TAMPERINGS))
def test_a_reply_unlike_the_request_fails_the_study_naming_the_party(case):
    parties, plan = _study()
    party, tamper = TAMPERINGS[case]
    with pytest.raises(StudyFailedError, match=f"party '{party}' sent a dc_representation reply") as info:
        run_dcqe(EvilGrid(parties, party, tamper), plan)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("params", "match"),
    [({"n_subjects": "many"}, "n_subjects is 'many'"), ({"covariates": "x"}, "covariates is not a list"),
     ({"has_labels": None}, "has_labels")],
)
def test_a_malformed_description_fails_the_study_naming_the_party(params, match):
    parties, plan = _study()
    evil = EvilGrid(parties, "p21", lambda r: Message("describe", {**r.params, **params}), "describe")
    with pytest.raises(StudyFailedError, match=f"party 'p21' sent a describe reply .*{match}"):
        run_dcqe(evil, plan)


MOMENT_TAMPERINGS = {
    "sum_wx one column short": (lambda r: _with(r, sum_wx=r.array("sum_wx")[:, :-1]), "sum_wx has shape"),
    "NaN sum_w": (lambda r: _with(r, sum_w=r.array("sum_w") * np.nan), "sum_w holds NaN"),
    "negative sum_w2": (lambda r: _with(r, sum_w2=-r.array("sum_w2")), "sum_w2 holds NaN, infinite or negative"),
    "no sum_wx2": (lambda r: dataclasses.replace(r, arrays={k: v for k, v in r.arrays.items() if k != "sum_wx2"}),
                   "sum_wx2 has nothing"),
    "covariates not a list": (lambda r: Message(r.operation, {"covariates": 3}, r.arrays), "covariates is not a"),
    # the study asks for two samples at once (IPW's and the unweighted one): each is checked
    "a sample short": (lambda r: _with(r, **{k: v[:1] for k, v in r.arrays.items()}), r"sum_w has shape \(1, 2\)"),
    "negative sum_w of the second sample": (
        lambda r: _with(r, sum_w=r.array("sum_w") * np.array([[1.0, 1.0], [1.0, -1.0]])),
        "sum_w holds NaN, infinite or negative",
    ),
}


@pytest.mark.parametrize("case", sorted(MOMENT_TAMPERINGS))
def test_malformed_balance_moments_fail_the_study_naming_the_party(case):
    parties, plan = _study()
    tamper, match = MOMENT_TAMPERINGS[case]
    with pytest.raises(StudyFailedError, match=f"party 'p22' sent a weighted_moments reply .*{match}"):
        run_dcqe(EvilGrid(parties, "p22", tamper, "weighted_moments"), plan)


def test_the_honest_study_passes_the_checks():
    parties, plan = _study()
    result = run_dcqe(InProcessGrid(parties), plan)
    assert np.isfinite(result.effects.estimates["ipw"].estimate)
