"""The stages of one secure-aggregation round, as pure functions (no transport).

Pairwise masking (Bonawitz et al. 2017, "Practical Secure Aggregation for Privacy-Preserving
Machine Learning", CCS, section 4 without the secret sharing of masks: a dropout fails the round).
A round has a study, a round id and a roster of parties; the coordinator relays messages only.

1. **Keys** (party, :func:`advertise`): a fresh X25519 key pair for this round; the party sends
   the signed advertisement (identity.py) and keeps the :class:`RoundKey`.
2. **Masked upload** (party, :func:`masked_contribution`): given every party's advertisement, the
   party verifies the roster against its pins and ``min_parties`` (:func:`verified_roster`,
   pins.py), derives a seed with each other party (:func:`pair_seeds`: every key exchange checked
   before anything is charged) and uploads
   ``values + sum_{peer after me} mask - sum_{peer before me} mask (mod 2^64)`` (:func:`apply_masks`).
3. **Sum** (coordinator, :func:`aggregate`): the masks cancel in the sum over the whole roster;
   the coordinator learns the sum modulo 2^64 and nothing else.
4. **Failure**: a missing upload raises :class:`RoundFailed`. The masks of the parties present do
   not cancel without the missing one, so nothing is unmasked; the round restarts under a new round
   id, with fresh keys, among the remaining parties. Each attempt that uploads is a new DP release
   (fresh noise) that each party charges to its ledger again.

Values are encoded by fixed_point.py and carry each party's noise share (noise.py) before step 2.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey
from numpy.typing import ArrayLike, NDArray

from collabcausal.errors import IdentityError, InputError, ProtocolError, StudyFailedError
from collabcausal.secagg.crypto import expand_mask, generate_round_key, pairwise_seed, public_bytes
from collabcausal.secagg.identity import Signer, Verifier
from collabcausal.secagg.pins import verified_peers

__all__ = [
    "RoundFailed",
    "RoundKey",
    "advertise",
    "aggregate",
    "apply_masks",
    "masked_contribution",
    "pair_seeds",
    "release_label",
    "verified_roster",
]


class RoundFailed(StudyFailedError):
    """A secure-aggregation round that cannot be completed (a party dropped out)."""

    def __init__(self, problem: str) -> None:
        super().__init__(problem, "restart the round without the dropped parties; fresh keys")


@dataclass
class RoundKey:
    """A party's private state for one round: its X25519 key and the labels already masked.

    Single use per label: masking two different vectors under one (round, label) would let the
    coordinator subtract the uploads and learn their difference, so the second is refused.
    """

    name: str
    study: str
    round_id: str
    private_key: X25519PrivateKey = field(repr=False)
    used_labels: set[str] = field(default_factory=set)


def advertise(signer: Signer, study: str, round_id: str) -> tuple[RoundKey, dict[str, str]]:
    """Stage 1 (party): a fresh round key and its signed advertisement for the coordinator to relay."""
    study, round_id = _text(study, "study"), _text(round_id, "round id")
    key = generate_round_key()
    return RoundKey(signer.name, study, round_id, key), signer.advertise(study, round_id, public_bytes(key))


def masked_contribution(
    state: RoundKey,
    own_name: str,
    advertisements: Sequence[Mapping[str, object]],
    verifier: Verifier,
    values: ArrayLike,
    label: str,
    *,
    min_parties: int = 2,
) -> NDArray[np.uint64]:
    """Stage 2 (party): ``values`` (uint64, noise included) plus pairwise masks, mod 2^64.

    The three steps in one call: :func:`verified_roster`, :func:`pair_seeds`, :func:`apply_masks`.
    A party that charges a ledger calls the first two before the charge and the third after
    (collabcausal/party/secagg.py).

    Parameters
    ----------
    state : RoundKey
        From :func:`advertise` for this round.
    own_name : str
        This party's roster name (must be the state's).
    advertisements : sequence of dict
        Every party's advertisement as relayed by the coordinator, this party's own included: the
        roster of the round.
    verifier : Verifier
        The party's pins (or the study CA).
    values : array of uint64
        The encoded values with this party's noise share added.
    label : str
        The release ("nuisance", "scores", ...): masks of different labels are independent.
    min_parties : int
        Smallest roster accepted (pins.py); at least the parties the noise was calibrated for.

    Raises
    ------
    IdentityError
        As :func:`verified_roster` and :func:`pair_seeds`.
    PolicyError
        The roster is smaller than ``min_parties``.
    InputError
        ``values`` are not uint64, the key is another party's, or ``label`` was used.
    """
    if own_name != state.name:
        raise InputError(f"this round key belongs to {state.name!r}, not {own_name!r}", "use the party's own key")
    seeds = pair_seeds(state, verified_roster(state, advertisements, verifier, min_parties=min_parties), label)
    return apply_masks(state, seeds, values, label)


def verified_roster(
    state: RoundKey, advertisements: Sequence[Mapping[str, object]], verifier: Verifier, *, min_parties: int = 2
) -> dict[str, bytes]:
    """Party name -> X25519 public key of every advertisement, each verified (stage 2's first step).

    :func:`~collabcausal.secagg.pins.verified_peers` (pins or CA, roles, no name or key twice, at
    least ``min_parties``), and the roster carries this party with its own key.

    Raises
    ------
    IdentityError
        An advertisement fails, or the roster lacks this party or has a stranger's key for it.
    PolicyError
        Fewer than ``min_parties`` parties.
    """
    peers = verified_peers(
        advertisements, verifier, min_parties=max(int(min_parties), 2), study=state.study, round_id=state.round_id
    )
    if state.name not in peers:
        raise IdentityError(f"round {state.round_id!r} refused: the roster lacks this party {state.name!r}", _RESTART)
    if peers[state.name] != public_bytes(state.private_key):
        raise IdentityError(
            f"round {state.round_id!r} refused: the key advertised for {state.name!r} is not this party's", _RESTART
        )
    return peers


def pair_seeds(state: RoundKey, roster: Mapping[str, bytes], label: str) -> dict[str, bytes]:
    """Stage 2's key check: the pairwise seed with every other party of ``roster`` for ``label``.

    Every X25519 exchange is done here, so a low-order (e.g. all-zero) key, whose shared secret
    would be zero, is refused before the party charges anything or masks a value.

    Raises
    ------
    IdentityError
        A peer's key is a low-order point (the message names the peer).
    InputError
        ``label`` was already masked under this round key.
    """
    label = _unused(state, label)
    seeds = {}
    for peer, public in roster.items():
        if peer == state.name:
            continue
        try:
            seeds[peer] = pairwise_seed(
                state.private_key, public, study=state.study, round_id=state.round_id, names=(state.name, peer),
                label=label,
            )
        except IdentityError as exc:
            raise IdentityError(
                f"round {state.round_id!r} refused: the key of {peer!r}: {exc.problem}", exc.fix
            ) from None
    return seeds


def release_label(label: str, *, sensitivity: float, rho: float, length: int) -> str:
    """The label a release's masks are derived under: its name and the terms each party calibrates its share for.

    Every party calibrates its noise share on the assumption that the others calibrate theirs for the same
    sensitivity, rho and length. A coordinator that sends the parties different requests (another rho, or another
    sensitivity through another projection or cross weight) would otherwise collect a sum in which a victim's record
    is covered by shares calibrated for less; with the terms in the label the parties' masks do not cancel, and the
    sum it decodes is uniform noise.
    """
    return f"{_text(label, 'label')}|sensitivity={float(sensitivity)!r}|rho={float(rho)!r}|length={int(length)}"


def apply_masks(state: RoundKey, seeds: Mapping[str, bytes], values: ArrayLike, label: str) -> NDArray[np.uint64]:
    """Stage 2's upload: ``values + sum_{peer after me} mask - sum_{peer before me} mask`` mod 2^64.

    Marks ``label`` used: a round key masks one vector per label.

    Raises
    ------
    InputError
        ``values`` are not uint64, or ``label`` was already masked.
    """
    label = _unused(state, label)
    arr = np.asarray(values)
    if arr.dtype != np.uint64:
        raise InputError(f"masked values must be uint64, got {arr.dtype}", "encode them with secagg.encode()")
    state.used_labels.add(label)
    out = arr.copy().ravel()
    for peer, seed in seeds.items():
        mask = expand_mask(seed, label, out.size)
        out = out + mask if peer > state.name else out - mask
    return out.reshape(arr.shape)


def aggregate(contributions: Mapping[str, ArrayLike], roster: Sequence[str]) -> NDArray[np.uint64]:
    """Stage 3 (coordinator): the sum modulo 2^64 of one upload from every party on the roster.

    Raises
    ------
    RoundFailed
        A party of the roster did not upload: the round is abandoned, nothing is unmasked.
    ProtocolError
        An upload from a party not on the roster, a duplicate roster name, or uploads of different
        shapes or of a dtype other than uint64.
    """
    names = list(roster)
    if len(set(names)) != len(names) or not names:
        raise ProtocolError(f"the roster {names} is empty or names a party twice", "use the round's advertised parties")
    missing = sorted(set(names) - set(contributions))
    if missing:
        raise RoundFailed(f"no masked upload from {', '.join(missing)}; the round's masks cannot cancel")
    strangers = sorted(set(contributions) - set(names))
    if strangers:
        raise ProtocolError(f"uploads from parties not on the round's roster: {', '.join(strangers)}", "drop them")
    arrays = {name: np.asarray(contributions[name]) for name in names}
    shapes = {arr.shape for arr in arrays.values()}
    dtypes = {str(arr.dtype) for arr in arrays.values()}
    if len(shapes) != 1 or dtypes != {"uint64"}:
        raise ProtocolError(
            f"masked uploads must share one shape and be uint64, got {sorted(shapes)}, {sorted(dtypes)}",
            "restart the round; every party must mask the same release",
        )
    total = np.zeros(shapes.pop(), dtype=np.uint64)
    for arr in arrays.values():
        total += arr
    return total


_RESTART = "restart the round with fresh keys; if it recurs, the relay is tampering with advertisements"


def _unused(state: RoundKey, label: str) -> str:
    label = _text(label, "label")
    if label in state.used_labels:
        raise InputError(
            f"round {state.round_id!r} already masked a release labelled {label!r}",
            "start a new round (fresh keys) for a new release",
        )
    return label


def _text(value: str, what: str) -> str:
    if not isinstance(value, str) or not value:
        raise InputError(f"the {what} must be a non-empty string, got {value!r}", f"name the {what}, e.g. '1'")
    return value
