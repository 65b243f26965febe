"""Secure aggregation at the party: round keys, and DP releases masked so only their sum is seen.

The party side of :mod:`collabcausal.secagg` (docs/secure-aggregation.md) for the operations that
release a sum over parties (``dp_effects``):

``secagg_keys``
    A fresh X25519 round key, advertised with a signature by the party's study certificate
    (:class:`~collabcausal.secagg.identity.Signer`). Nothing about the rows: no charge.
A masked release (:func:`masked_release`)
    Given the round's advertisements, the party checks, **before** it charges its ledger, every
    advertisement against its ``[secure_aggregation]`` rules (pinned peers or ``"any"``, party
    certificates only, at least ``min_parties``; :mod:`collabcausal.secagg.pins`), that its own key
    is its own, and every pairwise key exchange; it calibrates its noise share so that the sum of
    ``n_honest = roster - 1`` shares is (epsilon, delta)-DP (the coordinator colluding with one
    party learns that party's share, not the others'), adds it to its fixed-point values and masks
    them. A round key masks one release per label, once; a round id is never opened twice.

The roster, hence ``n_honest``, is what the party verified against its own pins, not a number or a
certificate the coordinator supplies: a coordinator cannot lower the noise by adding parties of its
own, nor by claiming more parties than signed advertisements.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
from cryptography import x509
from numpy.typing import ArrayLike, NDArray

from collabcausal.errors import IdentityError, InputError, PolicyError
from collabcausal.estimators.validation import refuse_unknown_keys
from collabcausal.messages import Message
from collabcausal.party.node import Party
from collabcausal.party.operations import operation
from collabcausal.secagg import (
    KEYS_OPERATION,
    SCALE_BITS,
    RoundKey,
    Signer,
    Verifier,
    advertise,
    apply_masks,
    encode,
    noise_share,
    pair_seeds,
    release_label,
    share_calibration,
    verified_roster,
)
from collabcausal.secagg.identity import load_certificate
from collabcausal.secagg.pins import DEFAULT_MIN_PARTIES, PeerPolicy

MAX_OPEN_ROUNDS = 16
"""Round keys kept; an older round is closed, and its id can never be opened again."""
SECAGG_KEYS = frozenset({"round", "advertisements"})
"""The keys of a request's ``secagg`` (the analyst's :func:`~collabcausal.analyst.secure_sum.secure_sum`): a round
carrying any other is refused (:func:`secagg_spec`)."""


@dataclass(frozen=True)
class Identity:
    """A party's secure-aggregation identity: its signing certificate, the study CA, its peer rules.

    ``peers`` is ``None`` for a party.toml without ``[secure_aggregation]``: such a party refuses
    every round (:func:`require_identity`), naming the section to add.
    """

    signer: Signer
    ca: x509.Certificate | None
    peers: PeerPolicy | None

    @property
    def verifier(self) -> Verifier:
        """The advertisements' verifier: this party's pins (its own certificate included) or the study CA."""
        return require_peers(self).verifier(self.ca, self.signer)


def attach_identities(parties: Iterable[Party], identities: tuple[Mapping[str, Signer], Verifier]) -> None:
    """Give each party its signer and pins to every other (simulations: :func:`secagg.simulation_identities`).

    Simulated parties are pinned to each other, with ``min_parties`` the default 3, or every
    party of a smaller simulation (a simulation has no coordinator to defend against).
    """
    signers, verifier = identities
    members = list(parties)
    pins = dict(verifier.pins) if verifier.pins is not None else None
    peers = PeerPolicy(pins, min(DEFAULT_MIN_PARTIES, max(len(members), 2)))
    for party in members:
        party.secagg_identity = Identity(signers[party.name], verifier.ca, peers)


class IdentityFiles:
    """A party.toml's signing certificate, study CA and ``[secure_aggregation]`` rules, read when a round needs them.

    A party that never joins a secure-aggregation round (or runs in process without certificates)
    does not need the files; one that does gets their errors (missing file, wrong key) then.
    """

    def __init__(self, ca: Path | None, cert: Path, key: Path, peers: PeerPolicy | None) -> None:
        self.files = (ca, cert, key)
        self.peers = peers

    @cached_property
    def identity(self) -> Identity:
        """The files read: signer (``cert``, ``key``), study CA (``ca``, if any) and the peer rules."""
        ca, cert, key = self.files
        return Identity(Signer.from_files(cert, key), None if ca is None else load_certificate(ca), self.peers)


@operation(KEYS_OPERATION, parameters={"round"}, private_data=False)
def secagg_keys(party: Party, request: Message) -> Message:
    """Stage 1: a fresh round key for ``params["round"]`` of ``params["study"]``, signed."""
    identity = require_identity(party)
    study, round_id = (request.params.get(k) for k in ("study", "round"))
    if not isinstance(round_id, str) or not round_id:
        raise InputError(f"{KEYS_OPERATION} needs a round id", "send params round='<study>/<release>/<attempt>'")
    rounds = party.secagg_rounds
    if round_id in rounds:
        raise PolicyError(
            f"party {party.name!r} already made a key for round {round_id!r}",
            "start a new round (a new round id): a round key is made once",
        )
    state, advertisement = advertise(identity.signer, str(study or ""), round_id)
    rounds[round_id] = state
    open_rounds = [r for r, s in rounds.items() if s is not None]
    for closed in open_rounds[:-MAX_OPEN_ROUNDS]:
        rounds[closed] = None  # the id stays: it is never opened again
    return Message(KEYS_OPERATION, {"advertisement": advertisement})


def require_identity(party: Party, purpose: str = "secure-aggregation keys") -> Identity:
    """The party's identity, or a one-line refusal saying how to get one (``purpose``: what it would sign)."""
    held = party.secagg_identity
    if held is None:
        optional = purpose == "secure-aggregation keys"
        raise PolicyError(
            f"party {party.name!r} has no study certificate to sign {purpose}",
            "run the party with mutual TLS ([analyst] ca, cert, key in party.toml)"
            + (", or set secure_aggregation = false in study.toml" if optional else ""),
        )
    identity = held.identity if isinstance(held, IdentityFiles) else held
    require_peers(identity)
    if identity.signer.name != party.name:
        raise IdentityError(
            f"party {party.name!r} holds the certificate of {identity.signer.name!r}",
            "use the certificate issued to this party's name",
        )
    return identity


