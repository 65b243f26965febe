"""The dp_effects study at the coordinator: estimates, noise accounting, refusals.

Seeded data; the DP noise comes from OpenDP (OS entropy). Accuracy checks run at epsilon = 1e4 per
party (both releases share it in zCDP: rho = zcdp_rho(1e4, 1e-6)), where the noise sd of each released
sum is below 1e-2 of its sensitivity. The private AIPW estimate is held within 2 SEs of the non-private
peer: over 20 runs with numpy draws of the same noise their difference used -3.8% of that bound with
sd 0.5% (the nuisances differ a little), so a false failure needs a draw about 190 sds out.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from collabcausal.analyst.dp_effects import DPEffectsSpec, dp_effects_results
from collabcausal.errors import InputError, StudyFailedError
from collabcausal.estimators.dp.zcdp import zcdp_epsilon, zcdp_rho
from collabcausal.ledger import PrivacyLedger
from collabcausal.messages import Message
from collabcausal.protocol.inprocess import InProcessGrid
from collabcausal.secagg import simulation_identities
from collabcausal.simulations.dp_effects_benchmark import federated_aipw, site_parties
from collabcausal.simulations.multisite import OUTCOME_RANGE, covariate_bounds, simulate_sites

SITES = simulate_sites(3000, "binary", np.random.default_rng(5))
COLUMNS = tuple(f"x{j}" for j in range(10))


def _spec(epsilon: float, **changes) -> DPEffectsSpec:
    spec = DPEffectsSpec(epsilon=epsilon, delta=1e-6, outcome_range=OUTCOME_RANGE["binary"], trim=0.1,
                         columns=COLUMNS, bounds=tuple(covariate_bounds()))
    return replace(spec, **changes)


def _run(tmp_path, spec: DPEffectsSpec, grid_class=InProcessGrid) -> dict:
    parties = site_parties(SITES, str(tmp_path), spec.epsilon, spec.delta)
    if spec.secure_aggregation:
        from collabcausal.party.secagg import attach_identities

        attach_identities(parties, simulation_identities("s", [p.name for p in parties]))
    return dp_effects_results(grid_class(parties), spec, "s", [p.name for p in parties])


@pytest.mark.parametrize("secure", [True, False], ids=["secure aggregation", "per-party releases"])
def test_at_a_large_epsilon_the_private_estimate_is_the_non_private_one(tmp_path, secure):
    report = _run(tmp_path, _spec(1e4, secure_aggregation=secure, estimators=("aipw", "ipw"), estimands=("ate", "att")))
    ate, peer = report["estimates"]["aipw-ate"], federated_aipw(SITES)
    assert abs(ate["estimate"] - peer.estimate) < 2 * max(ate["se"], peer.se)  # same data, nuisances differ a little
    assert ate["se"] == pytest.approx(peer.se, rel=0.25)
    assert {"aipw-ate", "aipw-att", "ipw-ate", "ipw-att"} <= set(report["estimates"])
    stated = {"epsilon": 1e4, "delta": 1e-6, "rho": zcdp_rho(1e4, 1e-6)}
    assert report["privacy"] == {f"site{i}": pytest.approx(stated, rel=1e-9) for i in range(4)}
    assert all(p["epsilon"] <= 1e4 for p in report["privacy"].values())
    assert bool(report["per_party"]) is not secure  # with secure aggregation no party's own release is seen


@pytest.mark.parametrize("secure", [True, False], ids=["secure aggregation", "per-party releases"])
def test_each_party_is_charged_the_study_budget_as_two_zcdp_releases(tmp_path, secure):
    epsilon, delta = 1.0, 1e-6
    spec = _spec(epsilon, secure_aggregation=secure)
    report = _run(tmp_path, spec)
    for i in range(4):
        ledger = PrivacyLedger.from_file(tmp_path / f"site{i}.sqlite")
        assert ledger.spent() == pytest.approx((epsilon, delta), rel=1e-9)
        charges = ledger.history()
        assert [c.operation for c in charges] == ["dp_effects_statistics", "dp_effects_scores"]
        assert all(c.rho is not None and c.partition is None and c.delta == delta / 2 for c in charges)
        assert charges[0].rho == pytest.approx(spec.nuisance_share * zcdp_rho(epsilon, delta), rel=1e-12)
        assert sum(c.rho for c in charges) == pytest.approx(zcdp_rho(epsilon, delta), rel=1e-12)
        assert ledger.spent() == pytest.approx((zcdp_epsilon(sum(c.rho for c in charges), delta), delta), rel=1e-12)
        stated = report["privacy"][f"site{i}"]  # the report states what the ledger charged
        assert (stated["epsilon"], stated["delta"]) == pytest.approx(ledger.spent(), rel=1e-12)


def test_secure_aggregation_lowers_the_noise_by_about_sqrt_three_with_four_parties(tmp_path):
    (tmp_path / "a").mkdir(), (tmp_path / "b").mkdir()
    secure = _run(tmp_path / "a", _spec(1.0, secure_aggregation=True))["dp_effects"]["scores_noise_sd"]
    plain = _run(tmp_path / "b", _spec(1.0, secure_aggregation=False))["dp_effects"]["scores_noise_sd"]
    ratio = plain["aipw_ate"] / secure["aipw_ate"]  # sqrt(4) sigma vs sqrt(4 / 3) sigma, discretization aside
    assert 1.55 < ratio < 1.80


def test_the_interval_counts_the_nuisance_noise_measured_by_replicates(tmp_path):
    (tmp_path / "a").mkdir(), (tmp_path / "b").mkdir(), (tmp_path / "c").mkdir()
    counted = _run(tmp_path / "a", _spec(1.0, secure_aggregation=False))["estimates"]["aipw-ate"]
    parts = ("sampling_var", "noise_var", "variance_uncertainty", "nuisance_var")
    assert counted["se"] ** 2 == pytest.approx(sum(counted[k] for k in parts))
    assert counted["nuisance_var"] >= 0.0
    without = _run(tmp_path / "b", _spec(1.0, secure_aggregation=False, nuisance_replicates=0))["estimates"]
    assert without["aipw-ate"]["nuisance_var"] == 0.0
    # at a huge epsilon the statistics are nearly exact, so the refits barely move the estimate
    exact = _run(tmp_path / "c", _spec(1e4, secure_aggregation=False))["estimates"]["aipw-ate"]
    assert exact["nuisance_var"] < 1e-3 * exact["se"] ** 2


class LyingGrid(InProcessGrid):
    """Parties whose replies state a noise sd half the one the request implies."""

    def send_and_receive(self, requests, *, timeout=None):
        replies = super().send_and_receive(requests, timeout=timeout)
        return {n: Message(r.operation, r.params | {"sigma": r.params["sigma"] / 2}, r.arrays)
                if "sigma" in r.params else r for n, r in replies.items()}


def test_a_reply_stating_another_noise_than_the_request_implies_fails_the_study(tmp_path):
    with pytest.raises(StudyFailedError, match="stated noise sd"):
        _run(tmp_path, _spec(1.0, secure_aggregation=False), LyingGrid)


def test_a_party_missing_a_covariate_fails_the_study_naming_it(tmp_path):
    spec = _spec(1.0, columns=(*COLUMNS[:-1], "x99"), bounds=tuple(covariate_bounds()))
    with pytest.raises(StudyFailedError, match="x99"):
        _run(tmp_path, spec)


@pytest.mark.parametrize(("row_groups", "match"), [
    ([{"parties": [f"p1{i}" for i in range(9)]}], "at most 8 parties per row group"),
    ([{"parties": ["p11", "p12"]}, {"parties": ["p21"]}], "not a mix"),
])
def test_row_groups_of_nine_parties_or_a_mix_are_refused_naming_the_fix(row_groups, match):
    """Column groups take a label holder and one to seven other parties per row group, every row group alike
    (docs/dp-effects-vertical.md); two or three parties per row group are accepted
    (tests/analyst/test_analyst_dp_effects_vertical.py)."""
    from collabcausal.analyst.config import StudyFile

    doc = {"study": {"id": "s", "kind": "dp_effects", "out": "out"},
           "server": {"address": "127.0.0.1:0", "insecure": True},
           "anchor_ranges": {"a": [0, 1], "b": [0, 1]},
           "row_groups": row_groups,
           "dp_effects": {"epsilon": 1.0, "outcome_range": [0, 1], "trim": 0.1}}
    with pytest.raises(ValueError, match=match):
        StudyFile.model_validate(doc)
    StudyFile.model_validate(doc | {"row_groups": [{"parties": ["p11", "p12"], "label_holder": "p12"}]})
    StudyFile.model_validate(doc | {"row_groups": [{"parties": ["p11", "p12", "p13"]}]})


def test_parties_reading_their_tables_out_of_core_give_the_in_memory_study(tmp_path):
    """Each site's table as a directory of Parquet files (ChunkedTable); secure aggregation; eps 1e4."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from collabcausal.party.chunked_table import ChunkedTable
    from collabcausal.party.secagg import attach_identities

    spec = _spec(1e4, secure_aggregation=True, estimators=("aipw",), estimands=("ate",))
    parties = site_parties(SITES, str(tmp_path), spec.epsilon, spec.delta)
    for i, (party, site) in enumerate(zip(parties, SITES, strict=True)):
        folder = tmp_path / f"site{i}"
        folder.mkdir()
        columns = {c: site.X[:, j] for j, c in enumerate(COLUMNS)} | {"t": site.T, "y": site.Y}
        pq.write_table(pa.table(columns), folder / "part-0.parquet", row_group_size=97)
        party.table = ChunkedTable.open(folder, COLUMNS, treatment="t", outcome="y", workers=2)
    attach_identities(parties, simulation_identities("s", [p.name for p in parties]))
    report = dp_effects_results(InProcessGrid(parties), spec, "s", [p.name for p in parties])
    ate, peer = report["estimates"]["aipw-ate"], federated_aipw(SITES)
    assert abs(ate["estimate"] - peer.estimate) < 2 * max(ate["se"], peer.se)
    assert ate["se"] == pytest.approx(peer.se, rel=0.25)
    assert all(len(p.table.blocks) > 1 for p in parties)


