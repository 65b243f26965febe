"""Red team of the analyst's check of a weighted_moments reply (check_moments: one pass, the message only on refusal).

Each tampered reply is refused with a one-line StudyFailedError naming the party and the problem;
the honest reply (stacked or not, integer sums too) is accepted as it was sent.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from collabcausal.analyst.replies import check_moments, weight_sums
from collabcausal.errors import StudyFailedError
from collabcausal.estimators.balance import arm_weights
from collabcausal.messages import Message

K, N, M = 3, 40, 2


def honest(k: int | None = K) -> tuple[Message, tuple[np.ndarray, np.ndarray]]:
    """A party's reply to k stacked samples (None: one unstacked sample), and the sums the analyst sent."""
    rng = np.random.default_rng(7)
    arms, X = np.arange(N) % 2, rng.normal(size=(N, M))
    weights = rng.uniform(0.1, 2.0, (k or 1, N))
    A = arm_weights(weights, arms)  # (2k, N)
    fields = {"sum_w": A.sum(axis=1), "sum_w2": (A * A).sum(axis=1), "sum_wx": A @ X, "sum_wx2": A @ (X * X)}
    if k is None:
        weights = weights[0]
    else:
        fields = {name: v.reshape(k, 2, *v.shape[1:]) for name, v in fields.items()}
    return Message("weighted_moments", {"covariates": ["a", "b"]}, fields), weight_sums(arms, weights)


def changed(reply: Message, **arrays) -> Message:
    return dataclasses.replace(reply, arrays={**reply.arrays, **arrays})


def without(reply: Message, name: str) -> Message:
    return dataclasses.replace(reply, arrays={k: v for k, v in reply.arrays.items() if k != name})


def at(name: str, index: tuple, value: float):
    def tamper(reply: Message) -> Message:
        array = np.array(reply.arrays[name], dtype=np.float64)
        array[index] = value
        return changed(reply, **{name: array})

    return tamper


TAMPERINGS = {
    "NaN sum_w in the last sample": (at("sum_w", (2, 1), np.nan), "sum_w holds NaN, infinite or negative"),
    "NaN sum_w2 in one sample": (at("sum_w2", (1, 0), np.nan), "sum_w2 holds NaN, infinite or negative"),
    "NaN sum_wx2 in one sample": (at("sum_wx2", (1, 0, 1), np.nan), "sum_wx2 holds NaN"),
    "-inf sum_wx in one sample": (at("sum_wx", (0, 1, 0), -np.inf), "sum_wx holds NaN"),
    "negative sum_w2": (at("sum_w2", (0, 1), -1.0), "sum_w2 holds NaN, infinite or negative"),
    "sum_w2 negated": (lambda r: changed(r, sum_w2=-r.arrays["sum_w2"]), "sum_w2 holds NaN, infinite or negative"),
    "sum_w2 off by 1e-6": (lambda r: changed(r, sum_w2=r.arrays["sum_w2"] * (1 + 1e-6)), "sum_w2 is not the sum"),
    "samples swapped": (lambda r: dataclasses.replace(r, arrays={n: v[[1, 0, 2]] for n, v in r.arrays.items()}),
                        "sum_w is not the sum of the weights it was sent"),
    "sum_wx as (k, m, 2)": (lambda r: changed(r, sum_wx=np.zeros((K, M + 1, 2))), r"sum_wx has shape \(3, 3, 2\)"),
    "sum_wx as (k, 2)": (lambda r: changed(r, sum_wx=r.arrays["sum_wx"][..., 0]), r"sum_wx has shape \(3, 2\) "),
    "fewer samples": (lambda r: dataclasses.replace(r, arrays={n: v[:2] for n, v in r.arrays.items()}),
                      r"sum_w has shape \(2, 2\) and dtype float64, expected \(3, 2\)"),
    "one field with fewer samples": (lambda r: changed(r, sum_wx2=r.arrays["sum_wx2"][:2]),
                                     r"sum_wx2 has shape \(2, 2, 2\)"),
    "object sums": (lambda r: changed(r, sum_wx=r.arrays["sum_wx"].astype(object)), "dtype object"),
    "string sums": (lambda r: changed(r, sum_w=r.arrays["sum_w"].astype(str)), "sum_w has shape .* and dtype <U"),
    "timedelta sums": (lambda r: changed(r, sum_w2=r.arrays["sum_w2"].astype("m8[s]")), "sum_w2 has shape"),
    # in process a reply's arrays are whatever the party put there (the wire's codec makes ndarrays)
    "a list for sum_w": (lambda r: changed(r, sum_w=r.arrays["sum_w"].tolist()), "sum_w has a list, not an array"),
    "None for sum_wx": (lambda r: changed(r, sum_wx=None), "sum_wx has nothing"),
    "missing sum_w2": (lambda r: without(r, "sum_w2"), "sum_w2 has nothing"),
    "missing sum_wx2": (lambda r: without(r, "sum_wx2"), "sum_wx2 has nothing"),
    "a scalar sum_w": (lambda r: changed(r, sum_w=np.float64(1.0)), "sum_w has a float64, not an array"),
    "covariates missing": (lambda r: dataclasses.replace(r, params={}), "covariates is not a list of names"),
    "covariates not names": (lambda r: dataclasses.replace(r, params={"covariates": [1, 2]}), "covariates is not"),
    "one covariate too many named": (lambda r: dataclasses.replace(r, params={"covariates": ["a", "b", "c"]}),
                                     r"sum_wx has shape \(3, 2, 2\) and dtype float64, expected \(3, 2, 3\)"),
}


@pytest.mark.parametrize("case", sorted(TAMPERINGS))
def test_a_tampered_reply_is_refused_in_one_line_naming_the_party_and_the_problem(case):
    tamper, problem = TAMPERINGS[case]
    reply, sent = honest()
    with pytest.raises(StudyFailedError, match=rf"^party 'p7' sent a weighted_moments reply .*{problem}") as info:
        check_moments("p7", tamper(reply), sent)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("k", [None, 1, K])
def test_the_honest_reply_is_accepted_as_sent_stacked_or_not_and_extra_fields_are_not_kept(k):
    reply, sent = honest(k)
    moments = check_moments("p7", changed(reply, extra=np.arange(3)), sent)
    for name, value in reply.arrays.items():
        np.testing.assert_array_equal(getattr(moments, name), value, strict=True)
    assert not hasattr(moments, "extra")


def test_a_stacked_reply_to_one_sample_and_one_sample_to_a_stacked_request_are_refused():
    stacked, sent_stacked = honest(1)
    single, sent_single = honest(None)
    with pytest.raises(StudyFailedError, match=r"sum_w has shape \(1, 2\) and dtype float64, expected \(2,\)"):
        check_moments("p7", stacked, sent_single)
    with pytest.raises(StudyFailedError, match=r"sum_w has shape \(2,\) and dtype float64, expected \(1, 2\)"):
        check_moments("p7", single, sent_stacked)


def test_integer_sums_within_the_tolerance_are_accepted_as_float64():
    arms, weights = np.arange(4) % 2, np.ones((2, 4))
    sent = weight_sums(arms, weights)
    fields = {"sum_w": np.full((2, 2), 2), "sum_w2": np.full((2, 2), 2), "sum_wx": np.ones((2, 2, 1), np.int32),
              "sum_wx2": np.ones((2, 2, 1), np.int64)}
    moments = check_moments("p7", Message("weighted_moments", {"covariates": ["a"]}, fields), sent)
    assert all(getattr(moments, name).dtype == np.float64 for name in fields)
