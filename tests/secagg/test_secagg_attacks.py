"""Attacks on secure aggregation by a coordinator that holds the study CA (issue 37), through ``Party.handle``.

The certificates come from the real flow: the coordinator runs ``certs init`` and ``certs issue
--analyst``; each hospital runs ``certs request`` and the coordinator ``certs sign``. The coordinator
then uses ``ca.key`` as an attacker would: it mints parties of its own (``certs issue --party``),
relays rosters of its choosing and computes the uploads of its parties itself.

Every refusal is checked to come before the charge: the victim's ledger records nothing. The noise
shares are drawn from a seeded generator (``noise_share(rng=...)``), so the figures are reproducible.
"""

from __future__ import annotations

import math
import shutil

import numpy as np
import pandas as pd
import pytest

from collabcausal.certs import (
    ANALYST,
    fingerprint,
    init_ca,
    issue,
    load_certificate,
    request_certificate,
    sign_request,
)
from collabcausal.errors import IdentityError, PolicyError
from collabcausal.estimators.dp.effects.design import FeatureMap
from collabcausal.estimators.dp.effects.release import party_statistics
from collabcausal.estimators.dp.effects.statistics import statistics_length, statistics_sensitivity
from collabcausal.estimators.dp.zcdp import zcdp_rho
from collabcausal.ledger import PrivacyLedger
from collabcausal.messages import Message
from collabcausal.party import Party, PartyTable
from collabcausal.party.dp_effects import STATISTICS
from collabcausal.party.secagg import MAX_OPEN_ROUNDS, IdentityFiles
from collabcausal.secagg import (
    KEYS_OPERATION,
    SCALE_BITS,
    PeerPolicy,
    Signer,
    Verifier,
    advertise,
    aggregate,
    apply_masks,
    decode,
    encode,
    integer_sensitivity,
    pair_seeds,
    release_label,
    share_calibration,
    verified_peers,
    verified_roster,
)
from collabcausal.secagg.noise import noise_share, sum_epsilon

STUDY = "s"
N = 120
FM = FeatureMap(((0.0, 10.0), (-1.0, 1.0)), (0.0, 5.0), n_sites=1)
LENGTH = statistics_length(FM.dim)
EPS, DELTA = 1.0, 1e-6
RHO = zcdp_rho(EPS, DELTA)
HOSPITALS = ["h1", "h2", "h3", "h4"]


@pytest.fixture(autouse=True)
def seeded_noise(monkeypatch):
    """The parties' noise shares from one seeded generator (reproducible; never in a deployment)."""
    rng = np.random.default_rng(37)
    monkeypatch.setattr("collabcausal.party.secagg.noise_share", lambda d, sigma: noise_share(d, sigma, rng=rng))


@pytest.fixture()
def study(tmp_path):
    """The coordinator's CA folder and, per hospital, its own folder with key, certificate and ca.pem."""
    coordinator = tmp_path / "coordinator"
    init_ca(coordinator)
    issue(coordinator, ANALYST, server=True)
    for name in HOSPITALS:
        folder = tmp_path / name
        _, csr = request_certificate(folder, name)  # the key stays at the hospital
        issued = sign_request(coordinator, csr)
        shutil.copy(issued.cert, folder / f"{name}.pem")
        shutil.copy(coordinator / "ca.pem", folder / "ca.pem")
    return tmp_path


def _pins(root, names):
    return {name: fingerprint(load_certificate(root / name / f"{name}.pem")) for name in names}


def _party(root, name, peers: PeerPolicy | None) -> Party:
    rng = np.random.default_rng(HOSPITALS.index(name) if name in HOSPITALS else 99)
    frame = pd.DataFrame({"a": rng.uniform(0, 10, N), "b": rng.uniform(-1, 1, N), "t": rng.integers(0, 2, N),
                          "y": rng.uniform(0, 5, N)})
    table = PartyTable.from_frame(frame, ["a", "b"], treatment="t", outcome="y")
    folder = root / name
    party = Party(name, table, ledger=PrivacyLedger(folder / "ledger.sqlite", epsilon=100.0, delta=1e-3))
    party.secagg_identity = IdentityFiles(folder / "ca.pem", folder / f"{name}.pem", folder / f"{name}.key", peers)
    return party


