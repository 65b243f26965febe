"""Vertical dp_effects through Party.handle: the study equals the plaintext twin; each party is charged each release
before it computes, and only once; a request it refuses costs nothing."""

from __future__ import annotations

import math

import numpy as np
import pytest
from vertical_parties import STUDY, spent, world

from collabcausal.analyst.dp_effects_vertical import vertical_effects_results
from collabcausal.errors import InputError, PolicyError
from collabcausal.estimators.dp.effects.design import FeatureMap
from collabcausal.estimators.dp.effects.vertical import ColumnGroups
from collabcausal.estimators.dp.zcdp import zcdp_epsilon, zcdp_rho
from collabcausal.messages import Message
from collabcausal.protocol.inprocess import InProcessGrid
from collabcausal.simulations.vertical_simulation import RowGroup, vertical_study

GROUPS = ColumnGroups(((0, 1, 2), (3, 4, 5)))


def _run(w):
    return vertical_effects_results(InProcessGrid([w.label, w.other]), w.spec, STUDY, [("hospital", "registry")],
                                    ["hospital"])


def test_the_study_over_party_operations_is_the_twins(tmp_path) -> None:
    """At eps 1000 (noise sd 9e-4 on the estimate) the parties' encrypted study and the plaintext twin on the same
    subjects agree to 5 sd of their noise difference (measured 0.66 sd); each party's ledger holds exactly the study's
    (epsilon, delta), and the report names each party's columns."""
    w = world(tmp_path, epsilon=1000.0)
    report = _run(w)
    row = report["estimates"]["aipw-ate"]
    twin = vertical_study([RowGroup((w.X[:, :3], w.X[:, 3:]), w.T, w.Y)], GROUPS, w.spec, rng=np.random.default_rng(0))
    assert abs(row["estimate"] - twin.effect.estimate) < 5 * math.sqrt(2) * row["dp_floor"]
    assert row["se"] == pytest.approx(twin.effect.se, rel=0.2)
    assert row["ci_low"] < row["estimate"] < row["ci_high"]
    for party in (w.label, w.other):
        assert spent(party) == pytest.approx(1000.0, rel=1e-6)
    assert report["dp_effects"]["column_groups"] == {"hospital": ["a0", "a1", "a2"], "registry": ["b0", "b1", "b2"]}


def _columns_request(w, **changes) -> Message:
    (rho, delta), _ = w.spec.budgets
    fm = FeatureMap(w.spec.bounds, w.spec.outcome_range, 1)
    params = {"study": STUDY, "round": f"{STUDY}/statistics/0", "rho": rho, "delta": delta, "design": fm.to_spec(),
              "site": 0, "column_groups": [["a0", "a1", "a2"], ["b0", "b1", "b2"]], "parties": ["hospital", "registry"],
              "n_subjects": w.label.table.n_subjects}
    return Message("vertical_statistics_columns", params | changes)


def test_the_key_owner_is_charged_when_it_encrypts_and_the_evaluator_once_the_columns_verify(tmp_path) -> None:
    """The statistics round step by step: L pays its rho when it encrypts, P pays the same rho when it totals, L's
    open costs nothing more and a second open of the round is refused."""
    w = world(tmp_path)
    request = _columns_request(w)
    rho = request.params["rho"]
    columns = w.label.handle(request)
    assert spent(w.label) == pytest.approx(zcdp_epsilon(rho, request.params["delta"]))
    assert spent(w.other) == 0.0
    relayed = dict(request.params) | {k: columns.params[k] for k in ("chunks", "context_advertisement",
                                                                     "columns_advertisement")}
    totals = w.other.handle(Message("vertical_statistics_totals", relayed, dict(columns.arrays)))
    assert spent(w.other) == pytest.approx(spent(w.label))
    before = spent(w.label)
    opening = Message("vertical_statistics_open", {"study": STUDY, "round": request.params["round"],
                                                   "totals_advertisement": totals.params["totals_advertisement"]},
                      dict(totals.arrays))
    values = w.label.handle(opening).array("values")
    assert values.shape == (2 * 28 + 2 * 7,) and np.isfinite(values).all()
    assert spent(w.label) == before
    with pytest.raises(PolicyError, match="closed"):
        w.label.handle(opening)


@pytest.mark.parametrize(("change", "error", "match"), [
    ({"parties": ["registry", "hospital"]}, PolicyError, "not the label holder"),
    ({"column_groups": [["a0", "a1", "zz"], ["b0", "b1", "b2"]]}, InputError, "zz"),
    ({"n_subjects": 999}, PolicyError, "align the row group"),
    ({"column_groups": [[c] for c in "abcdefghi"], "parties": ["hospital", *"bcdefghi"]}, InputError,
     "2 to 8 column groups"),
    ({"column_groups": [["a0", "a0", "a2"], ["b0", "b1", "b2"]]}, InputError, "twice"),
    ({"delta": 0.5}, InputError, "delta"),
    ({"round": ""}, InputError, "round"),
])
def test_a_malformed_request_is_refused_before_any_charge(tmp_path, change, error, match) -> None:
    """Each public term is checked against the party's table before its ledger is touched."""
    w = world(tmp_path)
    with pytest.raises(error, match=match):
        w.label.handle(_columns_request(w, **change))
    assert spent(w.label) == 0.0


def test_a_round_id_encrypts_once(tmp_path) -> None:
    """A round's key encrypts once: the same round id again is refused uncharged."""
    w = world(tmp_path)
    w.label.handle(_columns_request(w))
    charged = spent(w.label)
    with pytest.raises(PolicyError, match="already encrypted"):
        w.label.handle(_columns_request(w))
    assert spent(w.label) == charged


def test_the_study_budget_is_the_zcdp_sum_of_both_releases(tmp_path) -> None:
    """Both releases' rho add to the study's: zcdp_rho(epsilon, delta) (docs/dp-effects.md)."""
    w = world(tmp_path)
    (rho_n, _), (rho_s, _) = w.spec.budgets
    assert rho_n + rho_s == pytest.approx(zcdp_rho(1.0, 1e-6))


def test_a_request_over_the_budget_is_refused_uncharged(tmp_path) -> None:
    """A ledger holding less than the release asks refuses it before anything is encrypted."""
    from collabcausal.errors import BudgetExceededError

    w = world(tmp_path)
    request = _columns_request(w, rho=w.spec.budgets[0][0] * 40)
    with pytest.raises(BudgetExceededError):
        w.label.handle(request)
    assert spent(w.label) == 0.0 and not w.label.vertical_rounds


def test_a_party_without_a_certificate_is_refused_uncharged_naming_mutual_tls(tmp_path) -> None:
    """The vertical rounds sign every ciphertext: a party with no study certificate refuses, and the fix is mutual TLS
    (not "secure_aggregation = false", which does not apply)."""
    w = world(tmp_path)
    w.label.secagg_identity = None
    with pytest.raises(PolicyError, match="mutual TLS") as caught:
        w.label.handle(_columns_request(w))
    assert "secure_aggregation = false" not in str(caught.value)
    assert spent(w.label) == 0.0
