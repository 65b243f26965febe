"""The feature map's specification (estimators/dp/effects/design.py): what a party parses from a request."""

from __future__ import annotations

import json

import pytest

from collabcausal.errors import InputError
from collabcausal.estimators.dp.effects.design import SPEC_KEYS, FeatureMap

FM = FeatureMap(((0.0, 10.0), (-1.0, 1.0)), (0.0, 5.0), n_sites=3)


def test_the_accepted_keys_are_what_to_spec_emits_and_the_spec_survives_json():
    spec = FM.to_spec()
    assert set(spec) == SPEC_KEYS
    assert FeatureMap.from_spec(json.loads(json.dumps(spec))) == FM


@pytest.mark.parametrize("extra", [{"n_site": 2}, {"clip_outcome": False}, {"outcome_range_v7": [0, 1]}])
def test_a_design_key_the_party_does_not_apply_is_refused_by_name(extra):
    """A misspelling or a newer analyst's option, beside the three keys the map needs: refused, not left aside."""
    (key,) = extra
    with pytest.raises(InputError, match=f"^dp_effects design option '{key}' is not one this party applies "
                                         r"\(bounds, n_sites, outcome_range\); fix: drop it"):
        FeatureMap.from_spec(FM.to_spec() | extra)