def test_secure_aggregation_bounds_the_projection_entries_by_n_times_the_largest_weight(tmp_path, monkeypatch):
    """The projection's weights can exceed 1, so an entry can move by more than 1 per subject: the wrap-around check
    of secure aggregation gets ``n max_j w_j``, at the party and at the analyst (``release_reach``)."""
    import collabcausal.analyst.dp_effects as analyst_side
    import collabcausal.analyst.dp_projection as allocation
    import collabcausal.party.dp_effects as party_side

    bounds: dict[str, list[float]] = {"party": [], "analyst": []}
    masked, secure_round = party_side.masked_release, analyst_side._secure_round

    def record(side, release):
        def recorded(*args, **kwargs):
            bounds[side].append(kwargs["value_bound"])
            return release(*args, **kwargs)
        return recorded

    monkeypatch.setattr(party_side, "masked_release", record("party", masked))
    monkeypatch.setattr(analyst_side, "_secure_round", record("analyst", secure_round))
    monkeypatch.setattr(allocation, "noise_trace_weights", lambda *args: (1.3, 0.5))  # squares 1.94 <= 2
    sites = simulate_sites(400, "binary", np.random.default_rng(5))
    spec = _spec(4.0, secure_aggregation=True, modifiers=("x0", "x1"), nuisance_replicates=0)
    parties = site_parties(sites, str(tmp_path), spec.epsilon, spec.delta)
    from collabcausal.party.secagg import attach_identities

    attach_identities(parties, simulation_identities("s", [p.name for p in parties]))
    dp_effects_results(InProcessGrid(parties), spec, "s", [p.name for p in parties])
    n = max(len(s.T) for s in sites)
    assert bounds["analyst"] == [float(n), pytest.approx(1.3 * n)]  # statistics, then scores
    assert bounds["party"][len(sites):] == [pytest.approx(1.3 * len(s.T)) for s in sites]


