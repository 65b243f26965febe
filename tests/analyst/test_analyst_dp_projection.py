"""dp_effects with modifiers and subgroups at the coordinator: the report's ``cate`` section and the refusals.

Seeded data (continuous outcome: the design's effect is additive, so the CATE is constant and every
slope is 0); the noise comes from OpenDP. At epsilon = 1e4 a 5-SE check fails by chance with
probability below 1e-6 per coefficient.
"""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

from collabcausal.analyst.dp_effects import DPEffectsSpec, dp_effects_results
from collabcausal.errors import InputError
from collabcausal.ledger import PrivacyLedger
from collabcausal.party.secagg import attach_identities
from collabcausal.protocol.inprocess import InProcessGrid
from collabcausal.secagg import simulation_identities
from collabcausal.simulations.dp_effects_benchmark import site_parties
from collabcausal.simulations.multisite import OUTCOME_RANGE, covariate_bounds, simulate_sites

SITES = simulate_sites(3000, "continuous", np.random.default_rng(5))
COLUMNS = tuple(f"x{j}" for j in range(10))
SPEC = DPEffectsSpec(epsilon=1e4, delta=1e-6, outcome_range=OUTCOME_RANGE["continuous"], trim=0.1, columns=COLUMNS,
                     bounds=tuple(covariate_bounds()), modifiers=("x0", "x8"),
                     subgroups=(("x9", (0.0, 0.5, 1.0)),), simultaneous="bonferroni")


def _run(tmp_path, spec: DPEffectsSpec) -> dict:
    parties = site_parties(SITES, str(tmp_path), spec.epsilon, spec.delta)
    attach_identities(parties, simulation_identities("s", [p.name for p in parties]))
    return dp_effects_results(InProcessGrid(parties), spec, "s", [p.name for p in parties])


@pytest.mark.parametrize(("clip", "shaping"), [
    (None, {}), (2.0, {}), (2.0, {"projection_allocation": "equal", "modifier_clip": None, "gram_weight": None}),
    (None, {"projection_centre": 0.5}), (None, {"residual_clip": 0.25}), (2.0, {"clip_compensation": 0.1}),
])
def test_the_report_gives_the_projection_and_subgroups_with_intervals_in_strict_json(tmp_path, clip, shaping):
    report = _run(tmp_path, replace(SPEC, projection_clip=clip, **shaping))
    cate = json.loads(json.dumps(report["effect_modification"], allow_nan=False))
    ate = report["estimates"]["aipw-ate"]
    names = [c["name"] for c in cate["coefficients"]]
    assert names == ["intercept", "x0", "x8"]
    for c in cate["coefficients"][1:]:
        assert abs(c["estimate"]) < 5 * c["se"]  # the true CATE is constant
        assert c["ci_low"] < c["estimate"] < c["ci_high"]
    assert [s["subgroup"] for s in cate["subgroups"]] == ["x9 in [0, 0.5)", "x9 in [0.5, 1]"]
    for s in cate["subgroups"]:
        assert s["alpha"] == pytest.approx(0.05 / 2)
        assert abs(s["estimate"] - ate["estimate"]) < 5 * (s["se"] + ate["se"])
    assert cate["noise_growth"] > 1.0
    sums = cate["allocation"]["sums"]
    weights = np.array([s["weight"] for s in sums.values()])
    centre, rho = shaping.get("projection_centre"), shaping.get("residual_clip")
    assert list(sums) == (["blp_0"] if clip or centre or rho else []) + ["blp_1", "blp_2"]
    assert cate["allocation"]["residual_clip"] == rho
    beta = shaping.get("clip_compensation")
    assert cate["allocation"]["clip_compensation"] == beta
    if beta is not None:  # the clipped point sums' ranges widen by beta R: a = 2 R, R = 12
        assert sums["blp_0"]["bound"] == pytest.approx((2.0 + beta) * 12.0)
    if rho is not None:  # R + rho / t, R = 12, t = 0.1: the intercept's own sum at the residual-clipped score's bound
        assert sums["blp_0"]["bound"] == pytest.approx(12.0 + rho * 12.0 / 0.1)
    assert np.sum(weights**2) == pytest.approx(weights.size)  # the point sums' budget is shared out, not grown
    if shaping.get("projection_allocation") == "equal":
        assert np.all(weights == 1.0)
    else:  # x0 (a standard normal on [-3.5, 3.5]) has 12x the slope's noise amplification of binary x8
        assert sums["blp_1"]["weight"] > 1.5 * sums["blp_2"]["weight"]
    back = (beta or 0.0) * 12.0  # the loss added back widens both sums' bounds by as much
    bound = (sums["blp_1"]["bound"] - back) / (sums["blp_2"]["bound"] - back)
    assert bound == (1.0 if "modifier_clip" in shaping else pytest.approx(2 / 3.5, rel=0.05))  # k rms(z0) = 2 / 3.5
    assert cate["allocation"]["gram_weight"] == shaping.get("gram_weight", 0.25)
    pilot = cate["allocation"]["pilot"]
    assert (pilot is None) == (centre is None)
    if centre is not None:  # the centred sums' bound is the centre's; the pilot, the models' effect, has no slope here
        assert sums["blp_0"]["bound"] == pytest.approx(centre * 12.0)
        assert abs(pilot[0] - ate["estimate"]) < 0.2 and max(abs(v) for v in pilot[1:]) < 0.2