def _pinned(root, name, peers=HOSPITALS, min_parties=3) -> Party:
    return _party(root, name, PeerPolicy(_pins(root, [p for p in peers if p != name]), min_parties))


def _keys(party: Party, round_id: str = "r1") -> dict:
    return party.handle(Message(KEYS_OPERATION, {"study": STUDY, "round": round_id})).params["advertisement"]


def _request(advertisements, round_id: str = "r1") -> Message:
    return Message(STATISTICS, {"study": STUDY, "rho": RHO, "delta": DELTA, "columns": ["a", "b"],
                                "design": FM.to_spec(), "site": 0, "n_folds": 1,
                                "secagg": {"round": round_id, "advertisements": advertisements}})


def _exact(party: Party) -> np.ndarray:
    t = party.table
    return party_statistics(t.covariates, t.treatment, t.outcome, FM, 0, np.zeros(N, dtype=np.int64), 1).ravel()


def _minted(root, names) -> dict[str, Signer]:
    """Parties of the coordinator's own, certified with the study CA key it keeps (`certs issue --party`)."""
    return {name: Signer.from_files(*(lambda i: (i.cert, i.key))(issue(root / "coordinator", name, force=True)))
            for name in names}


def _sybil_round(root, victim: Party, k: int, round_id: str = "r1"):
    """The roster {victim, k coordinator parties}: (advertisements, the coordinator's round states)."""
    sybils = _minted(root, [f"sybil-{i}" for i in range(1, k + 1)])
    states, ads = {}, [_keys(victim, round_id)]
    for name, signer in sybils.items():
        states[name], ad = advertise(signer, STUDY, round_id)
        ads.append(ad)
    return ads, states


def _spent_nothing(party: Party) -> bool:
    return party.ledger.spent() == (0.0, 0.0) and party.ledger.history() == []


@pytest.mark.parametrize("k", [1, 2, 9])
def test_a_sybil_roster_of_coordinator_parties_is_refused_by_a_pinned_party_before_the_charge(study, k):
    victim = _pinned(study, "h1")
    ads, _ = _sybil_round(study, victim, k)
    with pytest.raises(IdentityError, match="'sybil-1' is not a pinned peer of this party"):
        victim.handle(_request(ads))
    assert _spent_nothing(victim)


@pytest.mark.parametrize(("k", "effective"), [(2, 1.45), (9, 3.29), (99, 13.08)])
def test_without_pins_the_sybil_roster_unmasks_the_victim_under_one_share_of_noise(study, k, effective):
    """The threat pins remove, measured: with peers = "any" the coordinator reads the victim's statistics.

    The victim charges epsilon 1 and calibrates to k other shares; the coordinator knows every sybil
    mask, adds no sybil noise, and is left with the victim's values plus the victim's own share: an
    effective epsilon of 1.45 / 3.29 / 13.08 at k = 2 / 9 / 99.
    """
    victim = _party(study, "h1", PeerPolicy(None, 2))
    ads, states = _sybil_round(study, victim, k)
    upload = victim.handle(_request(ads))
    roster = verified_peers(ads, Verifier.from_file(study / "coordinator" / "ca.pem"), min_parties=2, study=STUDY,
                            round_id="r1")
    zeros = encode(np.zeros(LENGTH), SCALE_BITS)  # the sybils add no noise
    label = release_label(STATISTICS, sensitivity=statistics_sensitivity(FM), rho=RHO, length=LENGTH)  # public terms
    uploads = {name: apply_masks(state, pair_seeds(state, roster, label), zeros, label)
               for name, state in states.items()} | {"h1": upload.arrays["masked"]}
    read = decode(aggregate(uploads, ["h1", *states]), SCALE_BITS)
    sigma = upload.params["sigma_share"]
    assert upload.params["n_honest"] == k and upload.params["pinned"] is False
    assert np.abs(read - _exact(victim)).max() < 8 * sigma / 2.0**SCALE_BITS  # only the victim's own share
    sensitivity = integer_sensitivity(statistics_sensitivity(FM), LENGTH, SCALE_BITS)
    assert sum_epsilon(sensitivity, sigma, 1, LENGTH, DELTA) == pytest.approx(effective, abs=0.01)
    assert victim.ledger.spent()[0] == pytest.approx(EPS)  # what the ledger believes


