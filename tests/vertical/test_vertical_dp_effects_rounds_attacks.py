"""Red-team attacks on the encrypted rounds of vertical dp_effects (docs/dp-effects-vertical.md, threat model).

A malicious coordinator relays every ciphertext and holds both public contexts (the public key encrypts anything).
Attacks that hold are kept as tests. Two succeed against these unauthenticated functions, and are kept as tests
that they do: the key owner's columns and the evaluator's totals carry no signature at this layer. The party
operations sign both with the round's terms (collabcausal/vertical/transcript.py), and
tests/party/vertical/test_vertical_attacks.py shows each of the two refused there, before any charge.
"""

from __future__ import annotations

import numpy as np
import pytest
import tenseal as ts
from vertical_helpers import decrypt_column

from collabcausal.errors import InputError, ProtocolError
from collabcausal.estimators.dp.effects.nuisances import NuisanceModel
from collabcausal.estimators.dp.effects.vertical import (
    ENCRYPTION_MARGIN,
    CrossEntry,
    PartLimits,
    cross_term,
    scaled_score_terms,
    score_scales,
    vertical_components,
    weight_polynomial,
)
from collabcausal.vertical import KeyOwner, load_public_context, preset
from collabcausal.vertical.column import EncryptedColumn
from collabcausal.vertical.dp_effects_rounds import (
    cross_totals,
    encrypt_label_vectors,
    encrypt_score_inputs,
    open_totals,
)
from collabcausal.vertical.seal_io import tag

N = 500
SCALE = 20_000.0
ENTRIES = [CrossEntry(index=1, arm=1, label="arm", party=(0,)), CrossEntry(index=0, arm=0, label="arm", party=(0,))]
"""One product's treated and control entries: the real and imaginary parts of one packed slot."""


def _arm_column(owner: KeyOwner, T: np.ndarray) -> dict[str, EncryptedColumn]:
    """L's arm factor as relayed: ``T + i (1 - T)``, one complex column."""
    context = load_public_context(owner.public_context())
    column = encrypt_label_vectors(owner, {("1", "arm"): np.ones(T.size), ("T", "arm"): T})["arm"]
    return {"arm": EncryptedColumn.from_bytes(context, column.to_bytes(), T.size)}


@pytest.fixture(scope="module")
def world(owner1):
    """L's arm indicator as relayed, P's one design column, and each party's noise shares (sd 30)."""
    rng = np.random.default_rng(3636)
    T = rng.integers(0, 2, N).astype(float)
    design = rng.uniform(-1, 1, (N, 1))
    return T, design, _arm_column(owner1, T), rng.normal(0, 30.0, 2), rng.normal(0, 30.0, 2)


def _forged_column(evaluator1, values: np.ndarray) -> EncryptedColumn:
    """What a coordinator encrypts under L's public key and tags with L's (public) fingerprint."""
    slots = evaluator1.parameters.slot_count
    padded = np.zeros(slots)
    padded[: values.size] = values
    chunk = tag(evaluator1.fingerprint, ts.ckks_vector(evaluator1.context, padded.tolist()).serialize())
    return EncryptedColumn.from_bytes(evaluator1, [chunk], values.size)


def test_an_honest_round_releases_the_sum_with_both_shares(owner1, world) -> None:
    """Baseline for the attacks below: both arms' sums, each with both shares."""
    T, design, relayed, noise_p, noise_l = world
    opened = open_totals(owner1, cross_totals(relayed, design, ENTRIES, noise_p, flood_sd=30.0), noise_l, 1e-3)
    exact = np.array([T @ design[:, 0], (1 - T) @ design[:, 0]]) + noise_p + noise_l
    assert np.max(np.abs(opened - exact)) <= N * owner1.parameters.error_bound + 1e-3


