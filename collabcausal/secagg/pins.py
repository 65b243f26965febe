"""Whom a party aggregates with: the peers it pinned, and the fewest independent parties it accepts.

The coordinator relays every advertisement and, with ``collabcausal certs init``, holds the study CA
key: it can mint certificates for parties of its own and send a victim the roster {victim, its own
k parties}. Checked against the CA alone, that roster verifies, the victim calibrates its noise
share to k other parties and the coordinator, knowing every mask, reads the victim's values under
one share of noise (measured: effective epsilon 1.45 / 3.29 / 13.08 at k = 2 / 9 / 99 for a charge
of epsilon 1; tests/secagg/test_secagg_attacks.py). So a party trusts a roster only through:

* **pins** (:class:`PeerPolicy` ``pins``): each peer's name and the SHA-256 fingerprint of its
  certificate, exchanged out of band; a certificate not pinned is refused whatever CA signed it;
* **roles**: only a party's certificate (clientAuth, not the analyst's) is ever on a roster;
* **independence and a minimum** (``min_parties``): the verified roster names distinct parties
  with distinct keys, at least ``min_parties`` of them (this party included), and the noise share
  is calibrated to that verified count, never to a number the coordinator sends.

:func:`verified_peers` applies these rules to a list of signed advertisements; secure aggregation
(protocol.py) and any other protocol that takes peers' public keys from a relay (the vertical
protocol's contexts) call it, before anything is charged.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from cryptography import x509

from collabcausal.errors import IdentityError, PolicyError
from collabcausal.secagg.identity import Signer, Verifier, fingerprint

ANY = "any"
"""``[secure_aggregation] peers = "any"``: trust every party certificate of the study CA."""
DEFAULT_MIN_PARTIES = 3
"""With pins: this party and two pinned peers, so that one peer colluding with the coordinator still
leaves a third party's noise share and masks (docs/secure-aggregation.md)."""
ANY_MIN_PARTIES = 2
KEY_KIND = "key-advertisement"
_HEX64 = re.compile(r"[0-9a-f]{64}")

__all__ = [
    "ANY",
    "ANY_MIN_PARTIES",
    "DEFAULT_MIN_PARTIES",
    "PeerPolicy",
    "is_fingerprint",
    "normal_fingerprint",
    "verified_peers",
]


@dataclass(frozen=True)
class PeerPolicy:
    """A party's rule for the rosters it aggregates over (party.toml ``[secure_aggregation]``).

    Parameters
    ----------
    pins : mapping of str to str, or None
        Peer name -> SHA-256 fingerprint (64 hex digits) of its certificate; ``None`` is
        ``peers = "any"``: any party certificate of the study CA (honest-but-curious coordinator only).
    min_parties : int
        The fewest parties on a verified roster, this party included (two or more).
    """

    pins: Mapping[str, str] | None
    min_parties: int

    def __post_init__(self) -> None:
        if int(self.min_parties) != self.min_parties or self.min_parties < 2:
            raise PolicyError(f"min_parties must be an integer >= 2, got {self.min_parties!r}", "e.g. min_parties = 3")
        if self.pins is None:
            return
        bad = [name for name, value in self.pins.items() if not is_fingerprint(value)]
        if bad:
            raise PolicyError(
                f"the pin of {bad[0]!r} is not a SHA-256 fingerprint (64 lower-case hex digits)",
                "copy it from `collabcausal certs fingerprint` at that party",
            )
        if len(set(self.pins.values())) != len(self.pins):
            raise PolicyError("two pinned peers share one certificate fingerprint", "pin each party's own certificate")

    @property
    def pinned(self) -> bool:
        """Whether rosters are checked against pins (a malicious coordinator cannot add parties)."""
        return self.pins is not None

    def verifier(self, ca: x509.Certificate | None, own: Signer) -> Verifier:
        """The :class:`Verifier` of this policy for the party holding ``own`` (its own certificate pinned too).

        Raises
        ------
        PolicyError
            The pins name this party with another certificate.
        """
        if self.pins is None:
            return Verifier(ca)
        mine = fingerprint(own.certificate)
        if self.pins.get(own.name, mine) != mine:
            raise PolicyError(
                f"[secure_aggregation] peers pins this party {own.name!r} to another certificate",
                "pin this party's own certificate (`collabcausal certs fingerprint`), or leave it out",
            )
        return Verifier(ca, {**self.pins, own.name: mine})

    def describe(self) -> str:
        """One line for ``party join --check`` and the study report: what the aggregation holds against."""
        if self.pins is None:
            return (
                f'peers = "any", at least {self.min_parties} parties: any party certificate of the study CA is '
                "trusted, so secure aggregation holds only against an honest-but-curious coordinator"
            )
        return (
            f"pinned to {len(self.pins)} peers ({', '.join(sorted(self.pins))}), at least {self.min_parties} "
            "parties: holds against a malicious coordinator that issues the certificates"
        )


