"""The size check of dp_effects: public quantities only, the study's own noise, a refusal before any charge.

Seeded data; the studies run with OpenDP noise, but every assertion is about noise scales, charges and
refusals, which do not depend on the draws.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from collabcausal.analyst.dp_effects import DPEffectsSpec, dp_effects_results
from collabcausal.analyst.dp_effects_feasibility import (
    CAVEAT_RIDGE_SHARE,
    MAX_RIDGE_SHARE,
    check_study_size,
    interval_caveat,
    ridge_share,
    statistics_noise_sd,
)
from collabcausal.errors import ConfigError
from collabcausal.protocol.inprocess import InProcessGrid
from collabcausal.secagg import simulation_identities
from collabcausal.simulations.cohort_design import COHORT_DESIGN, cohort_sites
from collabcausal.simulations.dp_effects_benchmark import site_parties, study_spec


def _spec(epsilon: float, **changes) -> DPEffectsSpec:
    return study_spec(COHORT_DESIGN, epsilon, **changes)


def _parties(tmp_path, sites, spec: DPEffectsSpec):
    parties = site_parties(sites, str(tmp_path), spec.epsilon, spec.delta)
    if spec.secure_aggregation:
        from collabcausal.party.secagg import attach_identities

        attach_identities(parties, simulation_identities("s", [p.name for p in parties]))
    return parties


@pytest.mark.parametrize(("changes", "n_sites"), [
    ({"secure_aggregation": True}, 4), ({"secure_aggregation": False}, 4), ({"nuisance": "site"}, 3),
    ({"n_folds": 2, "secure_aggregation": False}, 2),
], ids=["secure", "plain", "site nuisances", "two folds"])
def test_the_noise_sd_the_check_uses_is_the_one_the_study_draws(tmp_path, changes, n_sites):
    spec = _spec(20.0, **changes)
    sites = cohort_sites(400 * n_sites, np.random.default_rng(1), n_sites)
    report = dp_effects_results(InProcessGrid(_parties(tmp_path, sites, spec)), spec, "s",
                                [f"site{i}" for i in range(n_sites)])
    n_subjects = report["dp_effects"]["n_subjects"]
    drawn = report["dp_effects"]["statistics_noise_sd"]
    if spec.nuisance == "site":  # the report states the summed noise; a site model sees its party's own
        drawn /= math.sqrt(n_sites)
    folds = spec.n_folds
    assert statistics_noise_sd(spec, n_subjects) == pytest.approx(drawn * math.sqrt(max(folds - 1, 1)), rel=1e-12)


def test_the_cohort_at_eps_1_is_refused_naming_an_epsilon_and_a_size_that_pass():
    spec, n_subjects = _spec(1.0), {f"p{i}": 150 for i in range(4)}
    share = ridge_share(spec, n_subjects)
    assert share > MAX_RIDGE_SHARE
    with pytest.raises(ConfigError, match=rf"ridge is {share:.2f} of the smallest party's 150 subjects") as refused:
        check_study_size(spec, n_subjects)
    fix = refused.value.fix
    epsilon = float(fix.split("epsilon to ")[1].split(" ")[0])
    per_party = int(fix.split("every party ")[1].split(" ")[0])
    check_study_size(replace(spec, epsilon=epsilon), n_subjects)  # the named epsilon passes ...
    with pytest.raises(ConfigError):
        check_study_size(replace(spec, epsilon=epsilon * 0.99), n_subjects)  # ... and is the smallest (to 1%)
    check_study_size(spec, {p: per_party for p in n_subjects})
    with pytest.raises(ConfigError):
        check_study_size(spec, {p: math.floor(per_party * 0.99) for p in n_subjects})
    assert f"n >= {4 * per_party} over 4 parties" in fix


def test_the_smallest_party_decides_and_more_noise_or_folds_raise_the_share():
    spec = _spec(1.0)
    even, uneven = {f"p{i}": 500 for i in range(4)}, {"p0": 200} | {f"p{i}": 600 for i in range(1, 4)}
    assert ridge_share(spec, uneven) > ridge_share(spec, even)
    assert ridge_share(replace(spec, secure_aggregation=False), even) > ridge_share(spec, even)
    assert ridge_share(replace(spec, n_folds=2, secure_aggregation=False), even) > ridge_share(
        replace(spec, secure_aggregation=False), even)


def test_a_refused_study_charges_no_party_and_sends_nothing_but_describe(tmp_path):
    spec = _spec(1.0)
    parties = _parties(tmp_path, cohort_sites(600, np.random.default_rng(0)), spec)
    seen: list[str] = []
    for party in parties:
        handle = party.handle
        party.handle = lambda message, handle=handle: seen.append(message.operation) or handle(message)
    with pytest.raises(ConfigError, match="too small a study"):
        dp_effects_results(InProcessGrid(parties), spec, "s", [p.name for p in parties])
    assert set(seen) == {"describe"}
    assert all(p.ledger.spent() == (0.0, 0.0) for p in parties)


def test_the_report_and_its_page_say_the_dp_noise_is_not_seeded(tmp_path):
    from collabcausal.reporting.document import study_document
    from collabcausal.reporting.html import render_html

    spec = _spec(20.0)
    parties = _parties(tmp_path, cohort_sites(1600, np.random.default_rng(2)), spec)
    report = dp_effects_results(InProcessGrid(parties), spec, "s", [p.name for p in parties])
    assert any("seed 0 seeds only" in w and "the DP noise is not seeded" in w for w in report["notes"])
    assert not any("may be short" in w for w in report["warnings"])  # eps 20: the ridge share is below 0.1
    page = render_html(study_document(report | {"study": "s", "seed": 0, "kind": "dp_effects"}, {}, seed=0))
    assert "seed 0 (the DP noise is not seeded: every run differs)" in page


def test_between_the_caveat_and_the_refusal_the_caveat_names_an_epsilon_and_a_size_that_bring_the_share_to_0_1():
    spec, n_subjects = _spec(1.0), {f"p{i}": 500 for i in range(4)}  # cohort, 2,000 subjects: share 0.30
    share = ridge_share(spec, n_subjects)
    assert CAVEAT_RIDGE_SHARE < share <= MAX_RIDGE_SHARE
    check_study_size(spec, n_subjects)  # accepted ...
    caveat = interval_caveat(spec, n_subjects)  # ... with a warning
    assert caveat is not None and caveat.startswith(f"the interval may be short: the nuisance ridge is {share:.2f}")
    epsilon = float(caveat.split("epsilon to ")[1].split(" ")[0])
    per_party = int(caveat.split("every party ")[1].split(" ")[0])
    assert ridge_share(replace(spec, epsilon=epsilon), n_subjects) <= CAVEAT_RIDGE_SHARE
    assert ridge_share(replace(spec, epsilon=epsilon * 0.99), n_subjects) > CAVEAT_RIDGE_SHARE
    assert interval_caveat(spec, {p: per_party for p in n_subjects}) is None
    assert ridge_share(spec, {p: math.floor(per_party * 0.99) for p in n_subjects}) > CAVEAT_RIDGE_SHARE


def test_the_report_warns_that_the_interval_may_be_short_above_the_caveat_share(tmp_path):
    spec = _spec(1.0)
    parties = _parties(tmp_path, cohort_sites(2000, np.random.default_rng(3)), spec)
    report = dp_effects_results(InProcessGrid(parties), spec, "s", [p.name for p in parties])
    assert [w for w in report["warnings"] if "may be short" in w] == [
        interval_caveat(spec, report["dp_effects"]["n_subjects"])]
