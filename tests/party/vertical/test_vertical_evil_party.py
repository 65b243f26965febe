"""An evil party of a vertical round, colluding with the coordinator: what it gets (documented limit).

Neither attack can be refused without proofs of correct computation (docs/threat-model.md, "Parties holding
different columns of the same subjects"): the evil party signs what it sends with its own, pinned
certificate. Each test runs the honest parties through Party.handle and the evil one with one step swapped,
and MEASURES what the attackers recover of one subject against the truth:

* an evil **evaluator** P returns, for each cross product, the key owner L's factor of one subject times
  ``K = 2^19`` (inside the headroom) instead of the agreed sum, without its own noise share; L opens it honestly
  and releases it with its own share (sd ``sigma``), so the coordinator reads the subject's L values to
  ``sigma / K``;
* an evil **key owner** L encrypts ``K 1[subject]`` as its arm factor (outside [-1, 1]); P's honest totals
  then carry ``K`` times the subject's P values plus P's share, which L decrypts alone;
* an evil **scores evaluator** L returns P's encrypted parts of one subject times ``K`` as the released sums.

Printed figures (``pytest -s``): recovered to within 6 sd of the share / K, against a subject's contribution of
at most 1 beside a noise sd of ``sigma`` in the honest release.
"""

from __future__ import annotations

import numpy as np
import tenseal as ts
from hostile_rounds import GROUPS, feature_map, honest_program, opening, relayed, request, small_world

from collabcausal.estimators.dp.effects.vertical import cross_entries, group_design, label_vectors
from collabcausal.estimators.dp.effects.vertical_program import score_inputs
from collabcausal.party.vertical import scores, statistics
from collabcausal.vertical.column import RelayedColumn
from collabcausal.vertical.inner_products import inner_products
from collabcausal.vertical.packing import Summands
from collabcausal.vertical.parameters import preset
from collabcausal.vertical.seal_io import tag

K = 2.0**19
"""The evil party's scale: its values stay under the preset's headroom 2^20, so nothing overflows or is refused."""
TARGET = 7
TINY = 1e-9
"""The evil party's own noise share and flooding (nonzero, as the packing demands)."""


def _product_entries():
    """The cross products in the packed order: ``(treated entry, control entry)`` pairs."""
    entries = statistics.packed_entries(cross_entries(GROUPS, 1))
    return list(zip(entries[0::2], entries[1::2], strict=True))


def test_an_evil_evaluator_gets_one_subjects_label_holder_values_to_sigma_over_k(tmp_path, monkeypatch) -> None:
    """Every L factor of subject 7 (its covariates, arm and scaled outcome, in the treated or the control part
    of a slot) recovered from L's honest release to within 6 sigma / K = 6 * 2^-19 sigma."""
    w = small_world(tmp_path)
    products = _product_entries()

    def evil_cross_summands(columns, design, entries, own=None):
        pick = np.zeros(design.shape[0])
        pick[TARGET] = K
        sums, _ = inner_products(columns, {"pick": pick}, [(t.label, "pick") for t, _c in products])
        return Summands(sums, [K] * len(sums), True)

    sent = request(w, "statistics")
    reply = w.label.handle(sent)
    monkeypatch.setattr(statistics, "cross_summands", evil_cross_summands)
    monkeypatch.setattr(statistics, "noise_share", lambda k, sigma: np.full(np.size(k), TINY))  # P's own share
    totals = w.other.handle(relayed("statistics", sent, reply))
    released = w.label.handle(opening("statistics", sent.params["round"], totals))
    sigma = released.params["sigma"]
    values = released.array("values")
    fm = feature_map(w)
    truth = label_vectors(group_design(fm, w.X[:, :3], 0, GROUPS, 0), w.T.astype(float),
                          np.clip(fm.centred_outcome(w.Y) / fm.outcome_width, -0.5, 0.5), GROUPS, 1, 0)
    errors = []
    for treated, control in products:
        v, t = truth["1", treated.label][TARGET], truth["T", treated.label][TARGET]
        errors += [values[treated.index] / K - t, values[control.index] / K - (v - t)]
    worst = float(np.max(np.abs(errors)))
    print(f"\nevil evaluator: {len(products)} products, subject {TARGET}'s L factors recovered to {worst:.2e} "
          f"(sigma {sigma:.3g}, sigma / K {sigma / K:.2e})")
    assert worst <= 6 * sigma / K + 1e-5


