"""Secure aggregation at the party: round keys, and DP releases masked so only their sum is seen.

The party side of :mod:`collabcausal.secagg` (docs/secure-aggregation.md) for the operations that
release a sum over parties (``dp_effects``):

``secagg_keys``
    A fresh X25519 round key, advertised with a signature by the party's study certificate
    (:class:`~collabcausal.secagg.identity.Signer`). Nothing about the rows: no charge.
A masked release (:func:`masked_release`)
    Given the round's advertisements, the party verifies every one of them (the study CA, and
    that its own key is its own) **before** it charges its ledger; it calibrates its noise share so
    that the sum of ``n_honest = roster - 1`` shares is (epsilon, delta)-DP (the coordinator
    colluding with one party learns that party's share, not the others'), adds it to its
    fixed-point values and masks them. A round key masks one release per label, once.

The roster, hence ``n_honest``, is what the party verified, not a number the coordinator sends:
a coordinator cannot lower the noise by claiming more parties than signed advertisements.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from collabcausal.errors import IdentityError, InputError, PolicyError
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
    encode,
    masked_contribution,
    noise_share,
    share_calibration,
    verified_roster,
)

MAX_OPEN_ROUNDS = 16


@dataclass(frozen=True)
class Identity:
    """A party's secure-aggregation identity: its certificate's signer and the study CA's verifier."""

    signer: Signer
    verifier: Verifier


def attach_identities(parties: Iterable[Party], identities: tuple[Mapping[str, Signer], Verifier]) -> None:
    """Give each party its signer and the study verifier (simulations: :func:`secagg.simulation_identities`)."""
    signers, verifier = identities
    for party in parties:
        party.secagg_identity = Identity(signers[party.name], verifier)


class IdentityFiles:
    """A party.toml's mutual-TLS files, read as an :class:`Identity` when a round first needs it.

    A party that never joins a secure-aggregation round (or runs in process without certificates)
    does not need the files; one that does gets their errors (missing file, wrong key) then.
    """

    def __init__(self, ca: Path, cert: Path, key: Path) -> None:
        self.files = (ca, cert, key)

    @cached_property
    def signer(self) -> Signer:
        """``[analyst] cert`` and ``key``."""
        return Signer.from_files(self.files[1], self.files[2])

    @cached_property
    def verifier(self) -> Verifier:
        """``[analyst] ca``."""
        return Verifier.from_file(self.files[0])


@operation(KEYS_OPERATION, private_data=False)
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
    while len(rounds) > MAX_OPEN_ROUNDS:
        rounds.popitem(last=False)
    return Message(KEYS_OPERATION, {"advertisement": advertisement})


def require_identity(party: Party) -> Identity | IdentityFiles:
    """The party's identity, or a one-line refusal saying how to get one."""
    identity = party.secagg_identity
    if identity is None:
        raise PolicyError(
            f"party {party.name!r} has no study certificate to sign secure-aggregation keys",
            "run the party with mutual TLS ([analyst] ca, cert, key in party.toml), or set "
            "secure_aggregation = false in study.toml",
        )
    if identity.signer.name != party.name:
        raise IdentityError(
            f"party {party.name!r} holds the certificate of {identity.signer.name!r}",
            "use the certificate issued to this party's name",
        )
    return identity


@dataclass(frozen=True)
class MaskedRelease:
    """A checked secure-aggregation round for one release; :meth:`reply` noises and masks the values."""

    state: RoundKey
    advertisements: list[Mapping[str, object]]
    identity: Identity | IdentityFiles
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
        """What the ledger records about the round."""
        return {"secagg_round": self.state.round_id, "n_parties": self.n_parties, "n_honest": self.n_honest,
                "sigma_share": self.sigma_share, "scale_bits": SCALE_BITS}

    def reply(self, operation_name: str, values: ArrayLike) -> Message:
        """Encode ``values``, add this party's noise share, mask; the reply carries only the masked vector."""
        flat = np.asarray(values, dtype=float).ravel()
        if flat.size != self.length:
            raise InputError(f"{flat.size} values for a round of {self.length}", "report this bug")
        noisy = encode(flat, SCALE_BITS) + noise_share(self.length, self.sigma_share).view(np.uint64)
        masked = masked_contribution(self.state, self.state.name, self.advertisements, self.identity.verifier, noisy,
                                     self.label, min_parties=self.n_parties)
        params = {"sigma_share": self.sigma_share, "scale_bits": SCALE_BITS, "n_parties": self.n_parties,
                  "n_honest": self.n_honest}
        return Message(operation_name, params, {"masked": masked})


def masked_release(
    party: Party, study: str, secagg: Mapping[str, Any], label: str, *, sensitivity: float, rho: float,
    length: int, value_bound: float,
) -> MaskedRelease:
    """Check a round and calibrate this party's share, before anything is charged or computed.

    Parameters
    ----------
    party : Party
    study : str
        The request's study (the round key must be for it).
    secagg : mapping
        ``round`` (id from ``secagg_keys``) and ``advertisements`` (every party's, as relayed).
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
        No identity, unknown round, a used label, a roster that fails verification or has fewer
        than two parties, or values that could wrap around.
    """
    identity = require_identity(party)
    round_id = secagg.get("round")
    state = party.secagg_rounds.get(round_id) if isinstance(round_id, str) else None
    if state is None:
        raise PolicyError(
            f"party {party.name!r} holds no key for round {round_id!r}", f"ask {KEYS_OPERATION} for the round first"
        )
    if state.study != study:
        raise PolicyError(f"round {round_id!r} is for study {state.study!r}, not {study!r}", "use the study's round")
    if label in state.used_labels:
        raise PolicyError(f"round {round_id!r} already masked a {label} release", "start a new round (fresh keys)")
    advertisements = secagg.get("advertisements")
    if not isinstance(advertisements, list) or not all(isinstance(a, dict) for a in advertisements):
        raise InputError("secagg advertisements must be a list of key advertisements", "relay every party's")
    n_parties = len(verified_roster(state, advertisements, identity.verifier))
    if n_parties < 2:
        raise PolicyError(f"round {round_id!r} has {n_parties} party", "secure aggregation needs two or more")
    sigma = share_calibration(sensitivity, rho, n_parties=n_parties, length=length, value_bound=value_bound)
    return MaskedRelease(state, advertisements, identity, label, length, n_parties, sigma)
