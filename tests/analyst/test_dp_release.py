"""DC-QE on DP representations: unbiased surrogates, SIMEX against the noise, one charge per party."""

from __future__ import annotations

import numpy as np
import pytest

from collabcausal.analyst.dcqe import DCQEPlan, run_dcqe
from collabcausal.analyst.dp_release import DPRepresentationSpec, noisy_ipw, noisy_logistic, run_dp_dcqe, simex
from collabcausal.errors import InputError
from collabcausal.estimators.propensity import LogisticPropensity
from collabcausal.party.anchor import simulation_anchor_key
from collabcausal.party.ledger import PrivacyLedger
from collabcausal.protocol.inprocess import InProcessGrid
from collabcausal.simulations.datasets import load_lalonde
from collabcausal.simulations.partition import build_parties, partition_grid

BETA = np.array([-0.3, 1.0, -0.8])


def _logistic_data(n: int, seed: int):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2))
    t = (rng.random(n) < 1 / (1 + np.exp(-(BETA[0] + X @ BETA[1:])))).astype(float)
    return rng, X, t


def test_noisy_logistic_on_exact_labels_is_the_maximum_likelihood_fit():
    _, X, t = _logistic_data(3000, 0)
    model = LogisticPropensity().fit(X, t.astype(np.int8))
    e = model.predict_propensity(X)
    beta = noisy_logistic(X, t, ridge=0.0)
    np.testing.assert_allclose(1 / (1 + np.exp(-(beta[0] + X @ beta[1:]))), e, atol=1e-6)


def test_a_noisy_treatment_surrogate_leaves_the_logistic_fit_unbiased():
    # t* = t + N(0, 1): the score stays unbiased. n = 200,000: the slope's SE is about 0.012, so
    # 0.08 is more than 6 SEs (false-failure rate < 1e-9); seeded anyway.
    rng, X, t = _logistic_data(200_000, 1)
    beta = noisy_logistic(X, t + rng.normal(size=t.size))
    np.testing.assert_allclose(beta, BETA, atol=0.08)


def test_simex_removes_most_of_the_attenuation_of_a_noisy_covariate():
    rng, X, t = _logistic_data(20_000, 2)
    W = X + rng.normal(scale=0.8, size=X.shape)  # reliability 1 / 1.64: slopes shrink by ~40%
    factor = [np.eye(2) * 0.8]
    groups = np.zeros(len(t), dtype=np.int64)
    naive = noisy_logistic(W, t)[1]
    corrected, curve = simex(lambda Z: noisy_logistic(Z, t)[1], W, factor, groups, (0.5, 1.0, 1.5, 2.0), 20,
                             np.random.default_rng(3))
    assert naive < 0.75 * BETA[1]  # attenuated
    assert abs(corrected - BETA[1]) < 0.4 * abs(naive - BETA[1])  # at least 60% of the bias removed
    assert curve[0.0] == naive and curve[2.0] < curve[1.0] < naive  # more noise, more attenuation


def test_simex_moves_a_confounded_ipw_estimate_towards_the_truth():
    rng = np.random.default_rng(4)
    n = 20_000
    X = rng.normal(size=(n, 2))
    t = (rng.random(n) < 1 / (1 + np.exp(-X.sum(axis=1)))).astype(float)
    y = 1.0 * t + 2.0 * X.sum(axis=1) + rng.normal(size=n)  # true ATE 1
    W = X + rng.normal(scale=0.5, size=X.shape)
    assert abs(noisy_ipw(X, t, y, "ate") - 1.0) < 0.15  # without noise IPW is right
    naive = noisy_ipw(W, t, y, "ate")
    corrected, _ = simex(lambda Z: noisy_ipw(Z, t, y, "ate"), W, [np.eye(2) * 0.5], np.zeros(n, dtype=np.int64),
                         (0.5, 1.0, 1.5, 2.0), 10, np.random.default_rng(5))
    assert abs(corrected - 1.0) < 0.5 * abs(naive - 1.0)


