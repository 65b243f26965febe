"""The party's score release with modifiers and subgroups (docs/dp-cate-projection.md): exact sums plus
calibrated noise, refusals before the charge.

Noise checks at epsilon = 1e4 (zCDP), tolerance 8 noise sds per entry (two-sided tail 1e-15).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from collabcausal.attacks.dp_effects_audit import exact_values
from collabcausal.errors import InputError, PolicyError
from collabcausal.estimators.dp.effects.design import FeatureMap
from collabcausal.estimators.dp.effects.nuisances import NuisanceModel
from collabcausal.estimators.dp.effects.projection import (
    Partition,
    Projection,
    party_projection_sums,
    projection_layout,
    scores_sensitivity,
)
from collabcausal.estimators.dp.effects.release import party_score_sums, scaled_sums
from collabcausal.estimators.dp.effects.scores import components, replicate_components
from collabcausal.estimators.dp.zcdp import gaussian_zcdp_sigma, zcdp_rho
from collabcausal.ledger import PrivacyLedger
from collabcausal.messages import Message
from collabcausal.party import Party, PartyTable
from collabcausal.party.dp_effects import SCORES

N = 400
COLUMNS = ["a", "b"]
FM = FeatureMap(((0.0, 10.0), (0.0, 1.0)), (0.0, 5.0), n_sites=2)
MODEL = NuisanceModel(np.array([0.0, 0.1, 0.2, -0.3]), (np.array([0.0, 0.1, 0.0, 0.1]), np.array([0.1, 0.1, 0, 0])))
PROJECTION = Projection((0,), (Partition(1, (0.0, 0.5, 1.0)),))
RHO = zcdp_rho(1e4, 1e-6)
HUGE = 10**400
"""A JSON integer a hostile coordinator may send: no float holds it (``math.isfinite`` raises on it)."""


def _party(tmp_path) -> Party:
    rng = np.random.default_rng(4)
    frame = pd.DataFrame({"a": rng.uniform(0, 10, N), "b": rng.integers(0, 2, N), "t": np.arange(N) % 2,
                          "y": rng.uniform(0, 5, N)})
    ledger = PrivacyLedger(tmp_path / "ledger.sqlite", epsilon=1e5, delta=1e-3)
    return Party("p1", PartyTable.from_frame(frame, COLUMNS, treatment="t", outcome="y"), ledger=ledger)


def _request(projection: object) -> Message:
    return Message(SCORES, {"study": "s", "rho": RHO, "delta": 1e-6, "columns": COLUMNS, "design": FM.to_spec(),
                            "site": 1, "n_folds": 1, "models": [MODEL.to_spec()], "estimators": ["aipw"],
                            "estimands": ["ate"], "trim": 0.1, "projection": projection})


def test_the_release_is_todays_sums_then_the_added_ones_with_noise_for_both(tmp_path):
    party = _party(tmp_path)
    reply = party.handle(_request(PROJECTION.to_spec()))
    parts = components(["aipw"], ["ate"], FM.outcome_width, 0.1)
    layout = projection_layout(PROJECTION, FM.outcome_width, 0.1, 0)
    sigma = gaussian_zcdp_sigma(scores_sensitivity(parts, layout), RHO)
    assert reply.params["sigma"] == pytest.approx(sigma)
    t = party.table
    folds = np.zeros(N, dtype=np.int64)
    exact = np.concatenate([
        scaled_sums(party_score_sums(t.covariates, t.treatment, t.outcome, FM, 1, folds, [MODEL], parts, 0.1), parts),
        scaled_sums(party_projection_sums(t.covariates, t.treatment, t.outcome, FM, 1, folds, [MODEL], layout, 0.1,
                                          PROJECTION), layout.parts)])
    assert np.abs(reply.arrays["values"] - exact).max() < 8 * sigma
    assert len(party.ledger.history()) == 1


@pytest.mark.parametrize(("projection", "error", "match"), [
    ({"modifiers": [2]}, InputError, "not distinct covariates"),
    ({"subgroups": [{"column": 0, "edges": [0, 5, 3]}]}, InputError, "overlapping"),
    ({"subgroups": [{"column": 0, "edges": [0, None]}]}, InputError, "unbounded"),
    ({"subgroups": "age"}, InputError, "malformed"),
    ({"modifiers": [0], "clip": 1e-300}, InputError, "clip"),
    ({"modifiers": [0], "weights": [1.5]}, InputError, "weights"),  # more than one unit sum's budget
    ({"modifiers": [0], "weights": [1.0, 1.0]}, InputError, "2 dp_effects projection weights for 1"),
    ({"modifiers": [0], "weights": "1"}, InputError, "malformed"),
    ({"modifiers": [0], "modifier_clips": [0.5, 0.5]}, InputError, "modifier clips"),
    ({"modifiers": [0], "gram_weight": 0.0}, InputError, "gram_weight"),
    ({"modifiers": [0], "centre": 1.0}, InputError, "pilot"),  # a centre without its line
    ({"modifiers": [0], "centre": 1.0, "pilot": [0.5], "replicate_pilots": []}, InputError, "pilot"),  # one short
    ({"modifiers": [0], "centre": 1.0, "pilot": [0.5, "x"], "replicate_pilots": []}, InputError, "pilot"),
    ({"modifiers": [0], "centre": 1.0, "pilot": "0.5"}, InputError, "malformed"),
    ({"modifiers": [0], "centre": 0.0, "pilot": [0.5, 1.0], "replicate_pilots": []}, InputError, "centre"),
    # the noise replicates' own lines (docs/dp-cate-projection.md, "The pilot's noise")
    ({"modifiers": [0], "centre": 1.0, "pilot": [0.5, 1.0]}, InputError, "replicate pilots"),  # none sent
    ({"modifiers": [0], "centre": 1.0, "pilot": [0.5, 1.0], "replicate_pilots": [[0.5, 1.0]]}, InputError,
     "1 dp_effects replicate pilots for 0 noise replicates"),  # more lines than replicates
    ({"modifiers": [0], "replicate_pilots": []}, InputError, "replicate pilots"),  # without a centre
    # a centre whose meat's range (its square) overflows: refused before the charge, not released as 0 / inf
    ({"modifiers": [0], "centre": 1e200, "pilot": [0.5, 1.0], "replicate_pilots": []}, InputError,
     "meat's range"),
    # an option this party does not apply (a newer analyst's, a misspelling, a claimed bound): never ignored
    ({"modifiers": [0], "sensitivity": 0.01}, InputError, "'sensitivity' is not one this party applies"),
    ({"modifiers": [0], "centre": 1.0, "pilot": [0.5, 1.0], "replicate_pilot": []}, InputError,
     "'replicate_pilot' is not one this party applies"),
    ({"modifiers": [0], "centre": 1.0, "pilot": [0.5, 1.0], "replicate_pilots": "[]"}, InputError, "malformed"),
    ({"modifiers": [0], "centre": 1.0, "pilot": [0.5, 1.0], "replicate_pilots": [0.5, 1.0]}, InputError,
     "malformed"),
    ({"modifiers": [0], "residual_clip": 0.0}, InputError, "residual_clip"),
    ({"modifiers": [0], "residual_clip": 1.5}, InputError, "residual_clip"),  # beyond the outcome's width
    ({"modifiers": [0], "residual_clip": "0.3"}, InputError, "residual_clip"),
    ({"subgroups": [{"column": 0, "edges": [0, 5]}], "residual_clip": True}, InputError, "residual_clip"),
    # a hostile coordinator's residual clips: not numbers, not finite, signed zero, underflowing, too large for a float
    *[({"modifiers": [0], "residual_clip": rc}, InputError, "residual_clip")
      for rc in (math.nan, math.inf, -math.inf, -0.0, 1e-300, 1.0 + 1e-12, [0.3], {"rho": 0.3}, HUGE, 0.000999)],
    # with a residual clip, the other bounds as integers no float holds (an OverflowError before: not one line)
    ({"modifiers": [0], "clip": HUGE, "residual_clip": 0.2}, InputError, "clip"),
    ({"modifiers": [0], "centre": HUGE, "pilot": [0.0, 0.0], "residual_clip": 0.2, "replicate_pilots": []},
     InputError, "centre"),
    ({"modifiers": [0], "centre": 1.0, "pilot": [HUGE, 0.0], "residual_clip": 0.2, "replicate_pilots": []},
     InputError, "pilot"),
    ({"modifiers": [0], "weights": [HUGE], "residual_clip": 0.2}, InputError, "weights"),
    ({"subgroups": [{"column": 0, "edges": [0, HUGE]}], "residual_clip": 0.2}, InputError, "unbounded"),
    # a hostile coordinator's clip compensations: without a clip, not numbers, not finite, out of [1e-3, 1]
    *[({"modifiers": [0], "clip": None if beta == 0.1 else 1.0, "clip_compensation": beta}, InputError,
       "clip_compensation") for beta in (0.1, math.nan, math.inf, -0.0, 1e-300, 1.0 + 1e-12, True, "0.1", [0.1], HUGE)],
    # a pilot whose line m^T gamma overflows (below: what it let a coordinator learn)
    ({"modifiers": [0], "centre": 1.0, "pilot": [1e308, 1e308], "residual_clip": 0.2, "replicate_pilots": []},
     InputError, "pilot"),
])
def test_a_bad_projection_is_refused_uncharged(tmp_path, projection, error, match):
    party = _party(tmp_path)
    with pytest.raises(error, match=match):
        party.handle(_request(projection))
    assert party.ledger.history() == []


def test_modifiers_without_the_aipw_ate_are_refused_uncharged(tmp_path):
    party = _party(tmp_path)
    request = _request(PROJECTION.to_spec())
    with pytest.raises(InputError, match="AIPW ATE"):
        party.handle(Message(SCORES, request.params | {"estimators": ["ipw"]}))
    assert party.ledger.history() == []


def _bisect_tenth_smallest(party: Party, rho: float, probes: int = 30) -> tuple[float, int]:
    """A hostile coordinator's bisection over the edge ``e`` of subgroups ``[0, e), [e, 10]`` of column ``a``.

    While a bin-count refusal exists (``min_subjects`` 10 per arm and bin), a request is refused iff
    ``[0, e)`` holds fewer than 10 subjects of an arm, so the bisection converges on the 10th smallest
    ``a`` of the thinner arm: the exact count of subjects below any edge, learnt from uncharged refusals.
    Returns the edge it ends at and how many probes were refused.
    """
    low, high, refused = 0.0, 10.0, 0
    for _ in range(probes):
        edge = (low + high) / 2
        request = _request({"subgroups": [{"column": 0, "edges": [0.0, edge, 10.0]}]})
        try:
            party.handle(Message(SCORES, request.params | {"rho": rho}))
            high = edge
        except PolicyError:
            low, refused = edge, refused + 1
    return high, refused


def test_bisection_over_subgroup_edges_learns_no_bin_count(tmp_path):
    """The probing channel of docs/dp-cate-projection.md ("What a bin reveals") is closed.

    Two tables whose 10th smallest ``a`` per arm differ (0.5 against 2.5): the coordinator's
    bisection ends at the same edge on both, no probe is refused, and every probe is charged.
    """
    rho = zcdp_rho(1.0, 1e-6)
    ends = []
    for shift, folder in ((0.0, "near"), (2.0, "far")):
        rng = np.random.default_rng(4)
        a = np.concatenate([np.linspace(0.0, 0.5, 20), rng.uniform(3.0, 10.0, N - 20)])
        a[:20] += shift
        frame = pd.DataFrame({"a": a, "b": rng.integers(0, 2, N), "t": np.arange(N) % 2, "y": rng.uniform(0, 5, N)})
        (tmp_path / folder).mkdir()
        ledger = PrivacyLedger(tmp_path / folder / "ledger.sqlite", epsilon=1e5, delta=1e-3)
        party = Party("p1", PartyTable.from_frame(frame, COLUMNS, treatment="t", outcome="y"), ledger=ledger)
        end, refused = _bisect_tenth_smallest(party, rho)
        assert refused == 0
        assert len(party.ledger.history()) == 30
        ends.append(end)
    assert ends[0] == ends[1]


RESIDUAL = {"modifiers": [0], "subgroups": [{"column": 1, "edges": [0.0, 0.5, 1.0]}], "residual_clip": 0.2}


@pytest.mark.parametrize(("where", "propensity", "match"), [
    ("models", [HUGE, 0.0, 0.0, 0.0], "numeric propensity"),  # an OverflowError before: not one line
    ("models", [math.nan, 0.0, 0.0, 0.0], "non-finite"),
    ("models", [1e308] * 4, "overflow"),  # each finite, their sum not: mu_t or e could be NaN, not clipped
    ("replicates", [HUGE, 0.0, 0.0, 0.0], "numeric propensity"),
    ("replicates", [-1e308] * 4, "overflow"),
])
def test_with_a_residual_clip_a_hostile_model_is_refused_uncharged(tmp_path, where, propensity, match):
    # the bound R + rho / t needs mu_t in [-R/2, R/2] and e in [t, 1 - t]: the models' clips give both only for
    # coefficients whose absolute sum is finite; the rest are refused before the charge
    party = _party(tmp_path)
    hostile = MODEL.to_spec() | {"propensity": propensity}
    params = _request(RESIDUAL).params
    request = params | ({"models": [hostile]} if where == "models" else {"replicates": [[hostile]]})
    with pytest.raises(InputError, match=match):
        party.handle(Message(SCORES, request))
    assert party.ledger.history() == []


@pytest.mark.parametrize("which", ["pilot", "a replicate's pilot"])
def test_a_pilot_whose_line_overflows_is_refused_uncharged_whoever_is_in_the_table(tmp_path, which):
    """A hostile centre: pilot ``(1e308, 1e308, 0)`` on modifiers ``a`` and ``b``, ``b`` declared in ``(-1, 1)``.

    Its line ``m^T gamma`` overflows to inf where ``a > 9``, and a subject's product ``(phi - inf) z_b`` is then
    ``inf * 0 = NaN`` where ``b = 0``. Before the check the party charged the release and then answered (no such
    subject) or failed on the NaN (one): whether one subject with ``a > 9`` and ``b = 0`` is in the table, read off an
    error whatever the epsilon. Now both neighbours are refused before any charge; the same for a noise replicate's
    own line, which scores that replicate's copy.
    """
    design = FeatureMap(((0.0, 10.0), (-1.0, 1.0)), (0.0, 5.0), n_sites=1)
    rng = np.random.default_rng(5)
    frame = pd.DataFrame({"a": rng.uniform(0, 9, N), "b": rng.choice([-1.0, 1.0], N), "t": np.arange(N) % 2,
                          "y": rng.uniform(0, 5, N)})
    model = NuisanceModel(np.zeros(3), (np.zeros(3), np.zeros(3)))
    hostile, fine = [1e308, 1e308, 0.0], [0.0, 0.0, 0.0]
    pilot, copy = (hostile, fine) if which == "pilot" else (fine, hostile)
    projection = {"modifiers": [0, 1], "centre": 1.0, "pilot": pilot, "residual_clip": 0.2, "replicate_pilots": [copy]}
    request = Message(SCORES, _request(projection).params | {
        "rho": zcdp_rho(1.0, 1e-6), "design": design.to_spec(), "site": 0, "models": [model.to_spec()],
        "replicates": [[model.to_spec()]]})
    _refused_uncharged_with_and_without(tmp_path, frame, ["a", "b"], ([1.0, 1.0], [9.5, 0.0]), request, "pilot")


def _refused_uncharged_with_and_without(tmp_path, frame: pd.DataFrame, columns: list[str], rows: tuple,
                                        request: Message, match: str) -> None:
    """The last row of ``frame`` set to each of ``rows`` (an ordinary subject, then the one a coordinator hunts): the
    party refuses ``request`` before any charge either way, so whether it fails tells nothing about that subject."""
    for folder, row in zip(("absent", "present"), rows, strict=True):
        frame.loc[N - 1, columns] = row
        (tmp_path / folder).mkdir()
        ledger = PrivacyLedger(tmp_path / folder / "ledger.sqlite", epsilon=10.0, delta=1e-3)
        party = Party("p1", PartyTable.from_frame(frame, COLUMNS, treatment="t", outcome="y"), ledger=ledger)
        with pytest.raises(InputError, match=match):
            party.handle(request)
        assert party.ledger.history() == []


@pytest.mark.parametrize(("residual_clip", "compensation"), [(1e-3, None), (1, None), (1e-3, 1.0), (1, 1e-3)])
def test_at_the_residual_clips_ends_far_outcomes_hostile_models_and_the_widest_pilot_stay_in_range(
        tmp_path, residual_clip, compensation):
    # outcomes up to the largest float, models whose coefficients' absolute sums are just finite (mu_t and e at
    # their clips), a replicate mirroring them, the widest pilot accepted and subjects with z_a = 0, and each clip's
    # loss under those models added back at either end of its bound: one charge, a finite release of the party's exact
    # sums, each within n times its per-subject range
    rng = np.random.default_rng(6)
    far = np.finfo(float).max
    frame = pd.DataFrame({"a": rng.uniform(0, 10, N), "b": rng.integers(0, 2, N), "t": np.arange(N) % 2,
                          "y": rng.choice([-far, -1e300, 2.5, 1e300, far], N)})
    frame.loc[:9, "a"] = 5.0
    ledger = PrivacyLedger(tmp_path / "ledger.sqlite", epsilon=1e5, delta=1e-3)
    party = Party("p1", PartyTable.from_frame(frame, COLUMNS, treatment="t", outcome="y"), ledger=ledger)
    big = 4e307 * np.array([1.0, -1.0, 1.0, -1.0])
    hostile = NuisanceModel(big, (big[::-1], -big))
    mirror = NuisanceModel(-big, (-big[::-1], big))
    projection = Projection((0,), (Partition(1, (0.0, 0.5, 1.0)),), None if compensation is None else 1.0, centre=1.0,
                            pilot=(4e307, 4e307), residual_clip=residual_clip,
                            replicate_pilots=((-4e307, -4e307),),  # the copy's mirrored
                            clip_compensation=compensation)
    request = Message(SCORES, _request(projection.to_spec()).params | {
        "models": [hostile.to_spec()], "replicates": [[mirror.to_spec()]]})
    reply = party.handle(request)
    parts = components(["aipw"], ["ate"], FM.outcome_width, 0.1)
    every = (*parts, *replicate_components(parts, 1), *projection_layout(projection, FM.outcome_width, 0.1, 1).parts)
    exact = exact_values(party.table, request)
    reach = np.array([c.weight * max(-c.low, c.high) / c.width for c in every])
    assert len(party.ledger.history()) == 1 and np.isfinite(reply.arrays["values"]).all()
    assert (np.abs(exact) <= N * reach * (1 + 1e-12)).all()  # a float sum of N values each within reach: a few ulps
    assert np.abs(reply.arrays["values"] - exact).max() < 8 * reply.params["sigma"]


def test_a_trim_whose_complement_rounds_to_one_is_refused_uncharged_whoever_is_in_the_table(tmp_path):
    # trim 1e-17 (its score ranges finite): 1 - trim rounds to 1, so a propensity at the logit's clip (40) is 1 and a
    # treated subject's score (1 - T) r0 / (1 - e) is 0 / 0 = NaN. Before the check the party charged the release and
    # then answered (no treated subject with a > 9.5) or failed on the NaN (one): membership read off an error
    model = NuisanceModel(np.array([0.0, -900.0, 1000.0, 0.0]), MODEL.outcome_coef)
    request = Message(SCORES, _request(RESIDUAL).params | {"rho": zcdp_rho(1.0, 1e-6), "trim": 1e-17,
                                                           "models": [model.to_spec()]})
    rng = np.random.default_rng(7)
    frame = pd.DataFrame({"a": rng.uniform(0, 9, N), "b": rng.integers(0, 2, N), "t": np.arange(N) % 2,
                          "y": rng.uniform(0, 5, N)})
    _refused_uncharged_with_and_without(tmp_path, frame, ["a", "t"], ([1.0, 1], [9.9, 1]), request, "rounds to 1")
