"""A hostile analyst against stacked ``weighted_moments`` (weights of shape (k, rows)).

Each test encodes the safe behaviour: a stacked request is refused whenever the same samples sent
one request after another would be, and a refused request leaves nothing behind (differencing
history, state file, ledger), in memory and out of core alike. Subject K (arm 1) is the target.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import collabcausal.party  # noqa: F401  (registers the operations)
from collabcausal.errors import CollabCausalError, InputError, PolicyError
from collabcausal.ledger import PrivacyLedger
from collabcausal.messages import Message
from collabcausal.party import Party, PartyTable
from collabcausal.party.audit import JsonlAuditLog
from collabcausal.party.chunked_table import ChunkedTable
from collabcausal.party.policy import PartyPolicy
from collabcausal.party.request_limits import RequestLimits
from collabcausal.party.request_state import RequestState

N = 60
K = 7
ARMS = (np.arange(N) % 2).astype(np.int8)
ONE = np.ones(N)
E_K = np.eye(N)[K]
RNG = np.random.default_rng(11)
W = RNG.uniform(0.5, 1.5, N)  # a second honest-looking sample
DECOY = RNG.uniform(-0.3, 0.3, N)  # spread over every subject: rule 3 territory


def _frame() -> pd.DataFrame:
    rng = np.random.default_rng(3)
    a, b, y = rng.normal(size=(3, N))
    return pd.DataFrame({"a": a, "b": b, "t": ARMS.astype(np.int64), "y": y})


def _policy(max_moment_requests: int = 32, ops=("weighted_moments",)) -> PartyPolicy:
    limits = RequestLimits(max_moment_requests=max_moment_requests)
    return PartyPolicy(ops, ["a", "b"], min_subjects=10, limits=limits, allow_plain_with_dp=True)


def _party(**kwargs) -> Party:
    table = PartyTable.from_frame(_frame(), ["a", "b"], min_subjects=1)
    return Party("h", table, policy=_policy(**kwargs))


def _request(weights, arms=ARMS, rows=None, op: str = "weighted_moments", **params) -> Message:
    arrays = {"arms": arms, "weights": np.asarray(weights)}
    if rows is not None:
        arrays["rows"] = rows
    return Message(op, {"study": "s", **params}, arrays)


def _count(party: Party) -> int:
    return party.requests.weighted_count(party.study)


def _refused(party: Party, request: Message, match: str) -> str:
    before = _count(party)
    with pytest.raises(PolicyError, match=match) as info:
        party.handle(request)
    assert "\n" not in str(info.value)
    assert _count(party) == before  # nothing admitted, not even the samples before the refused one
    return str(info.value)


DIFFERENCING = {
    # a sample minus the target, in the same request
    "w and w - e_K": np.stack([ONE, ONE - E_K]),
    # a scaled copy: 3 (w - e_K) against w
    "scaled copy": np.stack([ONE, 3.0 * (ONE - E_K)]),
    # a change far below any rounding: rule 1 is exact
    "1e-12 on the target": np.stack([ONE, ONE + 1e-12 * E_K]),
    # a combination of two earlier samples of the same request
    "w1 + w2 + e_K": np.stack([ONE, W, ONE + W + E_K]),
    # the decoy attack of differencing.py: R2 - R3 = 2 d, R2 + R3 - 2 R1 = 2 e_K
    "decoys in one request": np.stack([ONE, ONE + E_K + DECOY, ONE + E_K - DECOY]),
    # the attack in the last of 16 otherwise honest samples: the 15 before it are not admitted either
    "last of 16": np.vstack([RNG.uniform(0.5, 1.5, (15, N)), RNG.uniform(0.5, 1.5, N)]),
}
DIFFERENCING["last of 16"][-1] = DIFFERENCING["last of 16"][0] * (1.0 - E_K)


@pytest.mark.parametrize("case", sorted(DIFFERENCING))
def test_samples_that_difference_the_target_within_one_request_are_refused_whole(case):
    party = _party()
    _refused(party, _request(DIFFERENCING[case]), "min_subjects of 10")
    party.handle(_request(ONE))  # and the history still holds nothing: a sample of the refused request is new


def test_a_repeated_row_that_only_one_sample_weighs_is_the_target_alone():
    """Rows are shared by the samples: the repeat of K weighed in sample 2 only adds e_K to it."""
    rows = np.r_[np.arange(N), K]
    weights = np.stack([np.r_[ONE, 0.0], np.r_[ONE, 1.0]])
    _refused(_party(), _request(weights, np.r_[ARMS, 1], rows), "min_subjects of 10")


@pytest.mark.parametrize("order", ["plain first", "stacked first"])
def test_plain_and_stacked_requests_share_one_history(order):
    """R1 = 1 alone, then R2, R3 = 1 + e_K +/- d stacked; or 1 and w stacked, then 1 + w - e_K alone."""
    party = _party()
    if order == "plain first":
        party.handle(_request(ONE))
        attack = _request(np.stack([ONE + E_K + DECOY, ONE + E_K - DECOY]))
    else:
        party.handle(_request(np.stack([ONE, W])))
        attack = _request(ONE + W - E_K)
    _refused(party, attack, "isolates subject 7 of arm 1")


def test_moving_the_target_between_arms_across_requests_is_refused():
    """Arms are shared by a request's samples; across requests, K moved to arm 0 differs on K alone."""
    party = _party()
    party.handle(_request(np.stack([ONE, W])))
    moved = ARMS.copy()
    moved[K] = 0
    _refused(party, _request(np.stack([ONE, W]), moved), "in arm 0 it differs from request 1")


