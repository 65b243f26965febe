"""The round's stages: what each party and the coordinator hold after each, refusals, restart."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import chi2
from secagg_helpers import NAMES, STUDY, run_keys, run_uploads, top_bits_chi2

from collabcausal.errors import IdentityError, InputError, PolicyError, ProtocolError
from collabcausal.secagg import (
    RoundFailed,
    advertise,
    aggregate,
    decode,
    encode,
    masked_contribution,
    noise_share,
)
from collabcausal.secagg.crypto import generate_round_key, public_bytes

F = 16
CHI2_LIMIT = chi2.ppf(1 - 1e-5, 15)
"""Top-4-bit chi-square bound: a uniform sample exceeds it with probability 1e-5 (false failure)."""


def _values(rng, names=NAMES, d=6):
    return {name: rng.uniform(-100, 100, size=d) for name in names}


def test_after_keys_a_party_holds_a_fresh_private_key_and_sends_only_public_values(identities, seeded_keys):
    states, ads = run_keys(identities, NAMES, "1")
    again, _ = run_keys(identities, NAMES, "2")
    for name, ad in zip(NAMES, ads, strict=True):
        assert ad["party"] == name and set(ad) == {"party", "study", "round", "public_key", "certificate", "signature"}
        assert bytes.fromhex(ad["public_key"]) == public_bytes(states[name].private_key)
        assert "PRIVATE" not in ad["certificate"]
        assert public_bytes(again[name].private_key) != public_bytes(states[name].private_key)


def test_masks_cancel_exactly_in_the_sum(identities, seeded_keys):
    values = _values(np.random.default_rng(10))
    states, ads = run_keys(identities, NAMES, "1")
    uploads = run_uploads(identities, states, ads, {n: encode(v, F) for n, v in values.items()})
    total = aggregate(uploads, NAMES)
    expected = np.zeros(6, dtype=np.uint64)
    for v in values.values():
        expected += encode(v, F)
    np.testing.assert_array_equal(total, expected)
    np.testing.assert_allclose(decode(total, F), sum(values.values()), atol=4 * 2.0 ** -(F + 1))


def test_with_noise_shares_the_sum_is_values_plus_the_total_noise(identities, seeded_keys):
    rng = np.random.default_rng(11)
    values = _values(rng)
    noise = {n: noise_share(6, 5.0, rng=rng) for n in NAMES}
    encoded = {n: encode(values[n], F) + noise[n].view(np.uint64) for n in NAMES}
    states, ads = run_keys(identities, NAMES, "1")
    total = aggregate(run_uploads(identities, states, ads, encoded), NAMES)
    exact = sum(np.rint(np.ldexp(v, F)) for v in values.values()) + sum(noise.values())
    np.testing.assert_array_equal(total.view(np.int64), exact.astype(np.int64))


def test_a_single_masked_upload_is_uniform_across_runs(identities, seeded_keys):
    """Party a uploads the same values in 400 rounds; the top 4 bits of its 3,200 upload entries
    are uniform (chi-square, false-failure rate 1e-5 with random keys; seeded here)."""
    value = encode(np.full(8, 42.0), F)
    samples = []
    for r in range(400):
        states, ads = run_keys(identities, NAMES, f"r{r}")
        samples.append(run_uploads(identities, states, ads, {NAMES[0]: value})[NAMES[0]])
    samples = np.concatenate(samples)
    assert top_bits_chi2(samples, 4) < CHI2_LIMIT
    assert not np.any(samples == value[0])


def test_a_hostile_coordinator_sees_only_the_sum(identities, seeded_keys):
    """Two worlds with the same sum, party a's values differing by 1000 and b compensating: the
    coordinator's sum is identical and each upload is uniform in both worlds (a one-time pad:
    u_a = v_a + m_ab + m_ac + m_ad with m_ab uniform, so u_a's law does not depend on v_a). Four
    chi-square checks at 1e-5 each: false-failure rate below 1e-4 with random keys."""
    a, b = NAMES[0], NAMES[1]
    base = _values(np.random.default_rng(12), d=8)
    shift = np.full(8, 1000.0)
    worlds = [base, {**base, a: base[a] + shift, b: base[b] - shift}]
    sums, uploads_of = [], {a: [[], []], b: [[], []]}
    for r in range(200):
        for w, world in enumerate(worlds):
            states, ads = run_keys(identities, NAMES, f"w{w}-r{r}")
            uploading = NAMES if r == 0 else (a, b)
            uploads = run_uploads(identities, states, ads, {n: encode(world[n], F) for n in uploading})
            for name in (a, b):
                uploads_of[name][w].append(uploads[name])
            if r == 0:
                sums.append(aggregate(uploads, NAMES))
    np.testing.assert_array_equal(sums[0], sums[1])
    for name in (a, b):
        for w in (0, 1):
            assert top_bits_chi2(np.concatenate(uploads_of[name][w]), 4) < CHI2_LIMIT


def test_restart_after_a_dropout_gives_the_exact_sum_of_the_rest(identities, seeded_keys):
    """Round 1: four parties advertise, d drops before uploading; aggregate refuses. Round 2 among
    three with fresh keys gives their exact sum (values + noise)."""
    rng = np.random.default_rng(13)
    values = _values(rng)
    noise = {n: noise_share(6, 5.0, rng=rng) for n in NAMES}
    encoded = {n: encode(values[n], F) + noise[n].view(np.uint64) for n in NAMES}
    rest = NAMES[:3]
    states, ads = run_keys(identities, NAMES, "1")
    uploads = run_uploads(identities, states, ads, {n: encoded[n] for n in rest})
    with pytest.raises(RoundFailed, match=f"no masked upload from {NAMES[3]}.*restart the round without the dropped"):
        aggregate(uploads, NAMES)
    states2, ads2 = run_keys(identities, rest, "2")
    assert all(a["public_key"] not in {b["public_key"] for b in ads} for a in ads2)
    total = aggregate(run_uploads(identities, states2, ads2, {n: encoded[n] for n in rest}), rest)
    exact = sum(np.rint(np.ldexp(values[n], F)) + noise[n] for n in rest)
    np.testing.assert_array_equal(total.view(np.int64), exact.astype(np.int64))


def test_the_uploads_of_an_abandoned_round_reveal_nothing_of_their_partial_sum(identities, seeded_keys):
    """The three round-1 uploads sum to their values plus the masks they share with the dropped
    party: across 200 rounds that partial sum is uniformly scattered mod 2^64, never the true one."""
    rest = NAMES[:3]
    encoded = {n: encode(np.full(12, 7.0), F) for n in rest}
    true_partial = sum(encoded.values())
    partials = []
    for r in range(200):
        states, ads = run_keys(identities, NAMES, f"drop-{r}")
        uploads = run_uploads(identities, states, ads, encoded)
        partial = np.zeros(12, dtype=np.uint64)
        for up in uploads.values():
            partial += up
        partials.append(partial)
    partials = np.concatenate(partials)
    assert not np.any(partials == true_partial[0])
    assert top_bits_chi2(partials, 4) < CHI2_LIMIT


def test_a_relayed_advertisement_with_the_coordinators_key_refuses_the_round(identities, seeded_keys):
    states, ads = run_keys(identities, NAMES, "1")
    ads[2] = {**ads[2], "public_key": public_bytes(generate_round_key()).hex()}
    _, verifier = identities
    with pytest.raises(IdentityError, match=f"round '1' refused: the signature .* of '{NAMES[2]}'"):
        masked_contribution(states[NAMES[0]], NAMES[0], ads, verifier, encode([1.0], F), "scores")
    assert not states[NAMES[0]].used_labels


def test_a_signed_low_order_key_refuses_the_round_naming_its_party(identities, seeded_keys):
    """A malicious party signs an all-zero X25519 key (its masks would be public): refused."""
    signers, verifier = identities
    states, ads = run_keys(identities, NAMES, "1")
    ads[3] = signers[NAMES[3]].advertise(STUDY, "1", bytes(32))
    with pytest.raises(IdentityError, match=f"the key of '{NAMES[3]}': .*low-order"):
        masked_contribution(states[NAMES[0]], NAMES[0], ads, verifier, encode([1.0], F), "scores")
    assert not states[NAMES[0]].used_labels


@pytest.mark.parametrize("defect", ["lacks-self", "duplicate", "other-round", "stale-own-key"])
def test_a_bad_roster_refuses_the_whole_round(identities, seeded_keys, defect):
    signers, verifier = identities
    states, ads = run_keys(identities, NAMES, "1")
    me = NAMES[0]
    if defect == "lacks-self":
        ads, match = ads[1:], f"lacks this party '{me}'"
    elif defect == "duplicate":
        ads, match = [*ads, ads[1]], f"'{NAMES[1]}' is advertised twice"
    elif defect == "other-round":
        _, other = advertise(signers[NAMES[3]], STUDY, "0")
        ads, match = [*ads[:3], other], f"advertisement of '{NAMES[3]}' is for study"
    else:
        _, second = advertise(signers[me], STUDY, "1")
        ads, match = [second, *ads[1:]], f"the key advertised for '{me}' is not this party's"
    with pytest.raises(IdentityError, match=match):
        masked_contribution(states[me], me, ads, verifier, encode([1.0], F), "scores")


def test_a_round_key_masks_one_release_per_label(identities, seeded_keys):
    _, verifier = identities
    states, ads = run_keys(identities, NAMES, "1")
    me = NAMES[0]
    masked_contribution(states[me], me, ads, verifier, encode([1.0], F), "scores")
    with pytest.raises(InputError, match="already masked a release labelled 'scores'"):
        masked_contribution(states[me], me, ads, verifier, encode([2.0], F), "scores")
    other = masked_contribution(states[me], me, ads, verifier, encode([1.0], F), "nuisance")
    assert other.dtype == np.uint64


def test_a_roster_below_the_calibrated_honest_count_is_refused(identities, seeded_keys):
    _, verifier = identities
    states, ads = run_keys(identities, NAMES[:2], "1")
    with pytest.raises(PolicyError, match=r"2 verified parties .*fewer than min_parties = 3"):
        masked_contribution(states[NAMES[0]], NAMES[0], ads, verifier, encode([1.0], F), "scores", min_parties=3)
    alone, own = run_keys(identities, NAMES[:1], "2")
    with pytest.raises(PolicyError, match="fewer than min_parties = 2"):
        masked_contribution(alone[NAMES[0]], NAMES[0], own, verifier, encode([1.0], F), "scores")


def test_masked_contribution_refuses_another_partys_key_and_float_values(identities, seeded_keys):
    _, verifier = identities
    states, ads = run_keys(identities, NAMES, "1")
    with pytest.raises(InputError, match="belongs to"):
        masked_contribution(states[NAMES[0]], NAMES[1], ads, verifier, encode([1.0], F), "scores")
    with pytest.raises(InputError, match="must be uint64"):
        masked_contribution(states[NAMES[0]], NAMES[0], ads, verifier, np.array([1.0]), "scores")


def test_aggregate_refuses_malformed_uploads():
    good = np.zeros(3, dtype=np.uint64)
    with pytest.raises(ProtocolError, match="not on the round's roster: x"):
        aggregate({"a": good, "b": good, "x": good}, ["a", "b"])
    with pytest.raises(ProtocolError, match="one shape"):
        aggregate({"a": good, "b": np.zeros(4, dtype=np.uint64)}, ["a", "b"])
    with pytest.raises(ProtocolError, match="one shape and be uint64"):
        aggregate({"a": good, "b": np.zeros(3, dtype=np.int64)}, ["a", "b"])
    with pytest.raises(ProtocolError, match="names a party twice"):
        aggregate({"a": good}, ["a", "a"])
    with pytest.raises(RoundFailed, match="no masked upload from a, b"):
        aggregate({}, ["a", "b"])