def test_unsigned_columns_the_coordinator_forged_reveal_a_subject(owner1, evaluator1, world) -> None:
    """Why the party operations sign the key owner's columns: at this layer a forged "arm" column
    ``SCALE * 1[subject 7]`` makes P's honest total, opened by L, release subject 7's value at ``SCALE`` times the
    sensitivity the noise shares were drawn for (refused at the party: test_vertical_attacks.py)."""
    _T, design, _relayed, noise_p, noise_l = world
    target = np.zeros(N)
    target[7] = SCALE
    forged = {"arm": _forged_column(evaluator1, target)}
    opened = open_totals(owner1, cross_totals(forged, design, ENTRIES, noise_p, flood_sd=30.0), noise_l, 1e-3)
    assert abs(opened[0] / SCALE - design[7, 0]) < 0.05  # the subject's value, to 1/400 of its range


def test_an_unsigned_total_the_coordinator_fabricated_reveals_a_subject(owner1, evaluator1) -> None:
    """Why the party operations sign the evaluator's totals: the coordinator holds L's encrypted outcome column and
    L's evaluation keys, isolates subject 7, scales it by 250 and has L open it as a cross entry (refused at the
    party: test_vertical_attacks.py)."""
    rng = np.random.default_rng(3637)
    u = rng.uniform(-0.5, 0.5, N)
    column = EncryptedColumn.from_bytes(evaluator1, owner1.encrypt(u).to_bytes(), N)
    pick = np.zeros(N)
    pick[7] = 250.0
    fabricated = (column * pick).total(noise=1e-9, flood_sd=1e-9, rng=rng)
    opened = open_totals(owner1, [fabricated], rng.normal(0, 1.0, 1), 1e-3)
    assert abs(opened[0] / 250.0 - u[7]) < 0.02  # subject 7's outcome with L's share only


def test_a_total_replayed_from_another_round_is_refused(owner1, world) -> None:
    """Held: a total of another key owner (another round, row group or study) is refused by its tag."""
    T, design, _relayed, noise_p, noise_l = world
    replayed = cross_totals(_arm_column(KeyOwner(preset(1)), T), design, ENTRIES, noise_p, flood_sd=30.0)
    with pytest.raises(ProtocolError, match="another CKKS context"):
        open_totals(owner1, replayed, noise_l, 1e-3)


@pytest.mark.parametrize("shape_or_value", [(3,), (2, 1), (0,), "nan", "inf"])
def test_noise_shares_of_the_wrong_shape_or_not_finite_are_refused(owner1, world, shape_or_value) -> None:
    """Held: every step refuses noise that is not one finite share per value, before computing (the opening
    counts its values from its shares: their number is checked by the party, test_vertical_attacks.py)."""
    _T, design, relayed, _noise_p, _noise_l = world
    if isinstance(shape_or_value, str):
        noise = np.array([1.0, float(shape_or_value)])
    else:
        noise = np.ones(shape_or_value)
    with pytest.raises(ProtocolError, match="noise shares"):
        cross_totals(relayed, design, ENTRIES, noise, flood_sd=30.0)
    if noise.shape != (3,):
        with pytest.raises(ProtocolError, match="noise shares"):
            open_totals(owner1, [b"unused"], noise, 1e-3)


def test_returned_ciphertexts_of_another_count_than_the_values_need_are_refused(owner1, world) -> None:
    """Held: the key owner opens exactly the ciphertexts that hold its values, packed (here: one)."""
    _T, design, relayed, noise_p, noise_l = world
    total = cross_totals(relayed, design, ENTRIES, noise_p, flood_sd=30.0)
    for returned in ([], total * 2):
        with pytest.raises(ProtocolError, match="returned ciphertexts"):
            open_totals(owner1, returned, noise_l, 1e-3)