@pytest.mark.parametrize(
    "weights",
    [np.stack([ONE, E_K]), np.stack([ONE, E_K + 1e-300]), np.stack([ONE, np.where(ARMS == 0, 1.0, 0.0)])],
    ids=["one-hot", "one subject and 1e-300", "an empty arm"],
)
def test_every_sample_must_cover_min_subjects_in_each_arm(weights):
    _refused(_party(), _request(weights), "cover only [01] subjects, below its minimum of 10")


def test_stacking_counts_every_sample_against_max_moment_requests():
    party = _party(max_moment_requests=20)
    party.handle(_request(np.ones((16, N))))  # 16 identical samples: 16 counted
    assert _count(party) == 16
    _refused(party, _request(np.ones((5, N))), "answered 20 'weighted_moments' requests, its max_moment_requests")
    party.handle(_request(np.ones((4, N))))
    assert _count(party) == 20
    _refused(party, _request(ONE), "answered 20")


MALFORMED = {
    "17 samples": (np.ones((17, N)), r"\(k, 60\) with 1 <= k <= 16"),
    "no sample": (np.ones((0, N)), r"weights has shape \(0, 60\)"),
    "3-d": (np.ones((2, 1, N)), r"weights has shape \(2, 1, 60\)"),
    "one row short": (np.ones((2, N - 1)), r"weights has shape \(2, 59\)"),
    "bool": (np.ones((2, N), bool), "dtype bool"),
    "object": (np.ones((2, N), object), "dtype object"),
    "complex": (np.ones((2, N), complex), "dtype complex128"),
    "long double beyond float64": (np.full((2, N), np.longdouble(10) ** 400), "dtype float128"),
    "NaN in the second sample only": (np.stack([ONE, np.where(np.arange(N) == K, np.nan, 1.0)]), "finite and >= 0"),
    "inf in the second sample only": (np.stack([ONE, np.where(np.arange(N) == K, np.inf, 1.0)]), "finite and >= 0"),
    "negative in the second sample only": (np.stack([ONE, np.where(np.arange(N) == K, -1.0, 1.0)]), "finite and >= 0"),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_stacked_weights_are_refused_by_the_policy_with_nothing_admitted(case):
    weights, match = MALFORMED[case]
    if weights.dtype == np.longdouble and np.finfo(np.longdouble).max <= np.finfo(np.float64).max:
        pytest.skip("long double is float64 on this platform")
    _refused(_party(), _request(weights), match)


def test_the_byte_cap_counts_every_sample():
    """k x rows near max_request_bytes: refused from the sizes, before the policy reads a weight."""
    limits = RequestLimits(max_request_bytes=16 * N * 8)  # 16 samples of float64 fit, with nothing else
    party = Party("h", PartyTable.from_frame(_frame(), ["a", "b"], min_subjects=1),
                  policy=PartyPolicy(("weighted_moments",), ["a", "b"], min_subjects=10, limits=limits))
    _refused(party, _request(np.ones((16, N))), "bytes of arrays, above its max_request_bytes")


# The operation refuses these; the policy must too, before its history admits the samples.
OPERATION_WOULD_REFUSE = {
    "arms coded 2": ({"arms": np.where(np.arange(N) == K, 2, ARMS)}, "arms must be coded 0/1"),
    "arms 0.5": ({"arms": np.where(ARMS == 1, 1.0, 0.5)}, "arms must be coded 0/1"),
    "rows beyond the table": ({"rows": np.r_[np.arange(N - 1), 10**9]}, "rows .* are not 1-D positions of its 60"),
    "negative rows": ({"rows": np.r_[np.arange(N - 1), -1]}, "rows .* are not 1-D positions"),
    "float rows": ({"rows": np.arange(N) + 0.0}, r"rows \(shape \(60,\), dtype float64\)"),
    "2-d rows": ({"rows": np.arange(N)[None, :]}, r"rows \(shape \(1, 60\)"),
}


@pytest.mark.parametrize("case", sorted(OPERATION_WOULD_REFUSE))
def test_a_request_the_operation_would_refuse_leaves_no_trace_in_state_audit_or_ledger(tmp_path, case):
    arrays, match = OPERATION_WOULD_REFUSE[case]
    state = RequestState(tmp_path / "state.sqlite", "d")
    ledger = PrivacyLedger(tmp_path / "ledger.sqlite", epsilon=10.0, delta=1e-3, dataset="d")
    audit = JsonlAuditLog(tmp_path / "audit.jsonl")
    table = PartyTable.from_frame(_frame(), ["a", "b"], min_subjects=1)
    ops = ("weighted_moments", "dp_weighted_moments")
    party = Party("h", table, policy=_policy(ops=ops), ledger=ledger, audit=audit, study="s", requests=state)
    request = _request(np.stack([ONE, W]))
    _refused(party, Message(request.operation, request.params, {**request.arrays, **arrays}), match)
    assert RequestState(tmp_path / "state.sqlite", "d").weighted_count("s") == 0  # the file, read afresh
    assert ledger.history() == []
    assert [e["event"] for e in audit.entries()] == ["received", "refused"]
    assert audit.entries()[-1]["error"]["kind"] == "PolicyError"


def test_a_stacked_dp_request_is_refused_before_any_charge(tmp_path):
    ledger = PrivacyLedger(tmp_path / "ledger.sqlite", epsilon=10.0, delta=1e-3, dataset="d")
    table = PartyTable.from_frame(_frame(), ["a", "b"], min_subjects=1)
    party = Party("h", table, policy=_policy(ops=("weighted_moments", "dp_weighted_moments")), ledger=ledger)
    dp = {"epsilon": 1.0, "delta": 1e-6, "columns": ["a", "b"], "bounds": [[-4.0, 4.0], [-4.0, 4.0]]}
    _refused(party, _request(np.stack([ONE, W]), op="dp_weighted_moments", **dp), r"weights has shape \(2, 60\)")
    assert ledger.history() == []
    assert party.handle(_request(ONE, op="dp_weighted_moments", **dp)).params["sigma"] > 0  # 1-D: answered
    assert len(ledger.history()) == 1


@pytest.fixture
def both_tables(tmp_path):
    """The same rows in memory and out of core (two Parquet files of row groups of 7: blocks split the arms)."""
    frame = _frame()
    for k, part in enumerate((frame.iloc[:25], frame.iloc[25:])):
        pq.write_table(pa.Table.from_pandas(part, preserve_index=False), tmp_path / f"part-{k}.parquet",
                       row_group_size=7)
    chunked = ChunkedTable.open(tmp_path, ["a", "b"], treatment="t", outcome="y", min_subjects=1, workers=2)
    return PartyTable.from_frame(frame, ["a", "b"], treatment="t", outcome="y", min_subjects=1), chunked


def _errors(party: Party, requests: list[Message]) -> list[str]:
    out = []
    for request in requests:
        try:
            party.handle(request)
            out.append("answered")
        except CollabCausalError as error:
            out.append(f"{type(error).__name__}: {error}")
    return out


def test_out_of_core_refuses_and_answers_exactly_as_in_memory(both_tables):
    """One sequence of attacks and honest requests, whole and resampled: same refusals, same numbers."""
    rows = np.random.default_rng(4).integers(0, N, N)
    honest = [_request(np.stack([ONE, W])), _request(np.stack([W, ONE, 2 * W]), ARMS, rows)]
    attacks = [
        _request(DIFFERENCING[case]) for case in sorted(DIFFERENCING)
    ] + [
        _request(np.stack([ONE, W]), **arrays) for arrays, _ in OPERATION_WOULD_REFUSE.values()
    ] + [_request(weights) for weights, _ in MALFORMED.values() if weights.dtype != np.longdouble]
    memory, chunked = (Party("h", table, policy=_policy()) for table in both_tables)
    sequence = [honest[0], *attacks, honest[1], _request(ONE - E_K), _request(np.ones((5, N)))]
    outcomes = _errors(memory, sequence)
    assert _errors(chunked, sequence) == outcomes
    assert outcomes[0] == outcomes[-3] == outcomes[-1] == "answered"
    assert all(o.startswith("PolicyError") for o in outcomes[1:-3]) and outcomes[-2].startswith("PolicyError")
    assert _count(memory) == _count(chunked) == 2 + 3 + 5
    for request in honest:
        ours, theirs = chunked.handle(request), memory.handle(request)
        for name in ("sum_w", "sum_w2", "sum_wx", "sum_wx2"):
            np.testing.assert_allclose(ours.array(name), theirs.array(name), rtol=1e-12, atol=1e-13)


def test_a_party_without_a_policy_still_caps_the_samples():
    """No policy (a simulation): the operation's own check bounds k, before reading the table."""
    party = Party("h", PartyTable.from_frame(_frame(), ["a", "b"], min_subjects=1))
    with pytest.raises(InputError, match="weights stacks 17 samples, not 1 to 16"):
        party.handle(_request(np.ones((17, N))))
