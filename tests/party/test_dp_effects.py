"""The party's dp_effects operations: validated before the charge, charged before computing, calibrated.

False-failure rates: the noise checks use epsilon = 1e4 (as zCDP: rho = zcdp_rho(1e4, 1e-6)), where the
noise sd per entry is below 1e-2 of the sensitivity; tolerances are 8 noise sds (two-sided tail 1e-15 per entry).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from collabcausal.errors import BudgetExceededError, InputError, PolicyError
from collabcausal.estimators.dp.effects.design import FeatureMap
from collabcausal.estimators.dp.effects.nuisances import NuisanceModel
from collabcausal.estimators.dp.effects.release import (
    party_score_sums,
    party_statistics,
    released_statistics,
    scaled_sums,
)
from collabcausal.estimators.dp.effects.scores import components, release_sensitivity, replicate_components
from collabcausal.estimators.dp.effects.statistics import statistics_sensitivity
from collabcausal.estimators.dp.zcdp import gaussian_zcdp_sigma, zcdp_epsilon, zcdp_rho
from collabcausal.ledger import PrivacyLedger
from collabcausal.messages import Message
from collabcausal.party import Party, PartyTable
from collabcausal.party.dp_effects import SCORES, STATISTICS
from collabcausal.party.policy import PartyPolicy

N = 200
COLUMNS = ["a", "b"]
FM = FeatureMap(((0.0, 10.0), (-1.0, 1.0)), (0.0, 5.0), n_sites=2)
RHO = zcdp_rho(1e4, 1e-6)


def _party(tmp_path, *, epsilon: float = 1e5, treated: int | None = None, policy: bool = False,
           outside: tuple[int, int] = (0, 0)) -> Party:
    """``outside``: how many of the first rows hold a ``b`` above its bound, and an outcome below its range."""
    rng = np.random.default_rng(9)
    t = rng.integers(0, 2, N) if treated is None else (np.arange(N) < treated).astype(int)
    frame = pd.DataFrame({"a": rng.uniform(0, 10, N), "b": rng.uniform(-1, 1, N), "t": t,
                          "y": rng.uniform(0, 5, N)})
    frame.loc[: outside[0] - 1, "b"] = 3.0
    frame.loc[: outside[1] - 1, "y"] = -1.0
    table = PartyTable.from_frame(frame, COLUMNS, treatment="t", outcome="y")
    ledger = PrivacyLedger(tmp_path / "ledger.sqlite", epsilon=epsilon, delta=1e-3)
    pol = PartyPolicy(["describe", STATISTICS, SCORES], COLUMNS) if policy else None
    return Party("p1", table, ledger=ledger, policy=pol)


def _request(op: str, eps: float = 1e4, **extra) -> Message:
    """A request whose release costs ``eps`` alone at delta 1e-6 (its zCDP rho is ``zcdp_rho(eps, 1e-6)``)."""
    params = {"study": "s", "rho": zcdp_rho(eps, 1e-6), "delta": 1e-6, "columns": COLUMNS, "design": FM.to_spec(),
              "site": 1, "n_folds": 1} | extra
    return Message(op, params)


MODEL = NuisanceModel(np.array([0.0, 0.1, 0.2, -0.3]), (np.array([0.0, 0.1, 0.0, 0.1]), np.array([0.1, 0.1, 0, 0])))
SCORE_PARAMS = {"models": [MODEL.to_spec()], "estimators": ["aipw", "ipw"], "estimands": ["ate", "att"], "trim": 0.1}


def test_statistics_are_the_exact_ones_plus_calibrated_noise(tmp_path):
    party = _party(tmp_path)
    reply = party.handle(_request(STATISTICS))
    sigma = gaussian_zcdp_sigma(statistics_sensitivity(FM), RHO)
    assert reply.params["sigma"] == pytest.approx(sigma)
    exact = party_statistics(party.table.covariates, party.table.treatment, party.table.outcome, FM, 1,
                             np.zeros(N, dtype=np.int64), 1)
    assert np.abs(reply.arrays["values"] - exact).max() < 8 * sigma
    assert party.ledger.spent() == (zcdp_epsilon(RHO, 1e-6), 1e-6)
    assert party.ledger.spent() == pytest.approx((1e4, 1e-6))
    (charge,) = party.ledger.history()
    assert charge.rho == RHO and reply.params["rho"] == RHO and reply.params["delta"] == 1e-6


def test_scores_are_the_exact_scaled_sums_plus_calibrated_noise(tmp_path):
    party = _party(tmp_path)
    reply = party.handle(_request(SCORES, **SCORE_PARAMS))
    parts = components(("aipw", "ipw"), ("ate", "att"), FM.outcome_width, 0.1)
    exact = scaled_sums(party_score_sums(party.table.covariates, party.table.treatment, party.table.outcome, FM, 1,
                                         np.zeros(N, dtype=np.int64), [MODEL], parts, 0.1), parts)
    sigma = gaussian_zcdp_sigma(release_sensitivity(parts), RHO)
    assert reply.params["sigma"] == pytest.approx(sigma)
    assert np.abs(reply.arrays["values"] - exact).max() < 8 * sigma


def test_scores_with_noise_replicates_carry_their_clipped_difference_sums(tmp_path):
    party = _party(tmp_path)
    moved = NuisanceModel(MODEL.propensity_coef + 0.2, (MODEL.outcome_coef[0], MODEL.outcome_coef[1] - 0.1))
    reply = party.handle(_request(SCORES, **SCORE_PARAMS, replicates=[[moved.to_spec()], [MODEL.to_spec()]]))
    base = components(("aipw", "ipw"), ("ate", "att"), FM.outcome_width, 0.1)
    parts = base + replicate_components(base, 2)
    exact = scaled_sums(party_score_sums(party.table.covariates, party.table.treatment, party.table.outcome, FM, 1,
                                         np.zeros(N, dtype=np.int64), [MODEL], parts, 0.1, [[moved], [MODEL]]), parts)
    sigma = gaussian_zcdp_sigma(release_sensitivity(parts), RHO)
    assert reply.params["sigma"] == pytest.approx(sigma) and len(reply.arrays["values"]) == len(parts)
    assert np.abs(reply.arrays["values"] - exact).max() < 8 * sigma
    copy0 = [j for j, c in enumerate(parts) if c.copy == 0]
    assert np.abs(exact[copy0]).max() > 100 * sigma  # the moved models move the scores


@pytest.mark.parametrize(("change", "error", "match"), [
    ({"trim": None}, InputError, "trim"),
    ({"trim": 0.7}, InputError, "trimming"),
    ({"models": []}, InputError, "one nuisance model per fold"),
    ({"models": [{"propensity": [1.0]}]}, InputError, "propensity"),
    ({"estimators": ["tmle"]}, InputError, "estimators"),
    ({"design": {"bounds": [[0, 1]], "outcome_range": [0, 1], "n_sites": 2}}, InputError, "ranges"),
    ({"site": 5}, InputError, "site"),
    ({"n_folds": 0}, InputError, "n_folds"),
    ({"delta": 0.5}, InputError, "delta"),
    ({"delta": 0.0}, InputError, "delta"),
    ({"rho": 0.0}, InputError, "rho"),
    ({"rho": -0.5}, InputError, "rho"),
    ({"rho": float("nan")}, InputError, "rho"),
    ({"columns": ["a", "zzz"]}, InputError, "zzz"),
    ({"replicates": "many"}, InputError, "replicates"),
    ({"replicates": [[]]}, InputError, "replicates"),
    ({"replicates": [[MODEL.to_spec()]] * 33}, InputError, "at most 32"),
    ({"replicates": [[{"propensity": [1.0]}]]}, InputError, "propensity"),
])
def test_a_malformed_request_is_refused_uncharged(tmp_path, change, error, match):
    party = _party(tmp_path)
    params = SCORE_PARAMS | change
    with pytest.raises(error, match=match):
        party.handle(_request(SCORES, **{k: v for k, v in params.items() if v is not None}))
    assert party.ledger.spent() == (0.0, 0.0)


@pytest.mark.parametrize("op", [STATISTICS, SCORES])
def test_a_request_stating_epsilon_instead_of_rho_is_refused_uncharged(tmp_path, op):
    """dp_effects releases are charged in zCDP: an epsilon is a parameter they do not apply, and the refusal names
    rho among those they do."""
    party = _party(tmp_path)
    request = _request(op, **(SCORE_PARAMS if op == SCORES else {}))
    old = {k: v for k, v in request.params.items() if k != "rho"} | {"epsilon": 1.0}
    with pytest.raises(InputError, match=r"does not apply: epsilon; fix: send only .*\brho\b"):
        party.handle(Message(op, old))
    assert party.ledger.spent() == (0.0, 0.0) and party.ledger.history() == []


def test_an_arm_below_min_subjects_is_refused_uncharged(tmp_path):
    party = _party(tmp_path, treated=3)
    with pytest.raises(PolicyError, match="fewer than 10 treated"):
        party.handle(_request(STATISTICS))
    assert party.ledger.spent() == (0.0, 0.0)


def test_over_budget_is_refused_uncharged_and_a_policy_must_list_the_operation(tmp_path):
    party = _party(tmp_path, epsilon=1.0)
    with pytest.raises(BudgetExceededError):
        party.handle(_request(STATISTICS, eps=2.0))
    assert party.ledger.spent() == (0.0, 0.0)
    (tmp_path / "listed").mkdir()
    restricted = _party(tmp_path / "listed", policy=True)
    restricted.handle(_request(STATISTICS))
    restricted.policy = type(restricted.policy)(["describe"], COLUMNS)
    with pytest.raises(PolicyError, match="does not allow the operation"):
        restricted.handle(_request(STATISTICS))


def test_the_charge_comes_before_the_table_is_read(tmp_path, monkeypatch):
    party = _party(tmp_path)
    seen = []
    original = party.ledger.charge_zcdp

    def spy(*args, **kwargs):
        seen.append("charge")
        return original(*args, **kwargs)

    import collabcausal.party.dp_effects as module

    real = module.released_statistics
    monkeypatch.setattr(party.ledger, "charge_zcdp", spy)
    monkeypatch.setattr(module, "released_statistics", lambda *a, **k: seen.append("compute") or real(*a, **k))
    party.handle(_request(STATISTICS))
    assert seen == ["charge", "compute"]


def test_a_party_without_labels_is_refused(tmp_path):
    party = _party(tmp_path)
    party.table = PartyTable.from_frame(pd.DataFrame({"a": np.arange(N) % 7, "b": np.arange(N) % 3 - 1.0}), COLUMNS)
    with pytest.raises(InputError, match="no treatment and outcome"):
        party.handle(_request(STATISTICS))
    assert party.ledger.spent() == (0.0, 0.0)


def test_a_cross_weight_weights_b_and_is_calibrated_for(tmp_path):
    party = _party(tmp_path)
    reply = party.handle(_request(STATISTICS, cross_weight=2.0))
    sensitivity = statistics_sensitivity(FM, 2.0)
    assert reply.params["sensitivity"] == pytest.approx(sensitivity) and sensitivity > statistics_sensitivity(FM)
    sigma = gaussian_zcdp_sigma(sensitivity, RHO)
    exact = released_statistics(party.table.covariates, party.table.treatment, party.table.outcome, FM, 1,
                                np.zeros(N, dtype=np.int64), 1, 2.0)
    unweighted = party_statistics(party.table.covariates, party.table.treatment, party.table.outcome, FM, 1,
                                  np.zeros(N, dtype=np.int64), 1)
    assert np.abs(reply.arrays["values"] - exact).max() < 8 * sigma
    np.testing.assert_allclose(exact[0, -2 * FM.dim:], 2.0 * unweighted[0, -2 * FM.dim:])  # b_0, b_1 doubled
    np.testing.assert_allclose(exact[0, : -2 * FM.dim], unweighted[0, : -2 * FM.dim])  # the Gram triangles not
    assert party.ledger.history()[0].details["cross_weight"] == 2.0


@pytest.mark.parametrize("weight", [float("nan"), float("inf"), -2.0, 0.0, 0.1, 8.5, True, "2", [2.0], 10**400])
def test_a_hostile_cross_weight_is_refused_before_any_charge(tmp_path, weight):
    party = _party(tmp_path)
    with pytest.raises(InputError, match="cross_weight"):
        party.handle(_request(STATISTICS, cross_weight=weight))
    assert party.ledger.history() == []


def test_cross_fitting_folds_are_fixed_across_requests(tmp_path):
    party = _party(tmp_path)
    first = party.handle(_request(STATISTICS, n_folds=3)).arrays["values"]
    second = party.handle(_request(STATISTICS, n_folds=3)).arrays["values"]
    sigma = gaussian_zcdp_sigma(statistics_sensitivity(FM), RHO)
    assert first.shape == (3, second.shape[1]) and np.abs(first - second).max() < 12 * sigma


@pytest.mark.parametrize("op", [STATISTICS, SCORES])
def test_a_release_reads_the_rows_once_and_logs_what_it_clipped(tmp_path, monkeypatch, caplog, op):
    """Issue 38 perf item: the clip counts come from the release's own pass over the rows."""
    party = _party(tmp_path, outside=(7, 3))
    passes = []
    reduce_rows = PartyTable.reduce_rows
    monkeypatch.setattr(PartyTable, "reduce_rows", lambda self, *a: passes.append(1) or reduce_rows(self, *a))
    extra = SCORE_PARAMS if op == SCORES else {}
    with caplog.at_level("WARNING", logger="collabcausal.party"):
        reply = party.handle(_request(op, **extra))
    assert len(passes) == 1
    (line,) = [r.getMessage() for r in caplog.records if "values clipped" in r.getMessage()]
    assert line.endswith(f"b 7 of {N}, outcome 3 of {N}") and "a " not in line.split(": ", 2)[-1]
    assert "outside" not in reply.params and set(reply.arrays) == {"values"}  # the counts are not sent