def test_a_zero_noise_share_is_refused_at_the_total_and_the_opening(owner1, world) -> None:
    """Held: a share of exactly 0 (a party skipping its noise) is refused on both sides."""
    _T, design, relayed, noise_p, _noise_l = world
    with pytest.raises(InputError, match="nonzero noise"):
        cross_totals(relayed, design, ENTRIES, np.array([1.0, 0.0]), flood_sd=30.0)
    total = cross_totals(relayed, design, ENTRIES, noise_p, flood_sd=30.0)
    with pytest.raises(InputError, match="nonzero noise"):
        open_totals(owner1, total, np.array([0.0, 1.0]), 1e-3)


def test_a_score_input_outside_minus_one_to_one_is_not_encrypted(owner1) -> None:
    """Held: a part the coordinator's scales leave beyond [-1, 1] is refused by the key owner's encryption."""
    with pytest.raises(InputError, match="scale the column"):
        list(encrypt_score_inputs(owner1, [np.r_[np.zeros(N - 1), 1.5]]))


def test_encrypted_score_terms_stay_within_the_bounds_the_sensitivity_assumes(owner7, evaluator7) -> None:
    """A subject at the score bound: intercept-only model (x = -1 for the treated, where the weight is largest),
    ``mu0 = mu1 = -M`` and ``y' = R/2``, so ``phi = M (w - 1) + M + w R/2`` is exactly ``score_bound``; the
    released ranges add ``ENCRYPTION_MARGIN`` to it, which the encrypted evaluation's bias stays within."""
    n, domain, a = 64, 2.0, 0.4
    model = NuisanceModel(np.array([-domain, 0.0, 0.0]), (np.array([-a, 0.0, 0.0]), np.array([-a, 0.0, 0.0])))
    limits = PartLimits(np.zeros((3, 2)), np.zeros((3, 2)))
    domain, unit = score_scales(model, limits, [], 1, 1.0)
    poly = weight_polynomial(domain, 0.1)
    parts = vertical_components(["aipw"], ["ate"], model, limits, [], poly, 1, 1.0)
    T, y = np.ones(n), np.full(n, 0.5)
    plain = [np.full(n, -1.0), np.full(n, -a / unit), np.full(n, -a / unit)]
    twin = scaled_score_terms(T, y, plain, [], poly, parts, unit)
    assert twin[0].max() * (1 + ENCRYPTION_MARGIN) == pytest.approx(parts[0].weight / 2, rel=1e-8)  # attained
    theirs = [EncryptedColumn.from_bytes(evaluator7, c.to_bytes(), n)
              for c in encrypt_score_inputs(owner7, [np.zeros(n)] * 3)]
    terms = scaled_score_terms(T, y, [e + p for e, p in zip(theirs, plain, strict=True)], [], poly, parts, unit)
    point, square = (decrypt_column(owner7, t) for t in terms)
    assert point.max() <= parts[0].weight / 2 and square.max() <= parts[1].weight


def test_encrypted_cross_terms_stay_within_the_bounds_the_sensitivity_assumes(owner1, evaluator1) -> None:
    """Subjects at a corner of the box: L's factor 1 times P's design value 1 comes out at 1 + 1.3e-6 a subject
    (TenSEAL's product), and the packed cross total of n of them within n (1 + ``ENCRYPTION_MARGIN``), the margin
    the statistics' sensitivity is charged with (simulations/vertical_simulation.py)."""
    n = 256
    column = EncryptedColumn.from_bytes(evaluator1, owner1.encrypt(np.ones(n)).to_bytes(), n)
    per_subject = decrypt_column(owner1, cross_term({("T", "arm"): column}, np.ones((n, 1)), ENTRIES[0]))
    assert per_subject.max() <= 1.0 + ENCRYPTION_MARGIN
    tiny = np.full(2, 1e-9)
    corner = cross_totals(_arm_column(owner1, np.ones(n)), np.ones((n, 1)), ENTRIES, tiny, flood_sd=1e-9)
    opened = open_totals(owner1, corner, tiny, owner1.parameters.error_bound)
    assert opened[0] <= n * (1.0 + ENCRYPTION_MARGIN) and abs(opened[1]) <= n * owner1.parameters.error_bound