@pytest.mark.parametrize("change", [{}, {"cross_weight": 8.0}, {"rho": RHO / 4}], ids=["same terms", "a cross weight",
                                                                                      "a smaller rho"])
def test_parties_sent_different_terms_get_masks_that_do_not_cancel(study, change):
    """A malicious coordinator sends h1 a request the others do not get (a larger sensitivity, or a smaller rho): h1
    calibrates its share for its own terms and counts on the others' shares being calibrated alike, but theirs are
    smaller. Its masks are derived under its terms (``release_label``), so they do not cancel against the others' and
    the sum the coordinator decodes is uniform noise; with the same terms the sum is the statistics' plus the noise."""
    names = ["h1", "h2", "h3"]
    parties = {name: _pinned(study, name) for name in names}
    ads = [_keys(p) for p in parties.values()]
    replies = {}
    for name, party in parties.items():
        request = _request(ads)
        if name == "h1":
            request = Message(STATISTICS, request.params | change)
        replies[name] = party.handle(request)
    read = decode(aggregate({n: r.arrays["masked"] for n, r in replies.items()}, names), SCALE_BITS)
    exact = sum(_exact(p) for p in parties.values())
    if not change:  # the sum's noise: three shares; 8 sds (seeded shares)
        sd = math.sqrt(sum(r.params["sigma_share"] ** 2 for r in replies.values())) / 2.0**SCALE_BITS
        assert np.abs(read - exact).max() < 8 * sd
    else:  # each entry uniform over 2^(64 - SCALE_BITS): within 1e6 with probability 2e6 / 2^(64 - SCALE_BITS), so
        assert np.median(np.abs(read - exact)) > 1e6  # half the entries within it: below 1e-20 (SCALE_BITS <= 32)


def test_a_minted_certificate_under_a_pinned_name_is_refused_before_the_charge(study):
    victim = _pinned(study, "h1")
    impostors = _minted(study, ["h2", "h3"])  # the CA key signs any name; the pins are of the real h2, h3
    ads = [_keys(victim)] + [advertise(s, STUDY, "r1")[1] for s in impostors.values()]
    with pytest.raises(IdentityError, match="certificate of 'h2' is not the one pinned for it"):
        victim.handle(_request(ads))
    assert _spent_nothing(victim)


@pytest.mark.parametrize("pins", ["pinned", "any"])
def test_the_coordinators_own_certificate_on_a_roster_is_refused_before_the_charge(study, pins):
    """Without the CA key: its analyst certificate plus one colluding real party would make 2 x rho."""
    peers = PeerPolicy(None, 2) if pins == "any" else PeerPolicy(_pins(study, ["h2", "h3"]), 3)
    victim = _party(study, "h1", peers)
    colluder = _pinned(study, "h2")
    folder = study / "coordinator"
    analyst = Signer.from_files(folder / f"{ANALYST}.pem", folder / f"{ANALYST}.key")
    ads = [_keys(victim), _keys(colluder), advertise(analyst, STUDY, "r1")[1]]
    with pytest.raises(IdentityError, match=r"'analyst'.*is not a party's certificate"):
        victim.handle(_request(ads))
    assert _spent_nothing(victim)


def test_a_low_order_key_from_a_pinned_party_is_refused_by_every_party_before_anyone_is_charged(study):
    """One party advertising the all-zero X25519 key would have burnt everyone's budget; now nobody pays."""
    parties = [_pinned(study, name) for name in HOSPITALS[:3]]
    ads = [_keys(p) for p in parties[:2]]
    evil = Signer.from_files(study / "h3" / "h3.pem", study / "h3" / "h3.key")
    ads.append(evil.advertise(STUDY, "r1", bytes(32)))
    for party in parties[:2]:
        with pytest.raises(IdentityError, match=r"the key of 'h3': .*low-order"):
            party.handle(_request(ads))
        assert _spent_nothing(party)