def test_an_evil_key_owner_gets_one_subjects_other_party_values_to_sigma_over_k(tmp_path, monkeypatch) -> None:
    """L's arm factor replaced by ``K 1[subject 7]``: from P's honest totals L decrypts subject 7's P design values
    (and their products) to within 6 sigma / K of P's share."""
    w = small_world(tmp_path)
    real_encrypt = statistics.encrypt_label_vectors

    def evil_encrypt(owner, vectors):
        columns = real_encrypt(owner, vectors)
        slots = owner.parameters.slot_count
        forged = np.zeros(slots)
        forged[TARGET] = K
        vector = ts.ckks_vector(owner._context, forged.tolist())
        columns["arm"] = RelayedColumn(owner.public, [tag(owner.public.fingerprint, vector.serialize())], w.T.size)
        return columns

    monkeypatch.setattr(statistics, "encrypt_label_vectors", evil_encrypt)
    sent = request(w, "statistics")
    reply = w.label.handle(sent)
    totals = w.other.handle(relayed("statistics", sent, reply))
    sigma = totals.params["sigma"]
    owner = w.label.vertical_rounds[sent.params["round"]].owner
    products = [(t, c) for t, c in _product_entries() if t.label == "arm"]
    opened = owner.open(bytes(totals.arrays["ckks_totals"]), noise=np.full(2 * len(_product_entries()), TINY),
                        grid=preset(1).error_bound)
    design = group_design(feature_map(w), w.X[:, 3:], 0, GROUPS, 1)
    position = {e.index: k for k, e in enumerate(statistics.packed_entries(cross_entries(GROUPS, 1)))}
    errors = [opened[position[t.index]] / K - np.prod(design[TARGET, list(t.party)]) for t, _c in products]
    worst = float(np.max(np.abs(errors)))
    print(f"\nevil key owner: {len(products)} of P's products of subject {TARGET} recovered to {worst:.2e} "
          f"(sigma {sigma:.3g}, sigma / K {sigma / K:.2e})")
    assert len(products) >= 3 and worst <= 6 * sigma / K + 1e-5


def test_an_evil_scores_evaluator_gets_one_subjects_key_owner_inputs_to_sigma_over_k(tmp_path, monkeypatch) -> None:
    """The scores round the other way round: an evil L returns, as each of the 4 released sums, one of P's
    encrypted parts (``eta / E``, ``mu0 / U``, ``mu1 / U``, ...) of subject 7 times ``K``, without its own share;
    P opens it honestly and the coordinator reads those parts to within 6 sigma / K."""
    w = small_world(tmp_path)
    program = honest_program(w)

    def evil_score_summands(columns, plain, treatment, outcome, poly, parts, unit, others=()):
        pick = np.zeros(treatment.size)
        pick[TARGET] = K
        picked = [columns[j].load() * pick for j in range(len(parts))]
        return Summands([c.ciphertext(0) for c in picked], [K] * len(parts), False)

    sent = request(w, "scores", program=program)
    reply = w.other.handle(sent)
    monkeypatch.setattr(scores, "score_summands", evil_score_summands)
    monkeypatch.setattr(scores, "noise_share", lambda k, sigma: np.full(np.size(k), TINY))
    totals = w.label.handle(relayed("scores", sent, reply))
    released = w.other.handle(opening("scores", sent.params["round"], totals))
    sigma = released.params["sigma"]
    fm = feature_map(w)
    inputs = score_inputs(program, group_design(fm, w.X[:, 3:], 0, GROUPS, 1), 1, GROUPS, fm)
    truth = np.array([inputs[j][TARGET] for j in range(len(program.parts))])
    worst = float(np.max(np.abs(released.array("values") / K - truth)))
    print(f"\nevil scores evaluator: {truth.size} of P's parts of subject {TARGET} recovered to {worst:.2e} "
          f"(sigma {sigma:.3g}, sigma / K {sigma / K:.2e})")
    assert worst <= 6 * sigma / K + 1e-5
