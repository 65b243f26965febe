"""A party's policy refuses whatever it does not allow, in process as over gRPC."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

import collabcausal.party  # noqa: F401  (registers the operations)
from collabcausal.errors import ConfigError, PolicyError
from collabcausal.messages import Message
from collabcausal.party import Party, PartyTable
from collabcausal.party.operations import registered, release_kinds
from collabcausal.party.policy import PartyPolicy, effective_guarantee

OPS = ("describe", "weighted_moments")


def _party(policy: PartyPolicy, n: int = 40, columns=("a", "b")) -> Party:
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"a": rng.normal(size=n), "b": rng.normal(size=n), "c": rng.normal(size=n)})
    return Party("h", PartyTable.from_frame(frame, list(columns), min_subjects=1), policy=policy)


def _moments(arms, weights) -> Message:
    return Message("weighted_moments", {}, {"arms": np.asarray(arms), "weights": np.asarray(weights, dtype=float)})


def test_allowed_operation_runs():
    party = _party(PartyPolicy(OPS, ["a", "b"], min_subjects=10))
    assert party.handle(Message("describe")).params["n_subjects"] == 40


def test_operation_not_listed_is_refused():
    party = _party(PartyPolicy(["describe"], ["a", "b"]))
    with pytest.raises(PolicyError, match="does not allow the operation 'weighted_moments'"):
        party.handle(_moments(np.arange(40) % 2, np.ones(40)))


def test_table_with_a_column_outside_the_policy_is_refused():
    party = _party(PartyPolicy(OPS, ["a"]))
    with pytest.raises(PolicyError, match="does not allow the column 'b'"):
        party.handle(Message("describe"))


def test_request_naming_a_forbidden_column_is_refused():
    party = _party(PartyPolicy(["dp_count"], ["a", "b"]))
    with pytest.raises(PolicyError, match="column 'c'"):
        party.handle(Message("dp_count", {"epsilon": 1.0, "columns": ["a", "c"]}))


def test_table_below_the_minimum_subjects_is_refused():
    party = _party(PartyPolicy(OPS, ["a", "b"], min_subjects=50))
    with pytest.raises(PolicyError, match="cover only 40 subjects, below its minimum of 50"):
        party.handle(Message("describe"))


def test_one_hot_weights_that_would_reveal_a_subject_are_refused():
    party = _party(PartyPolicy(OPS, ["a", "b"], min_subjects=5))
    weights = np.zeros(40)
    weights[[0, 1]] = 1.0
    with pytest.raises(PolicyError, match=re.escape("arm 0 of the weights (distinct subjects of non-negligible")):
        party.handle(_moments(np.arange(40) % 2, weights))
    reply = party.handle(_moments(np.arange(40) % 2, np.ones(40)))
    assert reply.operation == "weighted_moments"


def test_weights_shaped_n_by_1_are_refused_not_flattened():
    party = _party(PartyPolicy(OPS, ["a", "b"], min_subjects=5))
    weights = np.zeros((40, 1))
    weights[0] = 1.0
    with pytest.raises(PolicyError, match=r"weights has shape \(40, 1\).*not one number per requested row \(k, 40\)"):
        party.handle(_moments(np.arange(40) % 2, weights))
    with pytest.raises(PolicyError, match=re.escape("arms has shape (40, 1)")):
        party.handle(_moments((np.arange(40) % 2)[:, None], np.ones(40)))


def test_negligible_weights_on_the_others_do_not_count():
    # weight 1 on subject 0 and 1e-300 on the other arm-0 subjects describes subject 0 alone
    party = _party(PartyPolicy(OPS, ["a", "b"], min_subjects=5))
    weights = np.full(40, 1e-300)
    weights[0] = weights[1] = 1.0
    with pytest.raises(PolicyError, match=r"arm 0 .* cover only 1 subjects"):
        party.handle(_moments(np.arange(40) % 2, weights))


def test_repeated_rows_count_once_per_subject_in_each_arm():
    # 20 copies of subject 0 plus 3 other subjects in arm 0: four distinct subjects, below 5
    party = _party(PartyPolicy(OPS, ["a", "b"], min_subjects=5))
    rows = np.r_[np.zeros(20, dtype=np.int64), np.arange(1, 21)]
    arms = np.r_[np.zeros(20, dtype=np.int64), np.zeros(3, dtype=np.int64), np.ones(17, dtype=np.int64)]
    with pytest.raises(PolicyError, match=r"arm 0 .* cover only 4 subjects"):
        party.handle(Message("weighted_moments", {}, {"rows": rows, "arms": arms, "weights": np.ones(40)}))


def test_resample_with_too_few_distinct_subjects_is_refused():
    party = _party(PartyPolicy(OPS, ["a", "b"], min_subjects=5))
    rows = np.array([3, 3, 3, 4, 4] * 8, dtype=np.int64)
    with pytest.raises(PolicyError, match="the requested rows cover only 2 subjects"):
        party.handle(Message("weighted_moments", {}, {"rows": rows, "arms": np.arange(40) % 2, "weights": np.ones(40)}))


def test_dp_operation_without_a_ledger_is_refused():
    party = _party(PartyPolicy(["describe", "dp_count"], ["a", "b"]))
    with pytest.raises(PolicyError, match="no privacy budget for 'dp_count'"):
        party.handle(Message("dp_count", {"epsilon": 1.0}))


@pytest.mark.parametrize("bad", [0, -3, 2.5, True])
def test_min_subjects_must_be_a_positive_integer(bad):
    with pytest.raises(ConfigError, match="min_subjects"):
        PartyPolicy(OPS, ["a"], min_subjects=bad)


def _representation(n_components, n_anchors=50, study="s") -> Message:
    params = {"study": study, "n_anchors": n_anchors, "anchor_ranges": {"a": [-4, 4], "b": [-4, 4]},
              "n_components": n_components}
    return Message("dc_representation", params)


def _dc_party(**rules) -> Party:
    party = _party(PartyPolicy(["dc_representation"], ["a", "b"], min_subjects=10, **rules))
    party.anchor_key = bytes(32)
    return party


def test_full_rank_representation_is_refused_by_default_and_allowed_by_opt_in():
    rule = "at most 1 components \\(fewer than its 2 covariates unless allow_full_rank\\)"
    with pytest.raises(PolicyError, match=rule):
        _dc_party().handle(_representation(2))
    assert _dc_party().handle(_representation(1)).arrays["x_tilde"].shape == (40, 1)
    assert _dc_party(allow_full_rank=True).handle(_representation(2)).arrays["x_tilde"].shape == (40, 2)


def test_max_components_and_variance_fractions():
    with pytest.raises(PolicyError, match="max_components"):
        _dc_party(allow_full_rank=True, max_components=1).handle(_representation(2))
    with pytest.raises(PolicyError, match="variance fraction"):
        _dc_party().handle(_representation(0.99))


@pytest.mark.parametrize("r", [9, 2 * 10**8])
def test_anchor_rows_outside_the_bounds_are_refused_before_any_work(r):
    with pytest.raises(PolicyError, match=f"accepts 10 to 1000000 anchor rows, the study asked for {r}"):
        _dc_party().handle(_representation(1, n_anchors=r))


def test_representation_requests_per_study_are_limited_and_renaming_the_study_does_not_reset_them():
    """A party that names no study counts every request against one limit (issue 22, item 1)."""
    party = _dc_party(max_representation_requests=3)
    for _ in range(3):
        party.handle(_representation(1))
    joined_none = r"answered 3 representation requests in any study \(it joined none by name\)"
    with pytest.raises(PolicyError, match=joined_none):
        party.handle(_representation(1))
    with pytest.raises(PolicyError, match="answered 3 representation requests in any study"):
        party.handle(_representation(1, study="other"))


def test_a_party_bound_to_its_study_refuses_a_request_naming_another():
    party = _dc_party(max_representation_requests=3)
    party.study = "s"
    with pytest.raises(PolicyError, match="request names study 'other' but party h joined study 's'"):
        party.handle(_representation(1, study="other"))
    assert party.handle(_representation(1)).arrays["x_tilde"].shape == (40, 1)


def test_bad_reduction_rules_are_config_errors():
    with pytest.raises(ConfigError, match="min_anchors 50 exceeds max_anchors 20"):
        PartyPolicy(["dc_representation"], ["a"], min_anchors=50, max_anchors=20)
    with pytest.raises(ConfigError, match="max_components must be a positive integer"):
        PartyPolicy(["dc_representation"], ["a"], max_components=0)


@pytest.mark.parametrize("dp", ["dp_representation", "dp_weighted_moments", "dp_sum", "dp_histogram"])
@pytest.mark.parametrize("exact", ["dc_representation", "weighted_moments"])
def test_a_policy_answering_a_dp_operation_refuses_every_exact_row_level_one_unless_it_opts_out(dp, exact):
    """Issue 22, item 6: the guarantee is the weakest thing a party answers; weighted_moments beside
    dp_weighted_moments, or dc_representation beside dp_sum, used to be accepted."""
    with pytest.raises(ConfigError, match=f"the DP operation '{dp}' and the exact row-level '{exact}'") as caught:
        PartyPolicy(["describe", dp, exact], ["a", "b"])
    assert "allow_plain_with_dp = true" in str(caught.value) and "\n" not in str(caught.value)
    opted_out = PartyPolicy(["describe", dp, exact], ["a", "b"], allow_plain_with_dp=True)
    guarantee = effective_guarantee(opted_out.operations, allow_plain_with_dp=True, epsilon=1.0, delta=1e-6)
    assert guarantee.startswith(f"none: besides its DP operations it answers the exact row-level {exact}")


def test_which_operations_are_exact_row_level_or_dp_is_declared_once_in_the_registry():
    private, exact = release_kinds(registered("collabcausal"))
    assert exact == ("dc_representation", "weighted_moments")
    assert {"dp_representation", "dp_weighted_moments", "dp_sum", "dp_histogram", "dp_discover"} <= set(private)
    assert not set(private) & set(exact)
    assert release_kinds(["describe", "align", "aligned_ids", "no_such_operation"]) == ((), ())


@pytest.mark.parametrize(
    ("operations", "epsilon", "expected"),
    [
        (["describe", "dp_representation", "dp_weighted_moments"], 1.0, "(1, 1e-06)-DP under substitution of one"),
        (["describe", "dc_representation", "weighted_moments"], 1.0, "none: it answers the exact row-level"),
        (["describe", "dc_representation"], None, "none: no [privacy] budget"),
    ],
)
def test_the_effective_guarantee_is_the_weakest_thing_the_party_answers(operations, epsilon, expected):
    assert effective_guarantee(operations, allow_plain_with_dp=False, epsilon=epsilon, delta=1e-6).startswith(expected)


def test_later_anchor_blocks_of_a_request_are_not_counted_but_a_new_fit_is():
    """A block of anchor rows past row 0 is served from the fit of the same request: no new representation request."""
    party = _dc_party(max_representation_requests=1)
    first = party.handle(Message("dc_representation", {**_representation(1).params, "anchor_rows": [0, 20]}))
    later = [
        party.handle(Message("dc_representation", {**_representation(1).params, "anchor_rows": [lo, hi]}))
        for lo, hi in ((20, 35), (35, 50))
    ]
    whole = np.vstack([first.arrays["a_tilde"], *(reply.arrays["a_tilde"] for reply in later)])
    assert whole.shape == (50, 1)
    with pytest.raises(PolicyError, match="answered 1 representation requests"):
        party.handle(_representation(1))