def test_a_roster_below_min_parties_is_refused_before_the_charge_naming_the_fix(study):
    victim = _pinned(study, "h1")
    ads = [_keys(victim), _keys(_pinned(study, "h2"))]
    refusal = r"2 verified parties \(h1, h2\), fewer than min_parties = 3.*set \[secure_aggregation\] min_parties = 2"
    with pytest.raises(PolicyError, match=refusal):
        victim.handle(_request(ads))
    assert _spent_nothing(victim)


def test_a_pin_mismatch_is_refused_before_the_charge(study):
    """h2's certificate was re-issued (or swapped) since h1 pinned it: h1 refuses it."""
    pins = _pins(study, ["h2", "h3"]) | {"h2": "0" * 64}
    victim = _party(study, "h1", PeerPolicy(pins, 3))
    ads = [_keys(victim), _keys(_pinned(study, "h2")), _keys(_pinned(study, "h3"))]
    with pytest.raises(IdentityError, match="certificate of 'h2' is not the one pinned"):
        victim.handle(_request(ads))
    assert _spent_nothing(victim)


def test_a_party_toml_without_secure_aggregation_rules_refuses_at_the_keys_stage(study):
    victim = _party(study, "h1", None)
    with pytest.raises(PolicyError, match=r"no \[secure_aggregation\] section.*peers = \"any\""):
        _keys(victim)
    assert victim.secagg_rounds == {}


def test_a_round_id_is_never_opened_twice_even_after_its_key_is_dropped(study):
    party = _pinned(study, "h1")
    for i in range(MAX_OPEN_ROUNDS + 1):
        _keys(party, f"r{i}")
    with pytest.raises(PolicyError, match="already made a key for round 'r0'"):
        _keys(party, "r0")
    with pytest.raises(PolicyError, match=r"no key for round 'r0' \(closed\)"):
        party.handle(_request([], round_id="r0"))
    assert _spent_nothing(party)


@pytest.mark.parametrize("n", [3, 4])
def test_honest_pinned_studies_release_the_sum_with_the_calibration_of_today(study, n):
    names = HOSPITALS[:n]
    parties = [_pinned(study, name, peers=names) for name in names]
    ads = [_keys(p) for p in parties]
    replies = {p.name: p.handle(_request(ads)) for p in parties}
    sigma = share_calibration(statistics_sensitivity(FM), RHO, n_parties=n, length=LENGTH, value_bound=N)
    for reply in replies.values():
        assert reply.params["sigma_share"] == pytest.approx(sigma, rel=1e-12)
        assert (reply.params["n_parties"], reply.params["n_honest"], reply.params["pinned"]) == (n, n - 1, True)
    total = decode(aggregate({k: r.arrays["masked"] for k, r in replies.items()}, names), SCALE_BITS)
    assert np.abs(total - sum(_exact(p) for p in parties)).max() < 8 * sigma * np.sqrt(n) / 2.0**SCALE_BITS
    for party in parties:
        assert [c.rho for c in party.ledger.history()] == [RHO]


# --- A hostile coordinator against the cross weight and release_label (29 Nov 2026 review) ---


def _corner_party(root, name: str) -> Party:
    """Every row at a corner of the design box with the outcome at its top: every entry of the weighted statistics at
    its reach (the Gram's products 1, the cross sums w / 2 per row) or close to it."""
    t = np.arange(N) % 2
    frame = pd.DataFrame({"a": np.full(N, 10.0), "b": np.full(N, 1.0), "t": t, "y": np.full(N, 5.0)})
    frame.loc[0, ["a", "b"]] = (0.0, -1.0)  # the opposite corner (a constant covariate is refused)
    table = PartyTable.from_frame(frame, ["a", "b"], treatment="t", outcome="y")
    folder = root / name
    party = Party(name, table, ledger=PrivacyLedger(folder / "ledger.sqlite", epsilon=100.0, delta=1e-3))
    party.secagg_identity = IdentityFiles(folder / "ca.pem", folder / f"{name}.pem", folder / f"{name}.key",
                                          PeerPolicy(_pins(root, [p for p in HOSPITALS if p != name]), 3))
    return party


