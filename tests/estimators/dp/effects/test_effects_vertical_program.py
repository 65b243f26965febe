"""The vertical score program: a party re-derives every bound from the model and limits it is sent, and refuses
malformed programs before any charge."""

from __future__ import annotations

import json

import numpy as np
import pytest

from collabcausal.errors import InputError
from collabcausal.estimators.dp.effects.design import FeatureMap
from collabcausal.estimators.dp.effects.statistics import fold_statistics
from collabcausal.estimators.dp.effects.vertical import ColumnGroups, entry_parties, group_design, released_variance
from collabcausal.estimators.dp.effects.vertical_program import (
    CHANGE_KEYS,
    LIMITS_KEYS,
    PROGRAM_KEYS,
    ScoreProgram,
    noise_share,
    program_from_statistics,
    score_inputs,
    statistics_sigma,
)

GROUPS = ColumnGroups(((0, 1), (2, 3)))
FM = FeatureMap(((-2.0, 2.0),) * 4, (0.0, 1.0), 1)


@pytest.fixture(scope="module")
def program() -> ScoreProgram:
    rng = np.random.default_rng(7)
    n = 4000
    X = np.clip(rng.standard_normal((n, 4)), -2, 2)
    T = (rng.random(n) < 1 / (1 + np.exp(-X @ np.array([0.6, -0.4, 0.5, 0.3])))).astype(np.int8)
    Y = (rng.random(n) < 0.4 + 0.1 * T).astype(float)
    D = FM.design(X, 0)
    stats = fold_statistics(D, T, FM.centred_outcome(Y), FM.outcome_width)
    sd = statistics_sigma(FM, 0.05, GROUPS) * np.sqrt(released_variance(entry_parties(GROUPS, 1)))
    noisy = stats + rng.normal(0, sd)
    return program_from_statistics(noisy, sd, FM, GROUPS, trim=0.1, ridge_scale=0.25, n_replicates=3,
                                   rng=np.random.default_rng(0))


def test_a_program_survives_json_and_every_party_derives_the_same_bounds(program) -> None:
    """What the coordinator sends is model, limits, changes and trim; the polynomial, ranges and unit a party
    recomputes from them are the coordinator's, to the bit."""
    received = ScoreProgram.from_spec(json.loads(json.dumps(program.to_spec())), FM, GROUPS)
    assert received.parts == program.parts and received.unit == program.unit
    assert received.poly.coefficients == program.poly.coefficients
    assert len(program.parts) == 2 + 3


def test_each_groups_inputs_lie_in_the_unit_interval(program) -> None:
    """Clipped and scaled parts are in [-1, 1]: what the key owner encrypts (its encryption refuses beyond)."""
    X = np.random.default_rng(1).uniform(-2, 2, (500, 4))
    for g in (0, 1):
        inputs = score_inputs(program, group_design(FM, X[:, list(GROUPS.groups[g])], 0, GROUPS, g), g, GROUPS, FM)
        assert len(inputs) == 3 * 4 and max(float(np.max(np.abs(v))) for v in inputs) <= 1.0


@pytest.mark.parametrize("mutate", [
    lambda s: s | {"limits": {"low": [[0.0, 0.0]] * 3, "high": [[1.0, 1.0]] * 2}},
    lambda s: s | {"limits": {"low": [[1.0, 1.0]] * 3, "high": [[0.0, 0.0]] * 3}},
    lambda s: s | {"limits": {"low": [[float("inf"), 0.0]] * 3, "high": [[1.0, 1.0]] * 3}},
    lambda s: s | {"changes": [{"model": s["model"], "limits": s["limits"]}] * 33},
    lambda s: s | {"changes": ["x"]},
    lambda s: s | {"trim": True},
    lambda s: s | {"trim": 0.7},
    lambda s: {k: v for k, v in s.items() if k != "changes"},
    lambda s: s | {"model": {"propensity": [1.0]}},
])
def test_a_malformed_program_is_refused(program, mutate) -> None:
    with pytest.raises(InputError):
        ScoreProgram.from_spec(mutate(program.to_spec()), FM, GROUPS)


def test_a_replicate_equal_to_the_model_is_refused(program) -> None:
    """A change of zero has a zero bound: refused, not released with an infinite weight."""
    spec = program.to_spec()
    zero = {k: [0.0] * len(v) for k, v in spec["model"].items()}
    none = {"low": [[0.0, 0.0]] * 3, "high": [[0.0, 0.0]] * 3}
    with pytest.raises(InputError, match="positive and finite"):
        ScoreProgram.from_spec(spec | {"changes": [{"model": zero, "limits": none}]}, FM, GROUPS)


def test_the_accepted_keys_are_what_to_spec_emits(program) -> None:
    spec = program.to_spec()
    assert set(spec) == PROGRAM_KEYS and spec["changes"]
    assert all(set(c) == CHANGE_KEYS and set(c["limits"]) == LIMITS_KEYS for c in spec["changes"])
    assert set(spec["limits"]) == LIMITS_KEYS


@pytest.mark.parametrize(("where", "key", "what", "accepted"), [
    ("program", "sigma", "vertical score program", "changes, limits, model, trim"),
    ("change", "weight", "vertical score program replicate", "limits, model"),
    ("limits", "margin", "vertical score program clip limits", "high, low"),
    ("change limits", "margin", "vertical score program clip limits", "high, low"),
    ("model", "ridge", "dp_effects nuisance model", "outcome_0, outcome_1, propensity"),
])
def test_a_program_key_the_party_does_not_apply_is_refused_by_name_at_every_level(program, where, key, what,
                                                                                   accepted) -> None:
    """A stated ``sigma`` (each party recomputes its own), a newer coordinator's option in a replicate, its limits or
    its model: refused in one line naming it, where it used to be left aside."""
    spec = json.loads(json.dumps(program.to_spec()))
    target = {"program": spec, "change": spec["changes"][0], "limits": spec["limits"],
              "change limits": spec["changes"][-1]["limits"], "model": spec["changes"][0]["model"]}[where]
    target[key] = 0.0
    with pytest.raises(InputError, match=f"^{what} option '{key}' is not one this party applies \\({accepted}\\)"):
        ScoreProgram.from_spec(spec, FM, GROUPS)
    del target[key]
    assert ScoreProgram.from_spec(spec, FM, GROUPS).to_spec() == program.to_spec()


def test_noise_shares_are_calibrated_per_entry() -> None:
    """Entries computed by one or two parties each get sd sigma (share_variance 1), seeded only when asked."""
    k = np.array([1] * 20_000 + [2] * 20_000)
    draws = noise_share(k, 3.0, np.random.default_rng(5))
    assert draws[:20_000].std() == pytest.approx(3.0, rel=0.03) and draws[20_000:].std() == pytest.approx(3.0, rel=0.03)