def require_peers(identity: Identity) -> PeerPolicy:
    """The identity's peer rules, or the refusal of a party.toml that names none."""
    if identity.peers is None:
        raise PolicyError(
            "party.toml has no [secure_aggregation] section, so this party cannot tell the study's parties "
            "from certificates the coordinator mints",
            'add [secure_aggregation] peers = [{name = "...", fingerprint = "..."}, ...] (`collabcausal certs '
            'fingerprint` at each peer), or peers = "any" to trust the coordinator\'s roster',
        )
    return identity.peers


def secagg_spec(spec: object, operation_name: str) -> Mapping[str, Any] | None:
    """A request's ``secagg`` checked from the request alone: ``None`` when absent, else a mapping of
    :data:`SECAGG_KEYS` only (one-line :class:`InputError` otherwise), before anything is charged or read."""
    if spec is None:
        return None
    if not isinstance(spec, Mapping):
        raise InputError(f"{operation_name} secagg must be a mapping",
                         "send the round's parameters (docs/secure-aggregation.md)")
    refuse_unknown_keys(spec, SECAGG_KEYS, f"{operation_name} secagg")
    return spec


@dataclass(frozen=True)
class MaskedRelease:
    """A checked secure-aggregation round for one release; :meth:`reply` noises and masks the values."""

    state: RoundKey
    seeds: Mapping[str, bytes]
    pinned: bool
    release: str
    label: str
    length: int
    n_parties: int
    sigma_share: float

    @property
    def n_honest(self) -> int:
        """Shares the calibration counts on: every party of the verified roster but one."""
        return self.n_parties - 1

    @property
    def details(self) -> dict[str, Any]:
        """What the ledger records about the round (and the reply states)."""
        return {"secagg_round": self.state.round_id, "n_parties": self.n_parties, "n_honest": self.n_honest,
                "sigma_share": self.sigma_share, "scale_bits": SCALE_BITS, "pinned": self.pinned}

    def share(self) -> NDArray[np.int64]:
        """A fresh draw of this party's noise share (integer units of ``2^-SCALE_BITS``)."""
        return noise_share(self.length, self.sigma_share)

    def reply(self, operation_name: str, values: ArrayLike) -> Message:
        """Encode ``values``, add this party's noise share, mask; the reply carries only the masked vector."""
        flat = np.asarray(values, dtype=float).ravel()
        if flat.size != self.length:
            raise InputError(f"{flat.size} values for a round of {self.length}", "report this bug")
        return self.masked(operation_name, encode(flat, SCALE_BITS) + self.share().view(np.uint64))

    def masked(self, operation_name: str, noisy: NDArray[np.uint64]) -> Message:
        """Mask values already encoded with this party's share in them (:meth:`share`); reply with them alone."""
        if noisy.shape != (self.length,) or noisy.dtype != np.uint64:
            raise InputError(f"{noisy.shape} encoded values for a round of {self.length}", "report this bug")
        masked = apply_masks(self.state, self.seeds, noisy, self.label)
        self.state.used_labels.add(self.release)  # one release per name per round, whatever its terms
        params = {k: v for k, v in self.details.items() if k != "secagg_round"}
        return Message(operation_name, params, {"masked": masked})