def test_at_the_largest_cross_weight_rows_at_the_corner_sum_without_wrapping_around(study):
    """w = 8: each cross-sum entry reaches n w / 2 = 4 n, the value bound the party declares (n statistics_reach(8));
    three parties whose every row sits at the corner decode to their weighted sum (no wrap-around), within 8 sds of
    the three seeded shares."""
    names = ["h1", "h2", "h3"]
    parties = {name: _corner_party(study, name) for name in names}
    ads = [_keys(p) for p in parties.values()]
    replies = {n: p.handle(Message(STATISTICS, _request(ads).params | {"cross_weight": 8})) for n, p in parties.items()}
    read = decode(aggregate({n: r.arrays["masked"] for n, r in replies.items()}, names), SCALE_BITS)
    weights = np.concatenate([np.ones(FM.dim * (FM.dim + 1)), np.full(2 * FM.dim, 8.0)])
    exact = sum(_exact(p) for p in parties.values()) * weights
    per_party = _exact(parties["h1"]) * weights
    assert np.abs(per_party).max() == pytest.approx(N * 4.0 / 2)  # one arm's rows (N / 2), each at w / 2 = 4
    sd = math.sqrt(sum(r.params["sigma_share"] ** 2 for r in replies.values())) / 2.0**SCALE_BITS
    assert np.abs(read - exact).max() < 8 * sd
    assert all(p.ledger.history()[0].details["cross_weight"] == 8.0 for p in parties.values())


def test_a_round_already_used_for_the_statistics_refuses_them_again_under_other_terms_before_the_charge(study):
    """Masks are derived under each release's terms, so a second statistics release on the same round with another
    cross weight (or rho) would draw fresh masks; the party still refuses it (one release per name per round) before
    charging anything a second time."""
    parties = {name: _pinned(study, name) for name in ["h1", "h2", "h3"]}
    ads = [_keys(p) for p in parties.values()]
    victim = parties["h1"]
    victim.handle(_request(ads))
    for change in ({"cross_weight": 8.0}, {"rho": RHO / 2}, {"n_folds": 2}, {}):
        with pytest.raises(PolicyError, match="already masked"):
            victim.handle(Message(STATISTICS, _request(ads).params | change))
    assert len(victim.ledger.history()) == 1


def test_release_label_reads_the_same_for_an_int_and_a_float_and_cannot_be_forged_through_the_name():
    """Honest parties that parse rho or the sensitivity as an int and as a float agree (the same float, the same
    repr); distinct terms give distinct labels, and a name that spells out other terms does not collide with them
    (the terms always follow the name; a float's repr holds no '|')."""
    assert release_label("x", sensitivity=2, rho=1, length=3) == release_label("x", sensitivity=2.0, rho=1.0, length=3)
    assert release_label("x", sensitivity=2.0, rho=0.1, length=3) == release_label("x", sensitivity=2.0, rho=1e-1,
                                                                                   length=3)
    honest = release_label("x", sensitivity=2.0, rho=0.1, length=3)
    forged = release_label("x|sensitivity=2.0|rho=0.1|length=3", sensitivity=9.0, rho=0.5, length=3)
    assert not forged.startswith(honest + "|") or forged.endswith("|rho=0.5|length=3")
    assert len({honest, forged, release_label("x", sensitivity=np.nextafter(2.0, 3.0), rho=0.1, length=3),
                release_label("x", sensitivity=2.0, rho=np.nextafter(0.1, 1.0), length=3),
                release_label("x", sensitivity=2.0, rho=0.1, length=4)}) == 5


