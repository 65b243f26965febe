"""The party side of secure aggregation: round keys, checks before the charge, masked calibrated releases.

The noise check uses epsilon = 1e4 per release (the zCDP rho = zcdp_rho(1e4, 1e-6); share sd below 1e-2 in
value units); its tolerance is
8 sds of the summed noise (two-sided tail 1e-15 per entry).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from unread_rows import refused_unread

from collabcausal.errors import IdentityError, PolicyError
from collabcausal.estimators.dp.effects.design import FeatureMap
from collabcausal.estimators.dp.effects.release import party_statistics
from collabcausal.estimators.dp.effects.statistics import statistics_length, statistics_sensitivity
from collabcausal.estimators.dp.zcdp import zcdp_epsilon, zcdp_rho
from collabcausal.ledger import PrivacyLedger
from collabcausal.messages import Message
from collabcausal.party import Party, PartyTable
from collabcausal.party.dp_effects import STATISTICS
from collabcausal.party.secagg import SECAGG_KEYS, attach_identities
from collabcausal.secagg import KEYS_OPERATION as KEYS
from collabcausal.secagg import SCALE_BITS, aggregate, decode, integer_sensitivity, share_sigma, simulation_identities

N = 120
COLUMNS = ["a", "b"]
FM = FeatureMap(((0.0, 10.0), (-1.0, 1.0)), (0.0, 5.0), n_sites=3)
NAMES = ["h1", "h2", "h3"]
RHO = zcdp_rho(1e4, 1e-6)


def _parties(tmp_path, names=NAMES, study="s") -> list[Party]:
    parties = []
    for i, name in enumerate(names):
        rng = np.random.default_rng(i)
        frame = pd.DataFrame({"a": rng.uniform(0, 10, N), "b": rng.uniform(-1, 1, N), "t": rng.integers(0, 2, N),
                              "y": rng.uniform(0, 5, N)})
        table = PartyTable.from_frame(frame, COLUMNS, treatment="t", outcome="y")
        parties.append(Party(name, table, ledger=PrivacyLedger(tmp_path / f"{name}.sqlite", epsilon=1e5, delta=1e-3)))
    attach_identities(parties, simulation_identities(study, names))
    return parties


def _keys(parties, round_id="r1", study="s") -> list[dict]:
    return [p.handle(Message(KEYS, {"study": study, "round": round_id})).params["advertisement"] for p in parties]


def _masked_request(site: int, advertisements, round_id="r1") -> Message:
    return Message(STATISTICS, {"study": "s", "rho": RHO, "delta": 1e-6, "columns": COLUMNS,
                                "design": FM.to_spec(), "site": site, "n_folds": 1,
                                "secagg": {"round": round_id, "advertisements": advertisements}})


def test_the_sum_of_masked_uploads_is_the_sum_of_the_statistics_plus_the_calibrated_noise(tmp_path):
    parties = _parties(tmp_path)
    ads = _keys(parties)
    uploads = {p.name: p.handle(_masked_request(i, ads)) for i, p in enumerate(parties)}
    length = statistics_length(FM.dim)
    sigma = share_sigma(integer_sensitivity(statistics_sensitivity(FM), length, SCALE_BITS), RHO, 2, length)
    for reply in uploads.values():  # the party calibrates to the verified roster: n_honest = 3 - 1
        assert reply.params["sigma_share"] == pytest.approx(sigma)
        assert (reply.params["n_parties"], reply.params["n_honest"]) == (3, 2)
        assert set(reply.arrays) == {"masked"}
    total = decode(aggregate({n: r.arrays["masked"] for n, r in uploads.items()}, NAMES), SCALE_BITS)
    exact = sum(party_statistics(p.table.covariates, p.table.treatment, p.table.outcome, FM, i,
                                 np.zeros(N, dtype=np.int64), 1).ravel() for i, p in enumerate(parties))
    sd = sigma * math.sqrt(3) / 2.0**SCALE_BITS
    assert np.abs(total - exact).max() < 8 * sd + 1e-6
    for p in parties:
        assert p.ledger.spent() == (zcdp_epsilon(RHO, 1e-6), 1e-6)
        assert [c.rho for c in p.ledger.history()] == [RHO]


def test_the_coordinator_cannot_unmask_a_subset_of_the_uploads(tmp_path):
    parties = _parties(tmp_path)
    ads = _keys(parties)
    uploads = {p.name: p.handle(_masked_request(i, ads)).arrays["masked"] for i, p in enumerate(parties)}
    partial = uploads["h1"] + uploads["h2"]  # h3's masks with h1 and h2 do not cancel
    exact = sum(party_statistics(p.table.covariates, p.table.treatment, p.table.outcome, FM, i,
                                 np.zeros(N, dtype=np.int64), 1).ravel() for i, p in enumerate(parties[:2]))
    assert np.median(np.abs(decode(partial, SCALE_BITS) - exact)) > 1e6


def test_a_party_without_a_certificate_refuses_secure_aggregation_naming_the_fix(tmp_path):
    parties = _parties(tmp_path)
    ads = _keys(parties)
    parties[0].secagg_identity = None
    with pytest.raises(PolicyError, match=r"no study certificate.*secure_aggregation = false"):
        parties[0].handle(Message(KEYS, {"study": "s", "round": "r2"}))
    with pytest.raises(PolicyError, match="no study certificate"):
        parties[0].handle(_masked_request(0, ads))
    assert parties[0].ledger.spent() == (0.0, 0.0)


@pytest.mark.parametrize("tamper", ["unknown round", "other study", "forged key", "lone party", "duplicate"])
def test_a_bad_round_is_refused_before_the_charge(tmp_path, tamper):
    parties = _parties(tmp_path)
    ads = _keys(parties)
    round_id = "r1"
    if tamper == "unknown round":
        round_id = "r9"
    elif tamper == "other study":
        parties[0].handle(Message(KEYS, {"study": "other", "round": "r5"}))
        round_id = "r5"
    elif tamper == "forged key":  # the relay swaps h2's key for one of its own
        ads[1] = ads[1] | {"public_key": "11" * 32}
    elif tamper == "lone party":
        ads = ads[:1]
    elif tamper == "duplicate":
        ads = [ads[0], ads[1], ads[1]]
    with pytest.raises((PolicyError, IdentityError)):
        parties[0].handle(_masked_request(0, ads, round_id=round_id))
    assert parties[0].ledger.spent() == (0.0, 0.0)


@pytest.mark.parametrize("extra", [{"n_honest": 5}, {"advertisement": []}, {"scale_bits": 8, "sigma_share": 0.0}])
def test_a_secagg_key_the_party_does_not_apply_is_refused_unread_and_uncharged_and_the_round_stays_usable(
        tmp_path, extra):
    """A claimed roster size or noise share, or a misspelt field, in the request's ``secagg``: refused in one line
    naming it, before the charge, before any row is read and before the round is touched; the honest request then
    masks under the same round key."""
    parties = _parties(tmp_path)
    ads = _keys(parties)
    hostile = _masked_request(0, ads)
    hostile = Message(STATISTICS, hostile.params | {"secagg": hostile.params["secagg"] | extra})
    assert set(_masked_request(0, ads).params["secagg"]) == SECAGG_KEYS
    named = ", ".join(repr(k) for k in sorted(extra))
    refused_unread(parties[0], hostile, f"^{STATISTICS} secagg options? {named} (is|are) not ones? this party applies "
                                        r"\(advertisements, round\)")
    assert parties[0].handle(_masked_request(0, ads)).params["n_parties"] == 3
    assert len(parties[0].ledger.history()) == 1


def test_a_certificate_from_another_study_ca_is_refused_before_the_charge(tmp_path):
    parties = _parties(tmp_path)
    ads = _keys(parties)
    (tmp_path / "other").mkdir()
    stranger = _parties(tmp_path / "other", names=["h9"])[0]  # its own CA: not this study's
    ads[2] = stranger.handle(Message(KEYS, {"study": "s", "round": "r1"})).params["advertisement"]
    with pytest.raises(IdentityError, match="h9"):
        parties[0].handle(_masked_request(0, ads))
    assert parties[0].ledger.spent() == (0.0, 0.0)


def test_a_round_key_masks_one_release_and_is_made_once(tmp_path):
    parties = _parties(tmp_path)
    ads = _keys(parties)
    parties[0].handle(_masked_request(0, ads))
    with pytest.raises(PolicyError, match="already masked"):
        parties[0].handle(_masked_request(0, ads))  # a second vector under the same masks: the difference leaks
    with pytest.raises(PolicyError, match="already made a key"):
        parties[0].handle(Message(KEYS, {"study": "s", "round": "r1"}))
    assert parties[0].ledger.spent() == pytest.approx((1e4, 1e-6)) and len(parties[0].ledger.history()) == 1


def test_more_advertised_parties_lower_the_share_only_as_far_as_verified_signatures_go(tmp_path):
    """n_honest is the verified roster less one: an unsigned extra advertisement is refused, not counted."""
    parties = _parties(tmp_path, names=["h1", "h2"])
    ads = _keys(parties)
    fake = ads[1] | {"party": "h3"}
    with pytest.raises(IdentityError):
        parties[0].handle(_masked_request(0, [*ads, fake]))
    reply = parties[0].handle(_masked_request(0, ads))
    assert reply.params["n_honest"] == 1


@pytest.mark.parametrize(("names", "minimum"), [(["h1", "h2"], 2), (NAMES, 3), (["h1", "h2", "h3", "h4"], 3)])
def test_simulated_parties_are_pinned_to_each_other(tmp_path, names, minimum):
    parties = _parties(tmp_path, names=names)
    for party in parties:
        identity = party.secagg_identity
        assert identity.peers.min_parties == minimum and sorted(identity.verifier.pins) == sorted(names)
