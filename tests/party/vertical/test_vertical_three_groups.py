"""Three parties holding different covariates of the same subjects: the study over party operations equals the
plaintext twin, every party is charged each release once, and the coordinator relays only sealed or signed
ciphertexts."""

from __future__ import annotations

import math

import numpy as np
import pytest
from vertical_parties import STUDY, spent, three_parties

from collabcausal.analyst.dp_effects_vertical import vertical_effects_results
from collabcausal.estimators.dp.effects.vertical import ColumnGroups
from collabcausal.protocol.inprocess import InProcessGrid
from collabcausal.simulations.vertical_simulation import RowGroup, vertical_study

GROUPS = ColumnGroups(((0, 1), (2, 3), (4, 5)))


def test_the_three_party_study_over_party_operations_is_the_twins(tmp_path) -> None:
    """At eps 1000 the encrypted three-party study and the plaintext twin on the same subjects agree to 5 sd of
    their noise difference; each ledger holds exactly the study's epsilon; the report names each party's columns and
    counts the sealed ciphertexts it relayed."""
    parties, X, T, Y, spec = three_parties(tmp_path, epsilon=1000.0)
    report = vertical_effects_results(InProcessGrid(parties), spec, STUDY, [("hospital", "registry", "insurer")],
                                      ["hospital"], batch_rows=1000)
    row = report["estimates"]["aipw-ate"]
    twin = vertical_study([RowGroup((X[:, :2], X[:, 2:4], X[:, 4:]), T, Y)], GROUPS, spec,
                          rng=np.random.default_rng(0))
    assert abs(row["estimate"] - twin.effect.estimate) < 5 * math.sqrt(2) * row["dp_floor"]
    assert row["se"] == pytest.approx(twin.effect.se, rel=0.2)
    for party in parties:
        assert spent(party) == pytest.approx(1000.0, rel=1e-6)
    assert report["dp_effects"]["column_groups"] == {"hospital": ["a0", "a1"], "registry": ["a2", "b0"],
                                                     "insurer": ["b1", "b2"]}
    assert report["dp_effects"]["relayed_bytes"]["scores: sealed parts"] > 0