def is_fingerprint(value: str) -> bool:
    """Whether ``value`` is a pinnable SHA-256 fingerprint: 64 lower-case hex digits."""
    return bool(_HEX64.fullmatch(value))


def normal_fingerprint(value: str) -> str:
    """A fingerprint as pinned: lower case, without the ``:`` separators some tools print."""
    return value.replace(":", "").strip().lower()


def verified_peers(
    advertisements: Sequence[Mapping[str, object]],
    verifier: Verifier,
    *,
    min_parties: int,
    study: str,
    round_id: str,
    kind: str = KEY_KIND,
) -> dict[str, bytes]:
    """Party name -> advertised 32 bytes, for a roster every member of which passes the rules.

    Each advertisement must verify (:meth:`Verifier.verify`: pinned or CA-chained per the verifier,
    a party's certificate, in date, signed for ``study``, ``round_id`` and ``kind``); no name and no
    advertised key may appear twice (one holder posing as two parties); and the roster must count
    ``min_parties`` or more.

    Raises
    ------
    IdentityError
        An advertisement fails (the message names its party), or a name or key appears twice.
    PolicyError
        Fewer than ``min_parties`` parties.

    Examples
    --------
    A party node's verifier carries its ``[secure_aggregation]`` pins (its own certificate added):
    ``verifier = collabcausal.party.secagg.require_identity(party).verifier``. A two-party protocol
    checking the other party's signed CKKS context before anything is charged::

        (owner, digest), = verified_peers([advertisement], verifier, min_parties=1, study=study,
                                          round_id=round_id, kind=CONTEXT_KIND).items()
    """
    peers: dict[str, bytes] = {}
    restart = "restart the round with fresh keys; if it recurs, the relay is tampering with advertisements"
    for advertisement in advertisements:
        try:
            name, value = verifier.verify(advertisement, study=study, round_id=round_id, kind=kind)
        except IdentityError as exc:
            raise IdentityError(f"round {round_id!r} refused: {exc.problem}", exc.fix) from None
        if name in peers:
            raise IdentityError(f"round {round_id!r} refused: {name!r} is advertised twice", restart)
        if value in peers.values():
            twin = next(p for p, v in peers.items() if v == value)
            raise IdentityError(f"round {round_id!r} refused: {name!r} and {twin!r} advertise one key", restart)
        peers[name] = value
    if len(peers) < min_parties:
        raise PolicyError(
            f"round {round_id!r} refused: {len(peers)} verified parties ({', '.join(sorted(peers))}), fewer than "
            f"min_parties = {min_parties}",
            "wait for more pinned parties; a study of two must set [secure_aggregation] min_parties = 2 knowingly "
            "(the other party with the coordinator then learns this party's values under its own share of the "
            "noise), or run with secure_aggregation = false (each party adds its full noise)",
        )
    return peers
