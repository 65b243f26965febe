"""A hostile coordinator against the parties' DP operations: predictable noise, free re-releases.

Seed-like keys in every DP request: the noise of a party's release must come from OpenDP's
OS-entropy sampler whatever the request says (docs/threat-model.md), so a request carrying
``seed``, ``rng``, ``random_state``, ``noise_seed`` or ``noise_rng`` is refused uncharged (a
parameter no operation applies, docs/protocol.md) and the request without it reaches no seeded
(numpy) draw. Every noise draw of every DP operation is recorded (the mechanisms' ``rng``
argument) through ``Party.handle``. Idempotency keys of the study kinds' operations: a key names
one request and one charge.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import collabcausal.estimators.dp.aggregates as aggregates
import collabcausal.estimators.dp.mechanisms as mechanisms
from collabcausal.anchor_key import simulation_anchor_key
from collabcausal.errors import InputError, ProtocolError
from collabcausal.estimators.dp.partitions import regular_cut
from collabcausal.ledger import PrivacyLedger
from collabcausal.messages import Message
from collabcausal.party import Party, PartyTable

SEEDS = {"seed": 0, "rng": 0, "random_state": 0, "noise_seed": 0, "noise_rng": 0}
N = 120
SUMS = [{"column": "a", "bounds": [0, 1]}]
REQUESTS = {
    "dp_count": ({"by_arm": True, "columns": []}, {}),
    "dp_sum": ({"sums": SUMS, "columns": ["a"]}, {}),
    "dp_mean": ({"sums": SUMS, "columns": ["a"]}, {}),
    "dp_histogram": ({"partition": regular_cut("a", (0, 1), 3).to_spec(), "by_arm": True, "sums": SUMS,
                      "columns": ["a"]}, {}),
    "dp_discover": ({"columns": ["a", "b"], "x_bounds": [0, 1], "y_bounds": [0, 1]}, {}),
    "dp_weighted_moments": ({"delta": 1e-4, "columns": ["a", "b"], "bounds": [[0, 1], [0, 1]]},
                            {"arms": np.arange(N) % 2, "weights": np.ones(N)}),
    "dp_representation": ({"delta": 1e-4, "n_components": 2, "n_anchors": 20, "labels": True,
                           "anchor_ranges": {"a": [0, 1], "b": [0, 1]}, "outcome_range": [-3, 3]}, {}),
}


@pytest.mark.parametrize("operation", list(REQUESTS))
def test_no_request_key_reaches_a_seeded_noise_draw(tmp_path, monkeypatch, operation):
    rngs: list = []

    def recording(function):
        def wrapped(*args, rng=None, **kwargs):
            rngs.append(rng)
            return function(*args, rng=rng, **kwargs)
        return wrapped

    for module, name in ((mechanisms, "perturb"), (mechanisms, "discrete_laplace"), (aggregates, "discrete_laplace")):
        monkeypatch.setattr(module, name, recording(getattr(module, name)))
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"a": rng.uniform(size=N), "b": rng.uniform(size=N), "t": np.arange(N) % 2,
                          "y": rng.normal(size=N)})
    party = Party("p", PartyTable.from_frame(frame, ["a", "b"], treatment="t", outcome="y"),
                  ledger=PrivacyLedger(tmp_path / "l.sqlite", epsilon=100.0, delta=1e-2, dataset="d"),
                  anchor_key=simulation_anchor_key(0))
    params, arrays = REQUESTS[operation]
    for key, value in SEEDS.items():
        with pytest.raises(InputError, match=f"does not apply: {key};"):
            party.handle(Message(operation, {"study": "s", "epsilon": 1.0, **params, key: value}, arrays))
    assert not rngs and party.ledger.history() == []
    party.handle(Message(operation, {"study": "s", "epsilon": 1.0, **params}, arrays))
    assert rngs and all(r is None for r in rngs)
    assert len(party.ledger.history()) == 1


@pytest.mark.parametrize("operation", ["dp_histogram", "dp_discover"])
def test_an_idempotency_key_buys_no_fresh_release(tmp_path, operation):
    """The kinds' operations with a request_id: the retry gets the recorded numbers uncharged; the same key
    with other parameters (a larger epsilon, another column, another study) is refused, uncharged."""
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"a": rng.uniform(size=N), "b": rng.uniform(size=N), "t": np.arange(N) % 2,
                          "y": rng.normal(size=N)})
    party = Party("p", PartyTable.from_frame(frame, ["a", "b"], treatment="t", outcome="y"),
                  ledger=PrivacyLedger(tmp_path / "l.sqlite", epsilon=100.0, dataset="d"))
    params = {"study": "s", "epsilon": 1.0, "request_id": "k-1", **REQUESTS[operation][0]}
    first = party.handle(Message(operation, params))
    again = party.handle(Message(operation, params))
    assert first.params == again.params and all(np.array_equal(first.arrays[k], again.arrays[k]) for k in first.arrays)
    for change in ({"epsilon": 2.0}, {"study": "t"}, {"columns": ["b", "a"]}):
        with pytest.raises(ProtocolError, match="already used for a different request"):
            party.handle(Message(operation, {**params, **change}))
    with pytest.raises(ProtocolError, match="already used"):
        party.handle(Message("dp_count", {"study": "s", "epsilon": 1.0, "request_id": "k-1"}))
    assert [c.epsilon for c in party.ledger.history()] == [1.0]


VALUES = [0, 1, -1, 0.5, 1e308, -1e308, 5e-324, 1e-300, float("nan"), float("inf"), True, False, "x", "1", None, [],
          {}, [0, 1], [1, 0], [[0, 1]], ["a"], ["@outcome"], "@outcome", "a", [0, 1e308], [-1e308, 1e308],
          [1e6, 1e6], 10**12, 2**63]
ARRAYS = [np.full(N, 1e300), np.full(N, 5e-324), np.full(N, np.nan), np.arange(N) % 3, np.zeros(N), -np.ones(N),
          np.ones(N - 1), np.ones((N, 1)), np.r_[np.arange(N - 1), N + 3], np.full(N, 1.7e308)]
KEYS = ["epsilon", "delta", "sums", "partition", "bounds", "columns", "x_bounds", "regularization", "hsic_widths",
        "kernel_width", "test_size", "n_components", "n_anchors", "clip_norm", "labels", "outcome_range", "by_arm",
        "quantiles", "anchor_ranges"]


def _mutate(value, rng: np.random.Generator):
    """``value`` with one entry (at any depth) replaced by a hostile one."""
    if isinstance(value, (dict, list)) and value and rng.random() < 0.7:
        keys = list(value) if isinstance(value, dict) else list(range(len(value)))
        key = keys[rng.integers(len(keys))]
        value[key] = _mutate(value[key], rng) if rng.random() < 0.5 else VALUES[rng.integers(len(VALUES))]
        return value
    return VALUES[rng.integers(len(VALUES))]


@pytest.mark.parametrize("n_requests", [400, pytest.param(10_000, marks=pytest.mark.slow)])
def test_fuzzed_requests_that_fail_are_never_charged(tmp_path, n_requests):
    """Seeded mutations of the DP requests above (any parameter at any depth, a new key, a hostile array)
    through Party.handle at a party without a policy: a request either releases or is refused before the
    charge. (Excluded: an epsilon below 1e-290, charged at that epsilon and then failing on an infinite scale;
    and propose-test-release's NoAnswerError, a DP outcome.) Found: subnormal kernel widths, x_bounds
    [-1e308, 1], 2^63 grid cells, weights whose squares overflow (targeted tests beside each fix)."""
    import copy

    from collabcausal.errors import NoAnswerError

    rng = np.random.default_rng(2026)
    frame = pd.DataFrame({"a": rng.uniform(size=N), "b": rng.uniform(size=N), "t": np.arange(N) % 2,
                          "y": rng.normal(size=N)})
    table = PartyTable.from_frame(frame, ["a", "b"], treatment="t", outcome="y")
    ledger = PrivacyLedger(tmp_path / "l.sqlite", epsilon=1e12, delta=0.5, dataset="d")
    party = Party("p", table, ledger=ledger, anchor_key=simulation_anchor_key(0))
    charged_and_failed = []
    for _ in range(n_requests):
        operation = list(REQUESTS)[rng.integers(len(REQUESTS))]
        params, arrays = copy.deepcopy(REQUESTS[operation])
        params = {"study": "s", "epsilon": 1.0, **params}
        if rng.random() < 0.8:
            params = _mutate(params, rng)
        else:
            params[KEYS[rng.integers(len(KEYS))]] = VALUES[rng.integers(len(VALUES))]
        if rng.random() < 0.3:
            arrays = {**arrays, ["arms", "weights", "rows"][rng.integers(3)]: ARRAYS[rng.integers(len(ARRAYS))]}
        if not isinstance(params, dict):
            continue
        before = len(ledger.history())
        try:
            party.handle(Message(operation, params, arrays))
        except NoAnswerError:
            continue
        except Exception as exc:
            eps = params.get("epsilon")
            tiny = isinstance(eps, float) and 0 < eps < 1e-290
            if len(ledger.history()) > before and not tiny:
                charged_and_failed.append((operation, params, type(exc).__name__, str(exc)[:80]))
    assert charged_and_failed == []