def test_a_larger_roster_shown_to_the_victim_alone_with_one_colluder_leaves_it_no_less_noise(study):
    """The roster size is not in release_label. A coordinator with one colluding pinned party (h4, the threat model's
    one) shows the victim h1 the roster {h1, h2, h3, h4} (so h1 calibrates its share for three honest others) and h2,
    h3 the roster {h1, h2, h3}; h4 cancels only its mask with h1. The masks cancel and the coordinator reads
    h1 + h2 + h3, but h2 and h3 calibrated for two honest others each, so the victim's record still sits under at
    least the noise of three of its own shares (4/3 of the claim's variance)."""
    parties = {name: _pinned(study, name) for name in HOSPITALS}
    ads = {name: _keys(p) for name, p in parties.items()}
    replies = {"h1": parties["h1"].handle(_request(list(ads.values())))}
    for name in ("h2", "h3"):
        replies[name] = parties[name].handle(_request([ads[n] for n in ("h1", "h2", "h3")]))
    colluder = parties["h4"]
    state = colluder.secagg_rounds["r1"]
    roster = verified_roster(state, list(ads.values()), colluder.secagg_identity.identity.verifier,
                             min_parties=3)
    terms = release_label(STATISTICS, sensitivity=statistics_sensitivity(FM), rho=RHO, length=LENGTH)
    seeds = pair_seeds(state, {"h1": roster["h1"], "h4": roster["h4"]}, terms)
    uploads = {n: r.arrays["masked"] for n, r in replies.items()}
    uploads["h4"] = apply_masks(state, seeds, np.zeros(LENGTH, dtype=np.uint64), terms)
    read = decode(aggregate(uploads, HOSPITALS), SCALE_BITS)
    exact = sum(_exact(parties[n]) for n in ("h1", "h2", "h3"))
    shares = {n: r.params["sigma_share"] for n, r in replies.items()}
    sd = math.sqrt(sum(s**2 for s in shares.values())) / 2.0**SCALE_BITS
    assert np.abs(read - exact).max() < 8 * sd  # the masks cancel: the attack reads the sum
    assert replies["h1"].params["n_honest"] == 3 and replies["h2"].params["n_honest"] == 2
    assert sum(s**2 for s in shares.values()) >= 3 * shares["h1"] ** 2  # yet no less noise than the victim counted on
    assert sum(s**2 for s in shares.values()) == pytest.approx(3 * shares["h1"] ** 2 * 4 / 3, rel=1e-6)


def test_a_rho_whose_noise_wraps_around_only_at_the_largest_weight_is_refused_before_the_charge(study):
    """The weight raises the sensitivity (3.7-fold here at w = 8) and so the shares' tail: a rho small enough that the
    weighted sum could wrap around modulo 2^64 while the unweighted one cannot is refused by the weighted request
    before anything is charged (whatever the rows), and the unweighted one on a fresh round is released."""
    from collabcausal.errors import InputError

    weighted, plain = statistics_sensitivity(FM, 8.0), statistics_sensitivity(FM)

    def wraps(sensitivity: float, rho: float, reach: float) -> bool:
        try:
            share_calibration(sensitivity, rho, n_parties=3, length=LENGTH, value_bound=N * reach)
        except InputError:
            return True
        return False

    rho = next(r for r in np.geomspace(1e-6, 1e-30, 241) if wraps(weighted, r, 4.0))
    assert not wraps(plain, rho, 1.0)
    parties = {name: _pinned(study, name) for name in ["h1", "h2", "h3"]}
    for name, party in parties.items():
        party.ledger = PrivacyLedger(study / name / "big.sqlite", epsilon=1e300, delta=1e-3)
    ads = [_keys(p) for p in parties.values()]
    victim = parties["h1"]
    with pytest.raises(InputError, match=r"values up to 480 .* 2\^62"):  # N reach(8) = 120 x 4
        victim.handle(Message(STATISTICS, _request(ads).params | {"rho": float(rho), "cross_weight": 8.0}))
    assert victim.ledger.history() == []
    reply = victim.handle(Message(STATISTICS, _request(ads).params | {"rho": float(rho)}))
    assert "masked" in reply.arrays and len(victim.ledger.history()) == 1
