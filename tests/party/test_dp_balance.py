"""dp_weighted_moments: a hostile analyst's weights buy no more than (epsilon, delta) (issue 10).

False-failure rates. Every audit asserts a Clopper-Pearson bound at confidence 1 - 1e-6
(collabcausal/attacks/dp_audit.py): it exceeds the claim with probability <= 1e-6 if the release
is as claimed. The power checks use seeded numpy noise (fixed outcome). The tolerance checks at a
huge epsilon allow 6 sigma per entry (two-sided normal tail 2e-9; at most 16 entries: < 4e-8).
The sensitivity property test is deterministic (seeded draws).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from collabcausal.attacks.dp_audit import audit_gaussian_release, projection_errors, release_audit
from collabcausal.errors import InputError, PolicyError
from collabcausal.estimators.balance import weighted_moments
from collabcausal.estimators.dp.calibration import moments_sensitivity
from collabcausal.ledger import PrivacyLedger
from collabcausal.messages import Message
from collabcausal.party import Party, PartyTable
from collabcausal.party.dp_balance import OPERATION, standardised_moments
from collabcausal.party.policy import PartyPolicy

N = 40
EPS, DELTA = 1.0, 1e-5
BOUNDS = [[-1.0, 1.0], [0.0, 2.0]]
ARMS = np.arange(N) % 2  # subject 0 in arm 0
HOSTILE = np.r_[1.0, np.full(N - 1, 0.01)]  # weight 1 on subject 0; 0.01 = min_weight_ratio x 1 elsewhere


def _frame(corner: int) -> pd.DataFrame:
    rng = np.random.default_rng(7)
    frame = pd.DataFrame({"a": rng.uniform(-1, 1, N), "b": rng.uniform(0, 2, N)})
    frame.loc[0, ["a", "b"]] = [BOUNDS[0][corner], BOUNDS[1][corner]]  # the target at a corner of the box
    return frame


def _party(frame: pd.DataFrame, ledger_path, *, epsilon: float = 1e9, delta: float = 0.5) -> Party:
    table = PartyTable.from_frame(frame, ["a", "b"], min_subjects=1)
    # both, to compare the DP and the exact operation on one party: an explicit opt-out (no guarantee)
    policy = PartyPolicy([OPERATION, "weighted_moments"], ["a", "b"], min_subjects=10, allow_plain_with_dp=True)
    ledger = PrivacyLedger(ledger_path, epsilon=epsilon, delta=delta, dataset="d")
    return Party("p", table, policy=policy, ledger=ledger)


def _request(weights=HOSTILE, *, epsilon: float = EPS, **params) -> Message:
    p = {"study": "s", "epsilon": epsilon, "delta": DELTA, "columns": ["a", "b"], "bounds": BOUNDS} | params
    return Message(OPERATION, p, {"arms": ARMS.astype(np.int8), "weights": np.asarray(weights, dtype=np.float64)})


def _moments(X: np.ndarray, bounds, arms, weights):
    """The exact (pre-noise) moments of a table of the columns of ``X``, every row requested once."""
    names = tuple("abcdefgh"[: X.shape[1]])
    table = PartyTable.from_arrays(np.asarray(X, dtype=float), names, min_subjects=1)
    return standardised_moments(table, names, bounds, arms, np.asarray(weights, dtype=float), None)[0]


def _exact(frame: pd.DataFrame, weights=HOSTILE) -> np.ndarray:
    moments = _moments(frame[["a", "b"]].to_numpy(float), [tuple(b) for b in BOUNDS], ARMS, weights)
    return np.stack([moments.sum_wx, moments.sum_wx2])


def test_hostile_weights_through_party_handle_reveal_no_more_than_epsilon(tmp_path):
    # The attack: weight 1 on the target, 0.01 on 39 others (the policy's min_weight_ratio lets it
    # through), the target at opposite corners of the box in the two neighbouring tables; the
    # analyst tests every reply against the exact difference (Neyman-Pearson).
    first, second = _exact(_frame(0)), _exact(_frame(1))
    n_releases = 1000
    errors = []
    for corner, says_second in ((0, True), (1, False)):
        party = _party(_frame(corner), tmp_path / f"l{corner}.sqlite")
        replies = [party.handle(_request()) for _ in range(n_releases)]
        noisy = np.stack([np.stack([r.arrays["sum_wx"], r.arrays["sum_wx2"]]) for r in replies])
        errors.append(projection_errors(noisy, first, second, says_second))
        assert len(party.ledger.history()) == n_releases  # every release charged
    sensitivity = replies[0].params["sensitivity"]
    assert sensitivity == pytest.approx(moments_sensitivity(2, 1.0))
    distance = float(np.linalg.norm(second - first))
    audit = release_audit(*errors, n_releases, distance, sensitivity, EPS, DELTA)
    assert audit.epsilon_lower <= EPS, audit
    assert audit.mu_lower <= audit.claimed_mu, audit


def test_a_seeded_audit_of_the_same_neighbours_sees_most_of_epsilon_and_never_more():
    first, second = _exact(_frame(0)), _exact(_frame(1))
    sensitivity = moments_sensitivity(2, 1.0)
    audit = audit_gaussian_release(first, second, sensitivity, EPS, DELTA, 200_000, rng=np.random.default_rng(3))
    assert audit.distance == pytest.approx(sensitivity, rel=1e-12)  # opposite corners attain the bound
    assert audit.epsilon_lower <= EPS and audit.mu_lower <= audit.claimed_mu
    assert audit.epsilon_lower_event <= EPS
    # Power: with N = 200,000 mu_lower sits within ~0.03 of mu (see tests/attacks/test_dp_audit.py).
    assert audit.epsilon_lower >= 0.8


def test_the_audit_catches_noise_calibrated_for_the_average_weight():
    # The bug the attack exploits: a sensitivity scaled by the mean weight instead of the heaviest subject's.
    first, second = _exact(_frame(0)), _exact(_frame(1))
    naive = moments_sensitivity(2, float(HOSTILE.mean()))
    audit = audit_gaussian_release(first, second, naive, EPS, DELTA, 200_000, rng=np.random.default_rng(4))
    assert audit.epsilon_lower > EPS


def test_the_sensitivity_bounds_every_substitution_including_an_arm_flip():
    # Brute force over random subjects in the box, weights and arms: no neighbour moves further.
    rng = np.random.default_rng(11)
    bounds = [(1.0, 3.0), (-1.0, 5.0), (1.5, 2.5)]
    n, worst = 12, 0.0
    for _ in range(2000):
        X = np.column_stack([rng.uniform(lo, hi, n) for lo, hi in bounds])
        weights, arms = rng.uniform(0, 1, n), rng.integers(0, 2, n)
        arms[:2] = (0, 1)
        Y, flipped = X.copy(), arms.copy()
        k = int(rng.integers(n))
        Y[k] = [rng.choice([lo, hi, rng.uniform(lo, hi)]) for lo, hi in bounds]
        if rng.random() < 0.5:
            flipped[k] = 1 - flipped[k]
        a = _moments(X, bounds, arms, weights)
        b = _moments(Y, bounds, flipped, weights)
        moved = math.hypot(np.linalg.norm(a.sum_wx - b.sum_wx), np.linalg.norm(a.sum_wx2 - b.sum_wx2))
        worst = max(worst, moved / moments_sensitivity(3, weights.max()))
    assert 0.5 < worst <= 1.0 + 1e-12


def test_the_reply_is_the_standardised_moments_and_gives_the_exact_smd_at_a_huge_epsilon(tmp_path):
    frame = _frame(1)
    party = _party(frame, tmp_path / "l.sqlite")
    weights = np.linspace(0.5, 1.5, N)
    reply = party.handle(_request(weights, epsilon=1e6))
    sigma = reply.params["sigma"]
    assert reply.params["covariates"] == ["a", "b"]
    assert reply.params["center"] == [0.0, 1.0] and reply.params["scale"] == [1.0, 1.0]
    exact = weighted_moments(frame[["a", "b"]].to_numpy() - [0.0, 1.0], ARMS, weights)
    np.testing.assert_array_equal(reply.arrays["sum_w"], exact.sum_w)  # public: exact
    np.testing.assert_array_equal(reply.arrays["sum_w2"], exact.sum_w2)
    assert np.max(np.abs(reply.arrays["sum_wx"] - exact.sum_wx)) <= 6 * sigma
    assert np.max(np.abs(reply.arrays["sum_wx2"] - exact.sum_wx2)) <= 6 * sigma
    (charge,) = party.ledger.history()
    assert (charge.operation, charge.epsilon, charge.delta) == (OPERATION, 1e6, DELTA)


def test_repeated_rows_count_as_one_subject_of_their_summed_weight(tmp_path):
    party = _party(_frame(0), tmp_path / "l.sqlite")
    rows = np.r_[np.zeros(20, dtype=np.int64), np.arange(N)]  # the target 21 times
    arms = np.r_[np.zeros(20), ARMS].astype(np.int8)
    request = Message(OPERATION, _request().params, {"arms": arms, "weights": np.ones(rows.size), "rows": rows})
    reply = party.handle(request)
    assert reply.params["sensitivity"] == pytest.approx(moments_sensitivity(2, 21.0))


def test_the_policy_still_refuses_weight_on_one_subject_and_nothing_is_charged(tmp_path):
    party = _party(_frame(0), tmp_path / "l.sqlite")
    with pytest.raises(PolicyError, match=r"arm 0 of the weights .* cover only 1 subjects"):
        party.handle(_request(np.r_[1.0, np.full(N - 1, 1e-300)]))
    assert party.ledger.history() == []


def test_differencing_is_left_to_the_ledger_for_the_dp_operation(tmp_path):
    # Two requests that differ in one subject: refused for the exact operation, charged twice for the DP one.
    party = _party(_frame(0), tmp_path / "l.sqlite")
    ones, fewer = np.ones(N), np.r_[0.0, np.ones(N - 1)]
    party.handle(_request(ones))
    party.handle(_request(fewer))
    assert len(party.ledger.history()) == 2
    exact = _party(_frame(0), tmp_path / "l2.sqlite")
    plain = Message("weighted_moments", {"study": "s"}, {"arms": ARMS.astype(np.int8), "weights": ones})
    exact.handle(plain)
    with pytest.raises(PolicyError, match=r"differ|earlier"):
        exact.handle(Message("weighted_moments", {"study": "s"}, {"arms": ARMS.astype(np.int8), "weights": fewer}))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"delta": None}, "needs epsilon and delta"),
        ({"epsilon": "1"}, "epsilon of dp_weighted_moments must be a number"),
        ({"delta": 0.0}, "is not in \\(0, 1/n"),
        ({"delta": 1 / N}, "is not in \\(0, 1/n"),
        ({"bounds": [[-1.0, 1.0]]}, "one \\(low, high\\) bound per column"),
        ({"bounds": [[1.0, -1.0], [0.0, 2.0]]}, "low < high"),
        ({"bounds": [[-1e308, 1e308], [0.0, 2.0]]}, "too wide or too narrow"),
        ({"weights": np.zeros(N)}, "cover only 0 subjects|sensitivity 0"),
        ({"weights": np.r_[-1.0, np.ones(N - 1)]}, "finite and >= 0|negative"),
        ({"arms": np.full(N, 2, dtype=np.int8)}, "cover only 0 subjects|coded 0/1"),
        # fuzzing: sum_w2 of weights 1e300 overflowed after the charge (an inf in the reply, or an error)
        ({"weights": np.full(N, 1e300)}, "squares overflow"),
    ],
)
def test_a_bad_request_is_refused_in_one_line_before_the_charge(tmp_path, change, message):
    party = _party(_frame(0), tmp_path / "l.sqlite", epsilon=1e308)
    request = _request()
    params = {k: v for k, v in (request.params | change).items() if v is not None and k not in ("weights", "arms")}
    arrays = request.arrays | {k: v for k, v in change.items() if k in ("weights", "arms")}
    with pytest.raises((InputError, PolicyError), match=message) as info:
        party.handle(Message(OPERATION, params, arrays))
    assert "\n" not in str(info.value)
    assert party.ledger.history() == []


def test_without_a_ledger_the_party_refuses(tmp_path):
    table = PartyTable.from_frame(_frame(0), ["a", "b"], min_subjects=1)
    party = Party("p", table, policy=PartyPolicy([OPERATION], ["a", "b"], min_subjects=10))
    with pytest.raises(PolicyError, match="no privacy budget"):
        party.handle(_request())


def test_without_a_policy_the_operation_itself_refuses_weights_that_release_nothing(tmp_path):
    table = PartyTable.from_frame(_frame(0), ["a", "b"], min_subjects=1)
    party = Party("p", table, ledger=PrivacyLedger(tmp_path / "l.sqlite", epsilon=10.0, delta=0.5, dataset="d"))
    for weights, message in ((np.zeros(N), "sensitivity 0"), (np.full(N, 1e308), "sensitivity inf")):
        with pytest.raises(InputError, match=message):
            party.handle(_request(weights))
    assert party.ledger.history() == []
