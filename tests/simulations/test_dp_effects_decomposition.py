"""The decomposition instrument: the study's noise sds, and its noise-free pipeline is the study's."""

from __future__ import annotations

import numpy as np
import pytest

from collabcausal.simulations.cohort_design import COHORT_DESIGN, cohort_sites
from collabcausal.simulations.dp_effects_benchmark import STUDY, run_private, site_parties, study_spec
from collabcausal.simulations.dp_effects_decomposition import NoiseSources, decomposed_estimate, study_noise_sds

SITES = cohort_sites(4000, np.random.default_rng(3))


@pytest.mark.parametrize("secure", [True, False], ids=["secure", "plain"])
def test_noise_sds_are_the_ones_the_study_reports(tmp_path, secure):
    from collabcausal.analyst.dp_effects import dp_effects_results
    from collabcausal.protocol.inprocess import InProcessGrid

    spec = study_spec(COHORT_DESIGN, 2.0, secure_aggregation=secure)
    parties = site_parties(SITES, str(tmp_path), spec.epsilon, spec.delta)
    if secure:
        from collabcausal.party.secagg import attach_identities
        from collabcausal.secagg import simulation_identities

        attach_identities(parties, simulation_identities(STUDY, [p.name for p in parties]))
    report = dp_effects_results(InProcessGrid(parties), spec, STUDY, [p.name for p in parties])["dp_effects"]
    statistics_sd, score_sd = study_noise_sds(spec, len(SITES), max(len(s.T) for s in SITES))
    assert statistics_sd == pytest.approx(report["statistics_noise_sd"], rel=1e-12)
    assert score_sd == pytest.approx(report["scores_noise_sd"]["aipw_ate"], rel=1e-12)


def test_without_noise_the_instrument_computes_the_study_at_a_huge_epsilon():
    spec = study_spec(COHORT_DESIGN, 1e4)  # the largest epsilon the zCDP conversion takes: a nearly exact study
    exact = decomposed_estimate(SITES, spec, NoiseSources(statistics=False, scores=False), np.random.default_rng(0))
    # its score noise on the estimate has sd 6.5e-5 (0.26 over n = 4000): 1e-3 is 15 sds; the statistics (noise sd
    # 0.07 against Gram entries near 1000) move the models by far less
    assert run_private(SITES, spec).estimate == pytest.approx(exact, abs=1e-3)


def test_each_source_can_be_switched_off():
    spec, rng = study_spec(COHORT_DESIGN, 1.0), np.random.default_rng(0)
    quiet = NoiseSources(statistics=False, scores=False)
    assert decomposed_estimate(SITES, spec, quiet, rng) == decomposed_estimate(SITES, spec, quiet, rng)
    for noisy in (NoiseSources(statistics=True, scores=False), NoiseSources(statistics=False, scores=True)):
        assert decomposed_estimate(SITES, spec, noisy, rng) != decomposed_estimate(SITES, spec, noisy, rng)
    truth = decomposed_estimate(SITES, spec, NoiseSources(statistics=False, scores=False, propensity="true"), rng)
    assert truth != decomposed_estimate(SITES, spec, quiet, rng)
