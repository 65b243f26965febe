"""A hostile coordinator against dp_effects (issue 21, item 5): nothing is answered for free.

Every request that reaches the rows is charged before it is computed, whatever it changed since
release 1 (feature map, sites, outcome range, folds, nuisances) and however often it is replayed;
the noise is calibrated to a sensitivity the party computes from public parameters that bound
every row it uses, so no parameter the analyst sends lowers it; and a request whose arithmetic
could overflow on some rows is refused before the charge (otherwise whether it failed would tell
the analyst about the rows, outside the DP release).

False-failure rates: the tests compare charges, sensitivities and sigmas (deterministic); "fresh
noise" compares two releases of noise sd >= 0.4 per entry (P(equal) = 0).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from dp_effects_requests import COLUMNS, DELTA, FM, MODEL, OTHER, RHO, hostile_frame, hostile_request
from unread_rows import refused_unread

from collabcausal.errors import InputError, ProtocolError
from collabcausal.estimators.dp.effects.design import FeatureMap
from collabcausal.estimators.dp.effects.nuisances import NuisanceModel
from collabcausal.estimators.dp.effects.projection import Partition, Projection
from collabcausal.estimators.dp.effects.scores import components, release_sensitivity
from collabcausal.estimators.dp.effects.statistics import statistics_reach, statistics_sensitivity
from collabcausal.estimators.dp.zcdp import gaussian_zcdp_sigma, zcdp_epsilon
from collabcausal.ledger import PrivacyLedger
from collabcausal.messages import Message
from collabcausal.party import Party, PartyTable
from collabcausal.party.dp_effects import SCORES, STATISTICS


def _party(tmp_path, frame=None, columns=COLUMNS, name: str = "l") -> Party:
    rows = hostile_frame(columns) if frame is None else frame
    table = PartyTable.from_frame(rows, columns, treatment="t", outcome="y")
    return Party("p", table, ledger=PrivacyLedger(tmp_path / f"{name}.sqlite", epsilon=1e6, delta=0.5))


def _charges(party: Party) -> int:
    return len(party.ledger.history())


WIDER = FeatureMap(((-100.0, 100.0), (-1.0, 1.0)), (0.0, 5.0), n_sites=2).to_spec()
MORE_SITES = FeatureMap(FM.bounds, FM.outcome_range, n_sites=7).to_spec()
OUTCOME = FeatureMap(FM.bounds, (-1e6, 1e6), n_sites=2).to_spec()
SPLIT = [MODEL.to_spec(), OTHER.to_spec()]
AFTER_RELEASE_1 = {
    "feature map (bounds)": (SCORES, {"design": WIDER}),
    "site list": (SCORES, {"design": MORE_SITES, "site": 5, "models": [NuisanceModel(
        np.zeros(9), (np.zeros(9), np.zeros(9))).to_spec()]}),
    "outcome range": (SCORES, {"design": OUTCOME}),
    "columns": (SCORES, {"columns": ["b", "a"]}),
    "more folds (statistics)": (STATISTICS, {"n_folds": 5}),
    "more folds (scores)": (SCORES, {"n_folds": 2, "models": SPLIT}),
    "nuisances resent on the other fold": (SCORES, {"n_folds": 2, "models": SPLIT[::-1]}),
    "another study name (other folds)": (STATISTICS, {"study": "s2", "n_folds": 2}),
    "a plain replay": (STATISTICS, {}),
}


@pytest.mark.parametrize("case", sorted(AFTER_RELEASE_1))
def test_a_changed_or_replayed_request_after_the_releases_is_charged_again(tmp_path, case):
    party = _party(tmp_path)
    party.handle(hostile_request(STATISTICS, n_folds=2))
    party.handle(hostile_request(SCORES, n_folds=2, models=SPLIT))
    spent = party.ledger.spent()
    op, change = AFTER_RELEASE_1[case]
    reply = party.handle(hostile_request(op, **change))
    assert _charges(party) == 3 and party.ledger.history()[-1].rho == RHO
    assert spent == pytest.approx((zcdp_epsilon(2 * RHO, 2 * DELTA), 2 * DELTA))
    assert party.ledger.spent() == pytest.approx((zcdp_epsilon(3 * RHO, 3 * DELTA), spent[1] + DELTA))
    assert party.ledger.spent()[0] > spent[0]
    assert reply.params["sigma"] == pytest.approx(gaussian_zcdp_sigma(reply.params["sensitivity"], RHO))


def test_a_replay_gets_fresh_noise_and_a_new_charge(tmp_path):
    party = _party(tmp_path)
    first = party.handle(hostile_request(STATISTICS)).arrays["values"]
    second = party.handle(hostile_request(STATISTICS)).arrays["values"]
    assert _charges(party) == 2 and not np.array_equal(first, second)


def test_a_replayed_idempotency_key_returns_the_recorded_numbers_and_cannot_carry_another_request(tmp_path):
    party = _party(tmp_path)
    first = party.handle(hostile_request(SCORES, request_id="k1"))
    again = party.handle(hostile_request(SCORES, request_id="k1"))
    np.testing.assert_array_equal(first.arrays["values"], again.arrays["values"])  # nothing new is released
    assert _charges(party) == 1
    with pytest.raises(ProtocolError, match="different request"):
        party.handle(hostile_request(SCORES, request_id="k1", models=[OTHER.to_spec()]))
    assert _charges(party) == 1


@pytest.mark.parametrize("design", [FM.to_spec(), WIDER, OUTCOME, FeatureMap(FM.bounds, (0.0, 1e-9), 2).to_spec()])
def test_the_sensitivity_comes_from_the_party_and_no_parameter_lowers_it(tmp_path, design):
    # The statistics' sensitivity depends on m only (every row is clipped into the unit box and
    # the outcome into [-1/2, 1/2]); the scores' only on the released sums (each scaled by its
    # range). A request claiming a sensitivity or sigma is refused uncharged, naming the claim.
    party = _party(tmp_path)
    for op in (STATISTICS, SCORES):
        for claim in ("sensitivity", "sigma", "noise_sd"):
            with pytest.raises(InputError, match=f"does not apply: {claim};"):
                party.handle(hostile_request(op, design=design, **{claim: 1e-9}))
    assert _charges(party) == 0
    stats = party.handle(hostile_request(STATISTICS, design=design))
    assert stats.params["sensitivity"] == pytest.approx(statistics_sensitivity(FM))
    assert stats.params["sigma"] == pytest.approx(gaussian_zcdp_sigma(statistics_sensitivity(FM), RHO))
    scores = party.handle(hostile_request(SCORES, design=design))
    parts = components(["aipw", "ipw"], ["ate", "att"], 5.0, 0.1)
    assert scores.params["sensitivity"] == pytest.approx(release_sensitivity(parts))


@pytest.mark.parametrize("trim", [0.0, -0.1, 0.5, float("nan"), float("inf"), True, "0.1", 1e-17])  # 1 - 1e-17 == 1
def test_a_trim_that_bounds_nothing_is_refused_uncharged(tmp_path, trim):
    party = _party(tmp_path)
    with pytest.raises(InputError, match="trim"):
        party.handle(hostile_request(SCORES, trim=trim))
    assert _charges(party) == 0


HUGE = {
    "an outcome range wider than a float": {"design": FeatureMap(FM.bounds, (-1e308, 1e308), 2).to_spec()},
    "a covariate range wider than a float": {"design": FeatureMap(((-1e308, 1e308), (-1.0, 1.0)), (0, 5), 2).to_spec()},
    "an outcome range whose midpoint overflows": {"design": FeatureMap(FM.bounds, (1e308, 1.7e308), 2).to_spec()},
    "a trim whose score range overflows": {"trim": 1e-300},
    "score sums that can overflow over n rows": {"design": FeatureMap(FM.bounds, (0.0, 1e153), 2).to_spec()},
}


REFUSED = [(op, case) for case in sorted(HUGE) for op in (STATISTICS, SCORES)
           if op == SCORES or not ("trim" in HUGE[case] or "n rows" in case)]


@pytest.mark.parametrize(("op", "case"), REFUSED)
def test_a_range_the_arithmetic_cannot_hold_is_refused_in_one_line_before_the_charge(tmp_path, op, case):
    # Found by this audit: such a request was charged and then failed on non-finite sums (or an
    # OverflowError); where the failure depends on the rows it is a channel outside the release.
    party = _party(tmp_path)
    with pytest.raises(InputError, match="floating point") as info:
        party.handle(hostile_request(op, **HUGE[case]))
    assert "\n" not in str(info.value)
    assert _charges(party) == 0


@pytest.mark.parametrize("projection", [None, {"modifiers": [0], "residual_clip": 1e-3}])
def test_an_outcome_range_whose_score_ranges_underflow_is_refused_in_one_line_before_the_charge(tmp_path, projection):
    # Found by the residual clip's audit: at R = 1e-200 the sums of squares' range (R / t)^2 underflows to 0; the
    # release was charged and then failed on 0 / 0 (with a projection: a ZeroDivisionError, uncharged but no one line)
    party = _party(tmp_path)
    with pytest.raises(InputError, match="underflow") as info:
        party.handle(hostile_request(SCORES, design=FeatureMap(FM.bounds, (0.0, 1e-200), 2).to_spec(),
                                     projection=projection))
    assert "\n" not in str(info.value)
    assert _charges(party) == 0


def test_the_statistics_take_a_huge_finite_outcome_range(tmp_path):
    # They scale the outcome into [-1/2, 1/2]: nothing can overflow, so the range is allowed (and charged).
    party = _party(tmp_path)
    reply = party.handle(hostile_request(STATISTICS, **HUGE["score sums that can overflow over n rows"]))
    assert np.isfinite(reply.arrays["values"]).all() and _charges(party) == 1


def test_hostile_coefficients_cannot_make_the_answer_depend_on_whether_a_row_sits_at_a_corner(tmp_path):
    # Found by this audit: coefficients of 1e308 overflow the design product; batched (BLAS), a row
    # at (lo, hi, lo, .) came out NaN and failed the request after the charge, other rows did not.
    # Refused for both neighbours before the charge.
    columns = ["a", "b", "c", "d"]
    fm = FeatureMap(((0.0, 1.0),) * 4, (0.0, 5.0), n_sites=1)
    model = {"propensity": [1e308] * 5, "outcome_0": [0.0] * 5, "outcome_1": [0.0] * 5}
    inside = hostile_frame(columns)
    corner = inside.copy()
    corner.loc[0, columns] = [0.0, 1.0, 0.0, 0.5]
    for k, frame in enumerate((inside, corner)):
        party = _party(tmp_path, frame, columns, name=f"n{k}")
        with pytest.raises(InputError, match="floating point"):
            party.handle(hostile_request(SCORES, columns=columns, design=fm.to_spec(), site=0, models=[model]))
        assert _charges(party) == 0


# --- cross_weight (issue 39) against a hostile coordinator (29 Nov 2026 review) ---

HOSTILE_WEIGHTS = {
    "just below 1/8": float(np.nextafter(0.125, 0.0)),
    "just above 8": float(np.nextafter(8.0, 16.0)),
    "smallest subnormal": 5e-324,
    "minus zero": -0.0,
    "minus 8": -8.0,
    "minus inf": float("-inf"),
    "nan": float("nan"),
    "None (sent explicitly)": None,
    "the string 'nan'": "nan",
    "the string '2'": "2",
    "bytes": b"2",
    "a list": [2.0],
    "a dict": {"w": 2.0},
    "a complex": 2 + 0j,
    "numpy int64": np.int64(2),
    "numpy float32": np.float32(2.0),
    "numpy 0-d array": np.array(2.0),
    "True": True,
    "False": False,
    "2^53 + 1": 2**53 + 1,
    "a huge int": 10**400,
    "a huge negative int": -(10**400),
}


@pytest.mark.parametrize("case", sorted(HOSTILE_WEIGHTS))
def test_a_hostile_cross_weight_is_refused_in_one_line_naming_it_before_any_charge(tmp_path, case):
    """Every value outside [1/8, 8] or of another type than int/float: a one-line InputError naming cross_weight,
    nothing charged (the request is built by hand so an explicit None reaches the party)."""
    party = _party(tmp_path)
    params = hostile_request(STATISTICS).params | {"cross_weight": HOSTILE_WEIGHTS[case]}
    with pytest.raises(InputError, match="cross_weight") as caught:
        party.handle(Message(STATISTICS, params))
    assert "\n" not in str(caught.value.args[0]) and _charges(party) == 0


ACCEPTED_WEIGHTS = {"1/8 exactly": 0.125, "8 exactly": 8.0, "the int 8": 8, "the int 1": 1,
                    "numpy float64": np.float64(2.0),
                    "0.125 + 1ulp": float(np.nextafter(0.125, 1.0)), "8 - 1ulp": float(np.nextafter(8.0, 0.0))}


@pytest.mark.parametrize("case", sorted(ACCEPTED_WEIGHTS))
def test_a_boundary_cross_weight_is_charged_once_and_calibrated_for_as_a_float(tmp_path, case):
    """The boundaries (and an int, and numpy's float64, a float subclass) are accepted: one charge, the ledger records
    a plain float, and the reply's sensitivity is the weight's."""
    weight = ACCEPTED_WEIGHTS[case]
    party = _party(tmp_path)
    reply = party.handle(hostile_request(STATISTICS, cross_weight=weight))
    assert _charges(party) == 1 and np.isfinite(reply.arrays["values"]).all()
    recorded = party.ledger.history()[0].details["cross_weight"]
    assert type(recorded) is float and recorded == float(weight)
    assert reply.params["sensitivity"] == pytest.approx(statistics_sensitivity(FM, float(weight)), rel=1e-15)


def _extreme_frame(seed: int = 11, n: int = 400) -> pd.DataFrame:
    """Rows far outside the declared box and outcome range (finite, up to 1e300 either way), both arms."""
    rng = np.random.default_rng(seed)
    scale = 10.0 ** rng.integers(0, 301, size=(n, 3))
    sign = rng.choice([-1.0, 1.0], size=(n, 3))
    values = sign * scale * rng.uniform(0.5, 1.0, size=(n, 3))
    return pd.DataFrame({"a": values[:, 0], "b": values[:, 1], "t": np.arange(n) % 2, "y": values[:, 2]})


@pytest.mark.parametrize("weight", [0.125, 8.0])
@pytest.mark.parametrize("n_folds", [1, 5])
def test_extreme_rows_under_either_end_of_the_weight_are_released_finite_within_reach(
        tmp_path, monkeypatch, weight, n_folds):
    """No row decides whether the release fails after the charge: covariates and outcomes up to 1e300 (clipped into
    the box), either end of the weight, one or five folds: one charge, finite values, every exact entry within
    n statistics_reach(w) (the wrap-around bound secure aggregation declares)."""
    monkeypatch.setattr("collabcausal.party.dp_effects.perturb", lambda kind, values, sigma: values)
    frame = _extreme_frame()
    party = _party(tmp_path, frame=frame)
    reply = party.handle(hostile_request(STATISTICS, cross_weight=weight, n_folds=n_folds))
    values = np.asarray(reply.arrays["values"])
    assert _charges(party) == 1 and np.isfinite(values).all()
    assert np.abs(values).max() <= len(frame) * statistics_reach(weight)
    assert np.abs(values).max() >= 0.5 * len(frame) / (2 * n_folds)  # every clipped row counts (an arm's intercept)


@pytest.mark.parametrize("weight", [0.125, 8.0])
def test_an_out_of_core_party_releases_the_in_memory_weighted_sums_on_extreme_rows(tmp_path, monkeypatch,
                                                                                            weight):
    """The same extreme rows read out of core (two parquet files, one of them empty) and in memory: the same weighted
    exact sums, the same sensitivity, one charge each."""
    pq = pytest.importorskip("pyarrow.parquet")
    pa = pytest.importorskip("pyarrow")
    from collabcausal.party.chunked_table import ChunkedTable

    monkeypatch.setattr("collabcausal.party.dp_effects.perturb", lambda kind, values, sigma: values)
    frame = _extreme_frame(seed=12)
    folder = tmp_path / "registry"
    folder.mkdir()
    pq.write_table(pa.Table.from_pandas(frame.iloc[:150], preserve_index=False), folder / "p1.parquet")
    pq.write_table(pa.Table.from_pandas(frame.iloc[150:], preserve_index=False), folder / "p2.parquet")
    pq.write_table(pa.Table.from_pandas(frame.iloc[:0], preserve_index=False), folder / "p3-empty.parquet")
    chunked = ChunkedTable.open(folder, COLUMNS, treatment="t", outcome="y", workers=1, source="registry")
    memory = PartyTable.from_frame(frame, COLUMNS, treatment="t", outcome="y", source="registry")
    key = bytes(range(32))
    parties = [Party("p", t, ledger=PrivacyLedger(tmp_path / f"{i}.sqlite", epsilon=1e6, delta=0.5), anchor_key=key)
               for i, t in enumerate([chunked, memory])]
    ours, theirs = (p.handle(hostile_request(STATISTICS, cross_weight=weight)) for p in parties)
    np.testing.assert_allclose(ours.arrays["values"], theirs.arrays["values"], rtol=1e-12, atol=1e-9)
    assert ours.params["sensitivity"] == theirs.params["sensitivity"] == statistics_sensitivity(FM, weight)
    assert [_charges(p) for p in parties] == [1, 1]


@pytest.mark.parametrize("weight", [1.0, 8.0, float("nan"), "2"])
def test_a_cross_weight_sent_to_the_scores_release_is_refused_uncharged(tmp_path, weight):
    """Only the statistics release applies cross_weight: sent with the scores (even the default 1, or a value the
    statistics would refuse), the request is refused before the charge, naming it, rather than run as if unweighted."""
    party = _party(tmp_path)
    with pytest.raises(InputError, match=r"does not apply: cross_weight; fix: send only .*trim"):
        party.handle(hostile_request(SCORES, cross_weight=weight))
    assert _charges(party) == 0


@pytest.mark.parametrize("op", [STATISTICS, SCORES])
def test_a_parameter_of_another_release_or_version_is_refused_uncharged(tmp_path, op):
    """Whatever the party would not apply is refused in one line before the charge: the other release's parameters,
    a misspelling, a field of a newer protocol."""
    party = _party(tmp_path)
    other = {STATISTICS: {"trim": 0.1}, SCORES: {"cross_weight": 2.0}}[op]
    for extra in (other, {"crossweight": 2.0}, {"residual_clip": 0.3}, {"sensitivity": 1.0, "n_replicates": 8}):
        with pytest.raises(InputError, match=f"^{op} request carries parameters this party does not apply: "
                                             f"{', '.join(sorted(extra))};"):
            party.handle(hostile_request(op, **extra))
    assert _charges(party) == 0


@pytest.mark.parametrize("other", [8.0, 1, 2.0000000000000004, 2])
def test_a_replayed_idempotency_key_cannot_carry_another_cross_weight(tmp_path, other):
    """The recorded statistics at w = 2 cannot be fetched again as if released under another weight (the analyst
    would divide by the wrong one), not even one ulp away; the int 2 counts as another request too (conservative: the
    same weight, refused uncharged)."""
    party = _party(tmp_path)
    first = party.handle(hostile_request(STATISTICS, request_id="k1", cross_weight=2.0))
    with pytest.raises(ProtocolError, match="different request"):
        party.handle(hostile_request(STATISTICS, request_id="k1", cross_weight=other))
    again = party.handle(hostile_request(STATISTICS, request_id="k1", cross_weight=2.0))
    np.testing.assert_array_equal(first.arrays["values"], again.arrays["values"])
    assert _charges(party) == 1


SUBGROUPS = Projection((0,), (Partition(1, (-1.0, 0.0, 1.0)),)).to_spec()
NESTED = {  # a key the party does not apply, in each nested specification of a dp_effects request
    "design": (STATISTICS, "dp_effects design", "n_site", lambda x: {"design": FM.to_spec() | x}),
    "scores' design": (SCORES, "dp_effects design", "clip_outcome", lambda x: {"design": FM.to_spec() | x}),
    "model": (SCORES, "dp_effects nuisance model", "sigma", lambda x: {"models": [MODEL.to_spec() | x]}),
    "replicate's model": (SCORES, "dp_effects nuisance model", "ridge",
                          lambda x: {"replicates": [[MODEL.to_spec()], [OTHER.to_spec() | x]]}),
    "projection": (SCORES, "dp_effects projection", "sensitivity", lambda x: {"projection": SUBGROUPS | x}),
    "subgroup": (SCORES, "dp_effects subgroup", "labels", lambda x: {"projection": SUBGROUPS | {
        "subgroups": [SUBGROUPS["subgroups"][0] | x]}}),
}


@pytest.mark.parametrize("case", sorted(NESTED))
def test_a_nested_specification_key_the_party_does_not_apply_is_refused_unread_and_uncharged(tmp_path, case):
    """A misspelling, a claimed bound or a newer analyst's option inside the design, a model, the projection or a
    subgroup: refused in one line naming it, before the charge and before any row is read (the arm counts
    included); the same request without it is answered, charged once."""
    op, what, key, change = NESTED[case]
    party = _party(tmp_path)
    error = refused_unread(party, hostile_request(op, **change({key: 0.0})), f"^{what} option '{key}' is not one "
                           "this party applies")
    assert "fix: drop it, or run the analyst's collabcausal version" in str(error)
    assert _charges(party) == 0
    party.handle(hostile_request(op, **change({})))
    assert _charges(party) == 1