def test_a_centred_study_sends_each_noise_replicate_its_own_pilot_from_its_own_statistics(tmp_path, monkeypatch):
    # the copies' lines are the projection of each replicate's statistics and models (the pilot's parametric
    # bootstrap): one per replicate, each its own, none the study's, and each as near the study's pilot as the
    # statistics' noise puts it (at eps 1e4 a few thousandths of the effect's scale)
    from collabcausal.analyst import dp_projection

    seen = []
    honest = dp_projection.effect_projection

    def spy(statistics, *args):
        seen.append(np.asarray(statistics).copy())
        return honest(statistics, *args)

    monkeypatch.setattr(dp_projection, "effect_projection", spy)
    spec = replace(SPEC, projection_centre=1.0, nuisance_replicates=5)
    allocation = _run(tmp_path, spec)["effect_modification"]["allocation"]
    pilot = np.array(allocation["pilot"])
    copies = np.array(allocation["replicate_pilots"])
    assert copies.shape == (5, 3) and len(seen) == 6
    assert len({tuple(c) for c in copies}) == 5 and not any(np.array_equal(c, pilot) for c in copies)
    assert np.abs(copies - pilot).max() < 0.05
    assert all(not np.array_equal(seen[0], s) for s in seen[1:])  # each copy's statistics, not the release's


def test_a_replicate_step_widens_the_copies_and_reads_them_back_per_noise_sd_at_the_same_charge(tmp_path, monkeypatch):
    # replicate_step = 3: each copy's statistics sit exactly 3 times as far from the release as at step 1 (the same
    # seeded draws), the interval reads each copy's pilot (and sums) back per noise sd, and the parties are charged
    # exactly what a step-1 study costs: nothing released changes
    from collabcausal.analyst import dp_projection

    seen, read = [], []
    honest, blp = dp_projection.effect_projection, dp_projection.best_linear_projection

    def spy(statistics, *args):
        seen.append(np.asarray(statistics).copy())
        return honest(statistics, *args)

    def reader(*args, **kwargs):
        read.append(kwargs["replicate_pilots"])
        return blp(*args, **kwargs)

    monkeypatch.setattr(dp_projection, "effect_projection", spy)
    monkeypatch.setattr(dp_projection, "best_linear_projection", reader)
    offsets, reports = [], []
    for step in (1.0, 3.0):
        seen.clear()
        folder = tmp_path / f"step{step:g}"
        folder.mkdir()
        reports.append(_run(folder, replace(SPEC, projection_centre=1.0, nuisance_replicates=3, replicate_step=step)))
        offsets.append(np.array([s - seen[0] for s in seen[1:]]))
    np.testing.assert_allclose(offsets[1], 3.0 * offsets[0], rtol=1e-6, atol=1e-6 * np.abs(offsets[0]).max())
    allocation = reports[1]["effect_modification"]["allocation"]
    pilot, copies = np.array(allocation["pilot"]), np.array(allocation["replicate_pilots"])
    np.testing.assert_allclose(np.array(read[1]), pilot + (copies - pilot) / 3.0)
    assert [r["dp_effects"]["replicate_step"] for r in reports] == [1.0, 3.0]
    assert reports[0]["privacy"] == reports[1]["privacy"]


@pytest.mark.parametrize(("changes", "match"), [
    ({"modifiers": ("age",)}, "'age' is not a covariate"),
    ({"subgroups": (("x9", (0.0, 1.0, 0.5)),)}, "overlapping"),
    ({"subgroups": (("x0", (-3.5, float("inf"))),)}, "unbounded"),
    ({"estimators": ("ipw",)}, "AIPW ATE"),
    ({"projection_allocation": "optimal"}, "projection_allocation"),
    ({"modifier_clip": -1.0}, "modifier_clip"),
    ({"gram_weight": 3.0}, "gram_weight"),
    ({"projection_centre": -1.0}, "centre"),
    ({"projection_centre": 1.0, "nuisance": "site"}, "pooled nuisance"),
    ({"residual_clip": 2.0}, "residual_clip"),
    ({"clip_compensation": 0.1}, "clip_compensation .* beside a projection clip"),
    ({"projection_clip": 2.0, "clip_compensation": 3.0}, "clip_compensation"),
    ({"modifiers": COLUMNS[:6], "subgroups": tuple((c, (-3.5, 0.0, 3.5)) for c in COLUMNS[:6])},
     r"one modifier alone \d\.\d\dx"),
])
def test_a_bad_declaration_is_refused_before_any_party_is_charged(tmp_path, changes, match):
    with pytest.raises(InputError, match=match):
        _run(tmp_path, replace(SPEC, epsilon=1.0, **changes))
    for i in range(4):
        assert PrivacyLedger.from_file(tmp_path / f"site{i}.sqlite").history() == []


def test_the_cate_kind_says_it_gives_no_guarantee_against_the_coordinator_and_points_here(capsys):
    from collabcausal.analyst.kind_cate import CATE_NOTE
    from collabcausal.cli import main

    assert "NO guarantee" in CATE_NOTE and "dp_effects with modifiers" in CATE_NOTE
    assert main(["simulate", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "NO guarantee against the coordinator" in text and "dp_effects --modifiers" in text
