"""The coordinator's vertical dp_effects study: who holds what is checked before anything is charged, and a party
lost mid-round fails the study in one line that says what was charged, with no value of the round released."""

from __future__ import annotations

from dataclasses import replace

import pytest
from vertical_parties import STUDY, spent, world

from collabcausal.analyst.dp_effects_vertical import check_vertical_spec, party_batch_rows, vertical_effects_results
from collabcausal.errors import InputError, StudyFailedError
from collabcausal.messages import Message
from collabcausal.party import PartyTable
from collabcausal.protocol.inprocess import InProcessGrid


class LosingGrid(InProcessGrid):
    """A grid whose ``lost`` party stops answering at ``operation``."""

    def __init__(self, parties, lost: str, operation: str) -> None:
        super().__init__(parties)
        self.lost, self.operation = lost, operation

    def send_and_receive(self, requests, *, timeout=None):
        for name, message in requests.items():
            if name == self.lost and message.operation == self.operation:
                raise StudyFailedError(f"party {name!r} was lost", "restart it and run the study again")
        return super().send_and_receive(requests, timeout=timeout)


def _run(grid, w, groups=(("hospital", "registry"),), holders=("hospital",)):
    return vertical_effects_results(grid, w.spec, STUDY, groups, holders)


def test_a_party_lost_mid_round_fails_the_study_naming_what_was_charged(tmp_path) -> None:
    """The registry dies before it totals: the study fails naming the round; the hospital paid for its encryption,
    the registry nothing, and no value of the round was released."""
    w = world(tmp_path)
    grid = LosingGrid([w.label, w.other], "registry", "vertical_statistics_totals")
    with pytest.raises(StudyFailedError) as caught:
        _run(grid, w)
    message = str(caught.value)
    assert "registry" in message and "statistics round" in message and "hospital was charged" in message
    assert "reached the coordinator" in message
    assert spent(w.label) > 0 and spent(w.other) == 0.0


@pytest.mark.parametrize(("groups", "holders", "match"), [
    ((("hospital",),), ("hospital",), "takes a label holder and 1 to 7 other parties"),
    ((("registry", "hospital"),), ("registry",), "holds no treatment and outcome"),
])
def test_a_row_group_that_is_not_a_label_holder_and_one_other_party_is_refused_uncharged(tmp_path, groups, holders,
                                                                                          match) -> None:
    w = world(tmp_path)
    with pytest.raises(StudyFailedError, match=match):
        _run(InProcessGrid([w.label, w.other]), w, groups, holders)
    assert spent(w.label) == spent(w.other) == 0.0


def test_batches_shrink_with_the_parties_whose_parts_the_label_holder_receives() -> None:
    """No batch the label holder holds carries more ciphertexts than with two parties; batches stay whole multiples
    of a scores ciphertext's 8,192 slots."""
    assert [party_batch_rows(65_536, k) for k in range(2, 9)] == [65_536, 32_768, 16_384, 16_384, 8192, 8192, 8192]
    assert party_batch_rows(1, 8) == 1


def test_a_covariate_nobody_holds_or_unaligned_rows_are_refused_uncharged(tmp_path) -> None:
    w = world(tmp_path)
    w.spec = replace(w.spec, columns=(*w.spec.columns, "c9"), bounds=(*w.spec.bounds, (0.0, 1.0)))
    with pytest.raises(StudyFailedError, match="holds 'c9'"):
        _run(InProcessGrid([w.label, w.other]), w)
    (tmp_path / "second").mkdir()
    w = world(tmp_path / "second")
    table = w.other.table
    w.other.table = PartyTable.from_arrays(table.covariates[:-5], table.covariate_names)
    with pytest.raises(StudyFailedError, match="align the row group"):
        _run(InProcessGrid([w.label, w.other]), w)
    assert spent(w.label) == spent(w.other) == 0.0


@pytest.mark.parametrize("change", [{"estimands": ("att",)}, {"estimators": ("aipw", "ipw")}, {"n_folds": 2},
                                    {"nuisance": "site"}, {"modifiers": ("a0",)}, {"cross_weight": 2.0},
                                    {"replicate_step": 3.0}])
def test_what_column_groups_do_not_serve_is_refused_before_anything_is_sent(tmp_path, change) -> None:
    w = world(tmp_path)
    with pytest.raises(InputError):
        check_vertical_spec(replace(w.spec, **change))


def test_a_party_stating_another_noise_scale_is_refused(tmp_path) -> None:
    """A reply whose stated sigma is not the one the request implies fails the study, naming the party."""

    class Misstating(InProcessGrid):
        def send_and_receive(self, requests, *, timeout=None):
            replies = super().send_and_receive(requests, timeout=timeout)
            return {p: Message(r.operation, dict(r.params) | ({"sigma": 1e-3} if "sigma" in r.params else {}),
                               dict(r.arrays)) for p, r in replies.items()}

    w = world(tmp_path)
    with pytest.raises(StudyFailedError, match="stated noise sd"):
        _run(Misstating([w.label, w.other]), w)


def test_three_row_groups_open_under_secure_aggregation_and_give_the_twins_study(tmp_path) -> None:
    """Three row groups: each release's key owners open masked, so the coordinator sees only the sum over row groups;
    at eps 1000 the study is the plaintext twin's on the same subjects (to 5 sd of their noise difference), every
    party is charged exactly the study's budget, and the report says secure aggregation held (pinned)."""
    import math

    import numpy as np
    from vertical_parties import grid_world

    from collabcausal.estimators.dp.effects.vertical import ColumnGroups
    from collabcausal.simulations.vertical_simulation import RowGroup, vertical_study

    worlds = grid_world(tmp_path, row_groups=3, n=600, epsilon=1000.0, replicates=1)
    parties = [p for w in worlds for p in (w.label, w.other)]
    report = vertical_effects_results(InProcessGrid(parties), worlds[0].spec, STUDY,
                                      [(w.label.name, w.other.name) for w in worlds], [w.label.name for w in worlds])
    release = report["dp_effects"]
    assert release["secure_aggregation"] is True and not release["secure_aggregation_unpinned"]
    assert not report["warnings"]
    row = report["estimates"]["aipw-ate"]
    twin = vertical_study([RowGroup((w.X[:, :3], w.X[:, 3:]), w.T, w.Y) for w in worlds],
                          ColumnGroups(((0, 1, 2), (3, 4, 5))), worlds[0].spec, rng=np.random.default_rng(0))
    assert abs(row["estimate"] - twin.effect.estimate) < 5 * math.sqrt(2) * max(row["dp_floor"], twin.dp_floor)
    assert row["dp_floor"] < twin.dp_floor  # the key owners' shares are calibrated to the roster, not each alone
    for party in parties:
        assert spent(party) == pytest.approx(1000.0, rel=1e-6)


def test_a_study_too_small_for_its_budget_is_refused_before_any_charge(tmp_path) -> None:
    """As with row groups of one party (dp_effects_feasibility.py): 300 subjects at eps 0.1 would fit the
    nuisances mostly to noise; refused naming the epsilon or n that would pass, nothing charged."""
    from collabcausal.errors import ConfigError

    w = world(tmp_path, n=300, epsilon=0.1)
    with pytest.raises(ConfigError, match="raise \\[dp_effects\\] epsilon to"):
        _run(InProcessGrid([w.label, w.other]), w)
    assert spent(w.label) == spent(w.other) == 0.0