@pytest.fixture(scope="module")
def lalonde_grid(tmp_path_factory):
    data = load_lalonde()
    part = partition_grid(data, 2, seed=0)
    folder = tmp_path_factory.mktemp("ledgers")
    parties = build_parties(data, part, anchor_key=simulation_anchor_key(0))
    for party in parties:
        party.ledger = PrivacyLedger(folder / f"{party.name}.sqlite", epsilon=1e9, delta=0.5, dataset=party.name)
    plan = DCQEPlan(row_groups=part.names(), anchor_ranges={k: list(v) for k, v in data.covariate_ranges().items()},
                    n_anchors=500, party_components=4, estimand="att", estimators=["ipw"], seed=0)
    return parties, plan


def test_at_negligible_noise_the_dp_pipeline_reproduces_plain_dcqe_ipw(lalonde_grid):
    # epsilon = 1e8 per party: sigma ~ 4e-5 in scaled units, an ATT error of order 1e-3 (measured
    # 0.01 at 1e6); the 0.05 tolerance is > 20 such errors. With full-rank data-independent maps,
    # X^ is an affine image of X, so plain DC-QE's IPW is the reference.
    parties, plan = lalonde_grid
    grid = InProcessGrid(parties)
    plain = run_dcqe(grid, plan).effects.estimates["ipw"].estimate
    spent = [p.ledger.spent()[0] for p in parties]
    result = run_dp_dcqe(grid, plan, DPRepresentationSpec(1e8, 1e-5, (0.0, 125.0)), n_boot=3)
    assert result.estimate.estimate == pytest.approx(plain, abs=0.05)
    assert result.naive == pytest.approx(plain, abs=0.05)
    assert result.estimate.se is not None and result.replicates.shape == (3,)
    # one charge per party, whatever the number of bootstrap replicates
    assert [p.ledger.spent()[0] - s for p, s in zip(parties, spent, strict=True)] == [1e8] * 4


def test_a_study_whose_outcome_noise_alone_swamps_any_effect_is_refused_before_any_charge(lalonde_grid):
    # LaLonde, n = 2675, outcome range 125: at eps = 1 sigma = 18.3, so the floor is
    # 125 * 18.3 / sqrt(2675) = 44 > 125 / 4: refused, and no party is charged.
    parties, plan = lalonde_grid
    spent = [p.ledger.spent() for p in parties]
    with pytest.raises(InputError, match="SE of at least 44"):
        run_dp_dcqe(InProcessGrid(parties), plan, DPRepresentationSpec(1.0, 1e-5, (0.0, 125.0)))
    assert [p.ledger.spent() for p in parties] == spent


def test_only_ipw_is_offered_on_dp_representations(lalonde_grid):
    parties, plan = lalonde_grid
    psm = DCQEPlan(**{**plan.__dict__, "estimators": ("psm", "ipw")})
    with pytest.raises(InputError, match="IPW estimator only"):
        run_dp_dcqe(InProcessGrid(parties), psm, DPRepresentationSpec(1.0, 1e-5, (0.0, 125.0)))


def test_a_dp_study_runs_over_mutual_tls_with_each_party_charging_its_own_ledger(lalonde_grid, tmp_path):
    from collabcausal.party.ledger import PrivacyLedger as Ledger
    from collabcausal.protocol.launcher import local_grpc_grid

    parties, plan = lalonde_grid
    spec = DPRepresentationSpec(1e8, 1e-5, (0.0, 125.0))
    with local_grpc_grid(parties, workdir=tmp_path, tls=True) as grid:
        result = run_dp_dcqe(grid, plan, spec, n_boot=0)
    plain = run_dcqe(InProcessGrid(parties), plan).effects.estimates["ipw"].estimate
    assert result.estimate.estimate == pytest.approx(plain, abs=0.05)  # tolerance: see the in-process test
    for party in parties:
        ledger = Ledger.from_file(tmp_path / party.name / "ledger.sqlite")
        assert [c.operation for c in ledger.history()] == ["dp_representation"]
