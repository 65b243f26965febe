"""The DP representation: one charge before computing, a data-independent map, the stated sensitivity."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest

from collabcausal.anchor_key import simulation_anchor_key
from collabcausal.errors import BudgetExceededError, InputError, PolicyError
from collabcausal.estimators.dp.calibration import representation_sensitivity
from collabcausal.ledger import PrivacyLedger
from collabcausal.messages import Message
from collabcausal.party import Party, PartyTable
from collabcausal.party.dp_representation import clip_norms, public_map
from collabcausal.party.policy import PartyPolicy

KEY = simulation_anchor_key(7)
RANGES = {"a": [0.0, 10.0], "b": [-1.0, 1.0], "c": [0.0, 1.0]}


def _table(seed: int, n: int = 60) -> PartyTable:
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame({
        "a": rng.uniform(0, 10, n), "b": rng.uniform(-1, 1, n), "c": rng.uniform(0, 1, n),
        "t": np.arange(n) % 2, "y": rng.normal(size=n),
    })
    return PartyTable.from_frame(frame, ["a", "b", "c"], treatment="t", outcome="y")


def _party(tmp_path, *, seed: int = 0, epsilon: float = 10.0, policy=None) -> Party:
    ledger = PrivacyLedger(tmp_path / f"ledger-{seed}.sqlite", epsilon=epsilon, delta=1e-3, dataset="d")
    return Party("p", _table(seed), ledger=ledger, anchor_key=KEY, policy=policy)


def _request(**changes) -> Message:
    params = {"study": "s", "epsilon": 1.0, "delta": 1e-6, "n_components": 3, "n_anchors": 50,
              "anchor_ranges": RANGES, "labels": True, "outcome_range": [-3.0, 3.0], **changes}
    return Message("dp_representation", params)


def test_one_release_is_one_charge_of_its_epsilon_and_delta(tmp_path):
    party = _party(tmp_path)
    reply = party.handle(_request())
    assert party.ledger.spent() == (1.0, 1e-6)
    [charge] = party.ledger.history()
    assert charge.operation == "dp_representation" and charge.relation == "substitute-one"
    assert reply.arrays["x_tilde"].shape == (60, 3) and reply.arrays["a_tilde"].shape == (50, 3)
    assert reply.arrays["t_noisy"].shape == reply.arrays["y_noisy"].shape == (60,)
    assert reply.params["sensitivity"] == pytest.approx(2 * math.sqrt(3 + 2))


def test_over_budget_is_refused_before_anything_is_released(tmp_path):
    party = _party(tmp_path, epsilon=0.5)
    with pytest.raises(BudgetExceededError):
        party.handle(_request())
    assert party.ledger.spent() == (0.0, 0.0) and party.ledger.history() == []


@pytest.mark.parametrize(
    ("request_", "error", "words"),
    [
        (Message("dp_representation", _request().params, {"rows": np.arange(20)}), PolicyError, "resampled rows"),
        (_request(delta=0.0), InputError, "delta > 0"),
        (_request(outcome_range=None), InputError, "outcome_range"),
        (_request(n_components=4), InputError, "1..3"),
    ],
)
def test_malformed_or_unsafe_requests_are_refused_uncharged(tmp_path, request_, error, words):
    party = _party(tmp_path)
    with pytest.raises(error, match=words):
        party.handle(request_)
    assert party.ledger.spent() == (0.0, 0.0)


def test_a_party_without_ledger_or_anchor_key_refuses(tmp_path):
    with pytest.raises(PolicyError, match="no privacy ledger"):
        Party("p", _table(0), anchor_key=KEY).handle(_request())
    no_key = _party(tmp_path)
    no_key.anchor_key = None
    with pytest.raises(PolicyError, match="anchor key"):
        no_key.handle(_request())


def test_full_rank_is_allowed_under_dp_but_max_components_still_binds(tmp_path):
    policy = PartyPolicy(["describe", "dp_representation"], ["a", "b", "c"], min_subjects=10)
    assert _party(tmp_path, policy=policy).handle(_request()).params["n_components"] == 3
    capped = PartyPolicy(["dp_representation"], ["a", "b", "c"], min_subjects=10, max_components=2)
    with pytest.raises(PolicyError, match="at most 2 components"):
        _party(tmp_path, seed=1, policy=capped).handle(_request())


def test_the_map_and_anchor_images_do_not_depend_on_the_rows(tmp_path):
    # Two parties with different data, same columns, key and study: identical exact anchor images.
    first, second = _party(tmp_path, seed=0).handle(_request()), _party(tmp_path, seed=1).handle(_request())
    np.testing.assert_array_equal(first.arrays["a_tilde"], second.arrays["a_tilde"])
    mapping = public_map(KEY, "s", ["a", "b", "c"], RANGES, 3)
    np.testing.assert_allclose(mapping.rotation @ mapping.rotation.T, np.eye(3), atol=1e-12)


def test_the_sensitivity_is_the_largest_change_one_substituted_subject_makes():
    # Every pair of corners of the public box (covariates) x {0, 1} (treatment) x outcome range.
    mapping = public_map(KEY, "s", ["a", "b", "c"], RANGES, 3)
    corners = np.array(list(itertools.product(*[RANGES[c] for c in "abc"])))
    rows = []
    for x, t, y in itertools.product(corners, (0, 1), (-3.0, 3.0)):
        z, _ = clip_norms(mapping.transform(x[None, :]), math.sqrt(3))
        rows.append(np.r_[z[0], 2 * t - 1, y / 3.0])
    rows = np.array(rows)
    largest = max(np.linalg.norm(u - v) for u in rows for v in rows)
    assert largest == pytest.approx(representation_sensitivity(math.sqrt(3), labels=True), rel=1e-12)


def test_norm_clipping_bounds_every_row():
    Z = np.random.default_rng(3).normal(size=(500, 4)) * 3
    clipped, moved = clip_norms(Z, 1.5)
    assert np.all(np.linalg.norm(clipped, axis=1) <= 1.5 + 1e-12)
    assert moved == int(np.count_nonzero(np.linalg.norm(Z, axis=1) > 1.5))


def test_the_dp_anchor_an_analyst_can_recover_says_nothing_about_the_plain_anchor(tmp_path):
    # A~ of a full-rank DP release is an exact rotation of the scaled anchor: the analyst gets the DP
    # anchor (here: directly, R being orthogonal). It must be independent of dc_representation's.
    from collabcausal.party.anchor import anchor_columns

    reply = _party(tmp_path).handle(_request())
    mapping = public_map(KEY, "s", ["a", "b", "c"], RANGES, 3)
    recovered = mapping.low + (reply.arrays["a_tilde"] @ mapping.rotation + 1) / 2 * (mapping.high - mapping.low)
    plain = anchor_columns(KEY, "s", ["a", "b", "c"], RANGES, 50)
    dp = anchor_columns(KEY, "s", ["a", "b", "c"], RANGES, 50, purpose="dp-anchor")
    np.testing.assert_allclose(recovered, dp, atol=1e-9)
    # independent uniform streams: |corr| of 50 pairs stays under 0.6 with probability > 1 - 1e-5;
    # seeded key, so a fixed outcome
    corr = [abs(np.corrcoef(plain[:, k], recovered[:, k])[0, 1]) for k in range(3)]
    assert max(corr) < 0.6, corr
