"""Encrypted arithmetic for vertical splits: CKKS columns under one party's key (TenSEAL).

Both roles import it (like collabcausal.secagg). One module per job: parameters.py (presets, their
security level, headroom and error bound), context.py (the public context an evaluator holds, its
fingerprint, the refusal of a secret key), keys.py (the key owner: encrypt, open with noise and
rounding), column.py (the encrypted column: numpy's elementwise arithmetic, polyval, total),
total.py (the stages of a returned total: rotate-and-sum, slot-0 mask, re-randomizing flood),
advertisement.py (the public context's fingerprint signed with the party's study certificate),
seal_io.py (SEAL objects to bytes). docs/vertical-encryption.md has the measurements and limits.
"""

from collabcausal.vertical.column import EncryptedColumn
from collabcausal.vertical.context import PublicContext, fingerprint, load_public_context
from collabcausal.vertical.keys import KeyOwner
from collabcausal.vertical.parameters import INPUT_BOUND, PRESETS, CKKSParameters, preset

__all__ = [
    "INPUT_BOUND",
    "PRESETS",
    "CKKSParameters",
    "EncryptedColumn",
    "KeyOwner",
    "PublicContext",
    "fingerprint",
    "load_public_context",
    "preset",
]
