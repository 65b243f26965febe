"""Helpers of the secure-aggregation tests: run the stages for a set of parties, test uniformity."""

from __future__ import annotations

import numpy as np

from collabcausal.secagg import advertise, masked_contribution

STUDY = "study-1"
NAMES = ("hospital-a", "hospital-b", "hospital-c", "hospital-d")


def run_keys(identities, names, round_id):
    """Stage 1 for ``names``: (private states by name, advertisements as relayed)."""
    signers, _ = identities
    states, ads = {}, []
    for name in names:
        state, ad = advertise(signers[name], STUDY, round_id)
        states[name] = state
        ads.append(ad)
    return states, ads


def run_uploads(identities, states, ads, values, label="scores"):
    """Stage 2 for every party in ``values`` (name -> uint64 array): uploads by name."""
    _, verifier = identities
    return {name: masked_contribution(states[name], name, ads, verifier, v, label) for name, v in values.items()}


def top_bits_chi2(samples: np.ndarray, bits: int) -> float:
    """Pearson chi-square of the top ``bits`` bits of uint64 ``samples`` against uniform."""
    bins = np.bincount((samples.ravel() >> np.uint64(64 - bits)).astype(np.int64), minlength=2**bits)
    expected = samples.size / 2**bits
    return float(((bins - expected) ** 2 / expected).sum())
