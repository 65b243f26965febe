"""DC-QE on DP representations: unbiased surrogates, SIMEX against the noise, one charge per party."""

from __future__ import annotations

import numpy as np
import pytest

from collabcausal.analyst.dcqe import DCQEPlan, run_dcqe
from collabcausal.analyst.dp_release import (
    DPRepresentationSpec,
    estimate_release,
    noisy_ipw,
    noisy_logistic,
    request_release,
    run_dp_dcqe,
    simex,
)
from collabcausal.anchor_key import simulation_anchor_key
from collabcausal.errors import InputError
from collabcausal.estimators.propensity import LogisticPropensity
from collabcausal.ledger import PrivacyLedger
from collabcausal.messages import Message
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
    # epsilon = 1e8 per party: sigma ~ 4e-5 in scaled units. The OpenDP noise is unseeded: over 300 runs of
    # this release (n_boot = 0) the difference from plain DC-QE's IPW had mean 0.0155 (SIMEX) / 0.0197 (naive),
    # sd 0.0057, skew 0.25 and maximum 0.039, so the 0.05 tolerance is 5.3 sds above the naive mean (normal
    # tail 5e-8; with that skew below 1e-5) and 12 below it. With full-rank data-independent maps, X^ is an
    # affine image of X, so plain DC-QE's IPW is the reference.
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


def test_only_the_label_holders_are_sent_the_outcome_range(lalonde_grid):
    """Only a label holder's release applies the outcome range, so only its request carries one (another party's
    would accept the key and leave it unused)."""
    parties, plan = lalonde_grid
    sent: dict[str, Message] = {}

    class Recording(InProcessGrid):
        def send_and_receive(self, requests, *, timeout=None):
            sent.update((p, m) for p, m in requests.items() if m.operation == "dp_representation")
            return super().send_and_receive(requests, timeout=timeout)

    request_release(Recording(parties), plan, DPRepresentationSpec(1e8, 1e-5, (0.0, 125.0)))
    assert sorted(p for p, m in sent.items() if "outcome_range" in m.params) == sorted(plan.label_holders)
    assert len(sent) == 4 and all(m.params["labels"] == ("outcome_range" in m.params) for m in sent.values())


def test_given_a_release_the_analyst_side_is_a_function_of_the_study_seed(lalonde_grid):
    parties, plan = lalonde_grid
    spec = DPRepresentationSpec(1e8, 1e-5, (0.0, 125.0))
    release = request_release(InProcessGrid(parties), plan, spec)
    first, again = (estimate_release(release, plan, spec, n_boot=3) for _ in range(2))
    assert first.estimate.estimate == again.estimate.estimate
    np.testing.assert_array_equal(first.replicates, again.replicates)


def test_a_dp_study_runs_over_mutual_tls_with_each_party_charging_its_own_ledger(lalonde_grid, tmp_path):
    from collabcausal.ledger import PrivacyLedger as Ledger
    from collabcausal.protocol.launcher import local_grpc_grid

    parties, plan = lalonde_grid
    spec = DPRepresentationSpec(1e8, 1e-5, (0.0, 125.0))
    with local_grpc_grid(parties, workdir=tmp_path, tls=True, study=plan.study) as grid:
        result = run_dp_dcqe(grid, plan, spec, n_boot=0)
    plain = run_dcqe(InProcessGrid(parties), plan).effects.estimates["ipw"].estimate
    assert result.estimate.estimate == pytest.approx(plain, abs=0.05)  # tolerance: see the in-process test
    for party in parties:
        ledger = Ledger.from_file(tmp_path / party.name / "ledger.sqlite")
        assert [c.operation for c in ledger.history()] == ["dp_representation"]