@pytest.mark.parametrize("secure", [True, False], ids=["secure aggregation", "per-party releases"])
def test_a_cross_weight_reaches_the_parties_and_the_analyst_divides_it_out(tmp_path, secure):
    """At a large epsilon the weighted release gives the unweighted one's estimate: the analyst reads ``b_t`` at its
    own size (dividing by the weight) and the parties were charged the same budget."""
    spec = _spec(1e4, secure_aggregation=secure, cross_weight=2.0)
    parties = site_parties(SITES, str(tmp_path), spec.epsilon, spec.delta)
    if secure:
        from collabcausal.party.secagg import attach_identities

        attach_identities(parties, simulation_identities("s", [p.name for p in parties]))
    report = dp_effects_results(InProcessGrid(parties), spec, "s", [p.name for p in parties])
    ate, peer = report["estimates"]["aipw-ate"], federated_aipw(SITES)
    assert abs(ate["estimate"] - peer.estimate) < 2 * max(ate["se"], peer.se)
    for party in parties:
        first = party.ledger.history()[0]
        assert first.details["cross_weight"] == 2.0 and first.rho == pytest.approx(spec.budgets[0][0])


@pytest.mark.parametrize("weight", [0.0, float("nan"), 9.0])
def test_a_cross_weight_out_of_range_is_refused_before_anything_is_sent(tmp_path, weight):
    with pytest.raises(InputError, match="cross_weight"):
        dp_effects_results(InProcessGrid([]), _spec(1.0, cross_weight=weight), "s", ["a"])