def masked_release(
    party: Party, study: str, secagg: Mapping[str, Any], label: str, *, sensitivity: float, rho: float,
    length: int, value_bound: float,
) -> MaskedRelease:
    """Check a round and calibrate this party's share, before anything is charged or computed.

    Everything a hostile coordinator controls is checked here: the round (this party's own key, for
    this study, not closed, the label unused), every advertisement against the party's pins and
    roles and the roster against ``min_parties`` (:func:`~collabcausal.secagg.verified_roster`),
    and every pairwise key exchange (:func:`~collabcausal.secagg.pair_seeds`: a low-order key is
    refused now, not after the charge). The share is calibrated to the verified roster less one.

    Parameters
    ----------
    party : Party
    study : str
        The request's study (the round key must be for it).
    secagg : mapping
        ``round`` (id from ``secagg_keys``) and ``advertisements`` (every party's, as relayed); no other key
        (:func:`secagg_spec`).
    label : str
        The release (the operation's name): one mask per label per round.
    sensitivity : float
        L2 sensitivity of the float vector under the ledger's relation.
    rho : float
        The zCDP target for the sum (charged to this party's ledger).
    length : int
        Length of the released vector (public: from the request).
    value_bound : float
        Public bound on |entry| of this party's vector (for the wrap-around check).

    Raises
    ------
    PolicyError, IdentityError, InputError
        No identity or no ``[secure_aggregation]`` rules, an unknown or closed round, a used label, a
        roster that fails verification or has fewer than ``min_parties`` parties, a low-order key,
        values that could wrap around, or a ``secagg`` key other than :data:`SECAGG_KEYS`.
    """
    secagg_spec(secagg, label)  # the callers check it first, before their own state changes
    identity = require_identity(party)
    round_id = secagg.get("round")
    state = party.secagg_rounds.get(round_id) if isinstance(round_id, str) else None
    if state is None:
        known = isinstance(round_id, str) and round_id in party.secagg_rounds
        raise PolicyError(
            f"party {party.name!r} holds no key for round {round_id!r}" + (" (closed)" if known else ""),
            f"ask {KEYS_OPERATION} for a new round first",
        )
    if state.study != study:
        raise PolicyError(f"round {round_id!r} is for study {state.study!r}, not {study!r}", "use the study's round")
    if label in state.used_labels:
        raise PolicyError(f"round {round_id!r} already masked a {label} release", "start a new round (fresh keys)")
    advertisements = secagg.get("advertisements")
    if not isinstance(advertisements, list) or not all(isinstance(a, dict) for a in advertisements):
        raise InputError("secagg advertisements must be a list of key advertisements", "relay every party's")
    peers = require_peers(identity)
    roster = verified_roster(state, advertisements, identity.verifier, min_parties=peers.min_parties)
    terms = release_label(label, sensitivity=sensitivity, rho=rho, length=length)
    seeds = pair_seeds(state, roster, terms)
    sigma = share_calibration(sensitivity, rho, n_parties=len(roster), length=length, value_bound=value_bound)
    return MaskedRelease(state, seeds, peers.pinned, label, terms, length, len(roster), sigma)