def _dp_study_toml(folder, plan, extra: str = "", dp: str = "epsilon = 1e8\ndelta = 1e-5\noutcome_range = [0, 125]"):
    ranges = "\n".join(f"{k} = [{float(lo)!r}, {float(hi)!r}]" for k, (lo, hi) in plan.anchor_ranges.items())
    groups = "\n".join(f"[[row_groups]]\nparties = {list(g)!r}".replace("'", '"') for g in plan.row_groups)
    path = folder / "study.toml"
    path.write_text(
        f'[study]\nid = "{plan.study}"\nseed = 0\nestimand = "att"\nn_anchors = 500\nparty_components = 4\n'
        f"bootstrap = 4\n{extra}\n[server]\naddress = \"127.0.0.1:0\"\ninsecure = true\n"
        f"[anchor_ranges]\n{ranges}\n{groups}\n[dp_representation]\n{dp}\n"
    )
    return path


def test_a_served_dp_study_gives_over_grpc_the_numbers_it_gives_in_process(lalonde_grid, tmp_path):
    """study.toml's [dp_representation]: `analyst serve`'s run_study asks one release per party and
    reports SIMEX-corrected IPW with its bootstrap interval and each party's spend, over mutual TLS as
    in process. The parties' noise comes from OS entropy (OpenDP), never from the study seed, so the
    two runs agree to the noise's size, not bit for bit; given a release the analyst is deterministic."""
    from collabcausal.analyst.config import load_study_config
    from collabcausal.commands.analyst import format_estimate, run_study
    from collabcausal.protocol.launcher import local_grpc_grid

    parties, plan = lalonde_grid
    config = load_study_config(_dp_study_toml(tmp_path, plan))
    assert config.plan().estimators == ("ipw",) and config.dp.epsilon == 1e8
    local = run_study(InProcessGrid(parties), config)
    with local_grpc_grid(parties, workdir=tmp_path / "grpc", tls=True, study=config.study) as grid:
        served = run_study(grid, config)
    row = served["estimates"]["ipw"]
    plain = run_dcqe(InProcessGrid(parties), plan).effects.estimates["ipw"].estimate
    for report in (local, served):  # tolerance: see the first in-process test
        assert report["estimates"]["ipw"]["estimate"] == pytest.approx(plain, abs=0.05)
    assert row["method"] == "ipw-simex" and row["n_boot"] == 4 and row["ci_low"] <= row["ci_high"]
    assert served["privacy"] == {p.name: {"epsilon": 1e8, "delta": 1e-5} for p in parties}
    assert "smd" not in served and any("SIMEX" in w for w in served["warnings"])
    assert "percentile CI" in format_estimate(row)


@pytest.mark.parametrize(
    ("extra", "dp", "problem"),
    [
        ('estimators = ["psm", "ipw"]', None, 'estimators = \\["ipw"\\] only'),
        ('interval = "bca"', None, 'interval = "percentile" only'),
        ("", "epsilon = 1.0\ndelta = 1e-5\noutcome_range = [0, 125]\nclip = 2.0", "clip_norm"),
        ("", "epsilon = 1.0\ndelta = 0.0\noutcome_range = [0, 125]", "delta"),
        ("", "epsilon = 1.0\ndelta = 1e-5\noutcome_range = [125, 0]", "low < high"),
    ],
)
def test_a_dp_study_toml_is_refused_at_load_with_the_fix(lalonde_grid, tmp_path, extra, dp, problem):
    from collabcausal.analyst.config import load_study_config
    from collabcausal.errors import ConfigError

    _, plan = lalonde_grid
    kwargs = {} if dp is None else {"dp": dp}
    with pytest.raises(ConfigError, match=problem):
        load_study_config(_dp_study_toml(tmp_path, plan, extra, **kwargs))


def test_a_dp_study_needs_integer_components(lalonde_grid, tmp_path):
    from collabcausal.analyst.config import load_study_config
    from collabcausal.errors import ConfigError

    _, plan = lalonde_grid
    path = _dp_study_toml(tmp_path, plan)
    path.write_text(path.read_text().replace("party_components = 4", "party_components = 0.9"))
    with pytest.raises(ConfigError, match="integer party_components"):
        load_study_config(path)
