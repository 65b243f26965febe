"""Secure aggregation: the coordinator learns only the sum of the parties' (noisy) vectors.

One module per job: crypto.py (X25519, HKDF, ChaCha20 masks over ``cryptography``), identity.py
(round keys signed with the party's certificate), pins.py (which rosters a party accepts: pinned
peers, party certificates only, a minimum of independent parties), fixed_point.py (floats to
integers mod 2^64 and the overflow check), noise.py (distributed discrete Gaussian shares and their
calibration), protocol.py (the stages: advertise, masked upload, aggregate, round failure),
release.py (what both ends of one release compute identically: the keys operation's name, the
fixed-point scale, the noise share's calibration).
docs/secure-aggregation.md has the protocol, the threat model and the arithmetic.
"""

from collabcausal.secagg.fixed_point import check_headroom, decode, encode, integer_sensitivity
from collabcausal.secagg.identity import Signer, Verifier, simulation_identities
from collabcausal.secagg.noise import noise_share, share_sigma, sum_epsilon
from collabcausal.secagg.pins import PeerPolicy, verified_peers
from collabcausal.secagg.protocol import (
    RoundFailed,
    RoundKey,
    advertise,
    aggregate,
    apply_masks,
    masked_contribution,
    pair_seeds,
    release_label,
    verified_roster,
)
from collabcausal.secagg.release import KEYS_OPERATION, NOISE_TAIL, SCALE_BITS, share_calibration

__all__ = [
    "KEYS_OPERATION",
    "NOISE_TAIL",
    "SCALE_BITS",
    "PeerPolicy",
    "RoundFailed",
    "RoundKey",
    "Signer",
    "Verifier",
    "advertise",
    "aggregate",
    "apply_masks",
    "check_headroom",
    "decode",
    "encode",
    "integer_sensitivity",
    "masked_contribution",
    "noise_share",
    "pair_seeds",
    "release_label",
    "share_calibration",
    "share_sigma",
    "simulation_identities",
    "sum_epsilon",
    "verified_peers",
    "verified_roster",
]
